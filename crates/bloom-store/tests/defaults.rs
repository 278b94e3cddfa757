//! Unpinned rule and layout: new filters get the fast defaults (or the salted SHA-256 rule
//! when salted), snapshots written with other rules or layouts keep loading, and options
//! the defaults cannot serve fall back rather than fail.

use std::sync::Arc;

use bloom_core::{Layout, PositionRule};
use bloom_format::{DecodeOptions, Snapshot};
use bloom_store::{FilterOptions, FilteredStore, Lookup, MemoryStore, OpenOutcome, SaltPolicy};

fn header_of(path: &std::path::Path) -> bloom_format::Header {
    Snapshot::read_file(path, &DecodeOptions::unlimited())
        .unwrap()
        .header()
        .clone()
}

#[test]
fn a_snapshot_of_another_layout_and_rule_is_trusted_when_they_are_not_pinned() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.bloom");
    let memory = Arc::new(MemoryStore::new());
    // Written by a release whose default was standard + sha256-double.
    let old = FilterOptions::new(1000, 0.01)
        .with_rule(PositionRule::Sha256Double)
        .with_layout(Layout::Standard);
    let (store, _) = FilteredStore::open_and_recover(Arc::clone(&memory), old).unwrap();
    for i in 0..100 {
        store.insert(&format!("k{i}")).unwrap();
    }
    store.save_snapshot(&path).unwrap();
    drop(store);

    let (store, outcome) = FilteredStore::open(
        Arc::clone(&memory),
        FilterOptions::new(1000, 0.01).with_snapshot(&path),
    )
    .unwrap();
    assert!(
        matches!(outcome, OpenOutcome::Trusted { .. }),
        "{outcome:?}"
    );
    for i in 0..100 {
        assert_eq!(store.contains(&format!("k{i}")).unwrap(), Lookup::Present);
    }
    drop(store);
    // Pinned to the new default, the same snapshot is rebuilt instead.
    let pinned = FilterOptions::new(1000, 0.01).with_layout(Layout::SplitBlock512);
    let (_, outcome) =
        FilteredStore::open(Arc::clone(&memory), pinned.with_snapshot(&path)).unwrap();
    assert!(matches!(outcome, OpenOutcome::Bypassed(_)), "{outcome:?}");
}

#[test]
fn new_filters_get_the_fast_split_block_or_salted_sha256() {
    let dir = tempfile::tempdir().unwrap();
    for (salt, rule, salted) in [
        (SaltPolicy::None, PositionRule::Xxh3_64, false),
        (SaltPolicy::Random, PositionRule::Sha256Double, true),
    ] {
        let path = dir.path().join("s.bloom");
        let options = FilterOptions::new(1000, 0.01).with_salt(salt);
        let (store, _) =
            FilteredStore::open_and_recover(MemoryStore::new(), options.with_snapshot(&path))
                .unwrap();
        store.insert("k").unwrap();
        store.save_snapshot(&path).unwrap();
        let header = header_of(&path);
        assert_eq!(header.position_rule, rule.id());
        assert_eq!(header.layout, Layout::SplitBlock512.id());
        assert_eq!(header.salt.is_empty(), !salted);
    }
}

#[test]
fn options_the_blocked_layout_cannot_serve_fall_back_to_standard() {
    let dir = tempfile::tempdir().unwrap();
    for options in [
        FilterOptions::new(1000, 0.01).with_rule(PositionRule::Sha256Split4),
        FilterOptions::new(1000, 1e-30),
        FilterOptions::new(1000, 0.01).with_rule(PositionRule::GuavaMitz64),
    ] {
        let path = dir.path().join("s.bloom");
        let (store, _) = FilteredStore::open_and_recover(
            MemoryStore::new(),
            options.clone().with_snapshot(&path),
        )
        .unwrap_or_else(|e| panic!("{options:?}: {e}"));
        store.insert("k").unwrap();
        assert_eq!(store.contains("k").unwrap(), Lookup::Present);
        store.save_snapshot(&path).unwrap();
        assert_eq!(
            header_of(&path).layout,
            Layout::Standard.id(),
            "{options:?}"
        );
    }
}
