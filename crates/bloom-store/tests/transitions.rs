//! Every state transition of `FilteredStore`, on the in-memory and the SQLite store.

mod support;

use bloom_core::{Filter, KeyEncoding};
use bloom_store::{
    BypassReason, FilterOptions, FilteredStore, Incompatibility, Lookup, MemoryStore, Mode,
    OpenOutcome, OptionsError, PrimaryStore, SaltPolicy, StoreError,
};
use support::{Harness, assert_every_committed_key_present, claim_held, insert_all, keys, options};

/// Opens a wrapper, inserts `keys` and saves a snapshot that covers them.
fn populate<H: Harness>(h: &H, keys: &[String]) {
    let (store, _) =
        FilteredStore::open_and_recover(h.open(), options().with_snapshot(h.snapshot())).unwrap();
    insert_all(&store, keys);
    store.save_snapshot(h.snapshot()).unwrap();
}

fn assert_all_present<S: PrimaryStore>(store: &FilteredStore<S>, keys: &[String]) {
    for key in keys {
        assert_eq!(store.contains(key).unwrap(), Lookup::Present, "{key}");
    }
}

fn no_snapshot_bypasses_then_rebuild_trusts<H: Harness>(h: &H) {
    let (store, outcome) =
        FilteredStore::open(h.open(), options().with_snapshot(h.snapshot())).unwrap();
    assert!(matches!(
        outcome,
        OpenOutcome::Bypassed(BypassReason::NoSnapshot)
    ));
    assert!(matches!(
        store.mode(),
        Mode::Bypassed(BypassReason::NoSnapshot)
    ));
    assert_eq!(store.contains("x").unwrap(), Lookup::AbsentBypassed);
    assert!(matches!(
        store.save_snapshot(h.snapshot()),
        Err(StoreError::NotTrusted(BypassReason::NoSnapshot))
    ));
    for k in keys(0..50) {
        assert!(store.insert(&k).unwrap());
    }
    assert!(!store.insert("record-0").unwrap());
    let report = store.rebuild().unwrap();
    assert_eq!((report.keys_scanned, report.generation.get()), (50, 50));
    assert!(store.mode().is_trusted());
    assert_all_present(&store, &keys(0..50));
    claim_held(&store);
    let absent: Vec<Lookup> = keys(1000..1200)
        .iter()
        .map(|k| store.contains(k).unwrap())
        .collect();
    assert!(
        absent
            .iter()
            .all(|l| matches!(l, Lookup::AbsentByFilter | Lookup::FalsePositive))
    );
    assert!(absent.contains(&Lookup::AbsentByFilter));
    let m = store.metrics();
    assert_eq!(m.queries, 1 + 50 + 200);
    assert_eq!(m.lookups_avoided + m.false_positives, 200);
    assert_eq!(m.store_lookups, 1 + 50 + m.false_positives);
}

fn same_generation_is_trusted_and_older_catches_up<H: Harness>(h: &H) {
    populate(h, &keys(0..30));

    let (store, outcome) =
        FilteredStore::open(h.open(), options().with_snapshot(h.snapshot())).unwrap();
    assert!(
        matches!(outcome, OpenOutcome::Trusted { generation } if generation.get() == 30),
        "{outcome:?}"
    );
    assert_all_present(&store, &keys(0..30));
    insert_all(&store, &keys(30..45));
    drop(store); // no new snapshot: it is now 15 keys behind

    let (store, outcome) =
        FilteredStore::open(h.open(), options().with_snapshot(h.snapshot())).unwrap();
    assert!(
        matches!(
            outcome,
            OpenOutcome::CaughtUp { from, to, keys: 15, removals: 0 } if from.get() == 30 && to.get() == 45
        ),
        "{outcome:?}"
    );
    assert!(store.mode().is_trusted());
    assert_all_present(&store, &keys(0..45));
}

fn corrupt_and_incompatible_snapshots_are_bypassed_never_trusted<H: Harness>(h: &H) {
    let inserted = keys(0..200);
    populate(h, &inserted);
    let good = std::fs::read(h.snapshot()).unwrap();

    // One flipped byte anywhere: bypass, correct answers, rebuild, correct answers.
    for at in [0, 9, 20, 60, 100, good.len() / 2, good.len() - 1] {
        let mut bad = good.clone();
        bad[at] ^= 0x20;
        std::fs::write(h.snapshot(), &bad).unwrap();
        let (store, outcome) =
            FilteredStore::open(h.open(), options().with_snapshot(h.snapshot())).unwrap();
        assert!(
            matches!(outcome, OpenOutcome::Bypassed(BypassReason::Unreadable(_))),
            "byte {at}: {outcome:?}"
        );
        assert_all_present(&store, &inserted);
        store.rebuild().unwrap();
        assert_all_present(&store, &inserted);
    }
    // Truncated.
    std::fs::write(h.snapshot(), &good[..good.len() - 3]).unwrap();
    let (_, outcome) =
        FilteredStore::open(h.open(), options().with_snapshot(h.snapshot())).unwrap();
    assert!(matches!(
        outcome,
        OpenOutcome::Bypassed(BypassReason::Unreadable(_))
    ));

    // Valid snapshot, but other rules than configured.
    std::fs::write(h.snapshot(), &good).unwrap();
    let other_salt = bloom_core::Salt::new(b"other").unwrap();
    // Another encoding than the store's keys are in is refused outright.
    let Err(err) = FilteredStore::open(
        h.open(),
        options()
            .with_encoding(KeyEncoding::Utf8)
            .with_snapshot(h.snapshot()),
    ) else {
        panic!("another encoding was accepted");
    };
    assert!(
        matches!(
            &err,
            StoreError::Options(OptionsError::EncodingMismatch { store, configured })
                if store == "nfc v1" && configured == "utf8 v1"
        ),
        "{err:?}"
    );
    for (other, expected) in [
        (
            options().with_rule(bloom_core::PositionRule::Sha256Double),
            "position rule is xxh3-64, configured sha256-double",
        ),
        (
            options().with_layout(bloom_core::Layout::Standard),
            "layout is split-block-512, configured standard",
        ),
        (
            options().with_salt(SaltPolicy::Fixed(other_salt)),
            "snapshot salt differs from the configured salt",
        ),
    ] {
        let (store, outcome) =
            FilteredStore::open(h.open(), other.with_snapshot(h.snapshot())).unwrap();
        match &outcome {
            OpenOutcome::Bypassed(BypassReason::Incompatible(why)) => {
                assert_eq!(why.to_string(), expected);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(store.contains("record-7").unwrap(), Lookup::Present);
    }
}

#[test]
fn store_errors_propagate_and_never_become_wrong_answers() {
    let memory = std::sync::Arc::new(MemoryStore::new());
    let (store, _) =
        FilteredStore::open_and_recover(std::sync::Arc::clone(&memory), options()).unwrap();
    store.insert("kept").unwrap();
    memory.set_failing(true);
    assert!(matches!(store.insert("lost"), Err(StoreError::Store(_))));
    assert!(matches!(store.contains("kept"), Err(StoreError::Store(_))));
    assert!(matches!(store.rebuild(), Err(StoreError::Store(_))));
    assert!(
        store.mode().is_trusted(),
        "a failed growth rebuild keeps the trusted filter"
    );
    memory.set_failing(false);
    assert_eq!(store.contains("kept").unwrap(), Lookup::Present);
    // "lost" had its bits set before the failed commit: at worst a false positive.
    assert_eq!(store.contains("lost").unwrap(), Lookup::FalsePositive);

    // A rebuild that fails while bypassed leaves the wrapper bypassed, and says so.
    drop(store);
    let (bypassed, _) = FilteredStore::open(std::sync::Arc::clone(&memory), options()).unwrap();
    memory.set_failing(true);
    assert!(matches!(bypassed.rebuild(), Err(StoreError::Store(_))));
    assert!(matches!(
        bypassed.mode(),
        Mode::Bypassed(BypassReason::RebuildFailed)
    ));
    memory.set_failing(false);
    bypassed.rebuild().unwrap();
    assert_eq!(bypassed.contains("kept").unwrap(), Lookup::Present);
}

fn byte_keys_text_keys_and_encoded_keys_share_one_encoding<H: Harness>(h: &H) {
    let (store, _) = FilteredStore::open_and_recover(h.open(), options()).unwrap();
    store.insert("cafe\u{301}").unwrap();
    assert_eq!(store.contains("caf\u{e9}").unwrap(), Lookup::Present);
    assert_eq!(
        store.contains("caf\u{e9}".as_bytes()).unwrap(),
        Lookup::Present
    );
    // Keys read back from the store are already encoded: no second encoding.
    let encoded = store.encode("CAFE\u{301}").into_owned();
    assert!(!store.contains(&encoded).unwrap().is_present());
    assert!(store.insert(&encoded).unwrap());
    assert_eq!(store.contains("CAFE\u{301}").unwrap(), Lookup::Present);
    assert!(matches!(store.contains(b"\xff"), Err(StoreError::Key(_))));
    assert_every_committed_key_present(&store);
}

on_every_store!(
    no_snapshot_bypasses_then_rebuild_trusts,
    same_generation_is_trusted_and_older_catches_up,
    corrupt_and_incompatible_snapshots_are_bypassed_never_trusted,
    byte_keys_text_keys_and_encoded_keys_share_one_encoding,
);

#[test]
fn a_snapshot_of_foreign_unicode_tables_is_rebuilt() {
    let h = support::Memory::new();
    populate(&h, &keys(0..20));
    // The same snapshot, as a build with other Unicode tables wrote it.
    let snapshot =
        bloom_format::Snapshot::read_file(h.snapshot(), &bloom_format::DecodeOptions::unlimited())
            .unwrap();
    let (mut header, payload) = snapshot.into_parts();
    header.key_encoding.normalization_unicode = Some(bloom_format::UnicodeVersion::new(99, 0, 0));
    bloom_format::Snapshot::new(header, payload)
        .unwrap()
        .write_file(h.snapshot())
        .unwrap();
    let (store, outcome) =
        FilteredStore::open(h.open(), options().with_snapshot(h.snapshot())).unwrap();
    assert!(
        matches!(
            outcome,
            OpenOutcome::Bypassed(BypassReason::Incompatible(
                Incompatibility::UnicodeTables { .. }
            ))
        ),
        "{outcome:?}"
    );
    assert_all_present(&store, &keys(0..20));
}

#[test]
fn a_filter_past_capacity_reports_it_and_a_rebuild_grows_it() {
    let (store, _) = FilteredStore::open_and_recover(
        support::memory_store_with(&[]),
        FilterOptions::new(100, 0.01),
    )
    .unwrap();
    // Within the plan: nothing reported.
    insert_all(&store, &keys(0..90));
    let within = store.metrics();
    assert!(
        !within.over_capacity && !within.over_target_rate,
        "{within:?}"
    );
    assert_eq!(within.target_false_positive_rate, 0.01);
    assert!(
        within.remaining_capacity > 0 && within.remaining_capacity <= 20,
        "{within:?}"
    );
    assert!(within.false_positive_rate_limit > 0.01, "{within:?}");
    insert_all(&store, &keys(90..400));
    let before = store.metrics();
    assert!(before.over_capacity, "{before:?}");
    assert!(before.over_target_rate, "{before:?}");
    assert_eq!(before.remaining_capacity, 0);
    assert!(!before.capacity_limited);
    assert!(before.predicted_false_positive_rate > 0.05);
    let report = store.rebuild().unwrap();
    assert!(report.capacity >= 700, "{report:?}");
    assert!(!report.capacity_limited);
    let after = store.metrics();
    assert!(!after.over_capacity && !after.over_target_rate, "{after:?}");
    assert_eq!(after.capacity, report.capacity);
    assert!(after.remaining_capacity >= 300, "{after:?}");
    assert!(after.bits > before.bits);
    assert!(after.predicted_false_positive_rate < 0.01);
    assert_all_present(&store, &keys(0..400));
    // The grown filter's snapshot records its new plan, for `bloom inspect` to judge alike.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("grown.bloom");
    store.save_snapshot(&path).unwrap();
    let reader =
        bloom_format::SnapshotReader::open(&path, &bloom_format::DecodeOptions::unlimited())
            .unwrap();
    let plan = reader.header().plan.expect("a plan is recorded");
    assert_eq!(
        (plan.capacity, plan.false_positive_rate),
        (report.capacity, 0.01)
    );
}

#[test]
fn a_scalable_snapshot_dropped_in_is_bypassed_and_rebuilt() {
    // A chain from `bloom build --scalable` at the store's snapshot path: not a filter this
    // wrapper can trust, so every lookup asks the store until the rebuild.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("filter.bloom");
    let mut chain = bloom_core::ScalableBloomFilter::with_capacity(10, 0.01).unwrap();
    chain.insert_all(["a", "b"]);
    bloom_format::write_atomic(&path, &chain.to_snapshot(1).encode()).unwrap();
    let committed = keys(0..50);
    let refs: Vec<&str> = committed.iter().map(String::as_str).collect();
    let (store, outcome) = FilteredStore::open(
        support::memory_store_with(&refs),
        options().with_snapshot(&path),
    )
    .unwrap();
    assert!(
        matches!(
            outcome,
            OpenOutcome::Bypassed(BypassReason::Incompatible(Incompatibility::Unsupported(
                bloom_core::SnapshotError::IsScalable
            )))
        ),
        "{outcome:?}"
    );
    assert_all_present(&store, &committed);
    assert_eq!(store.contains("a").unwrap(), Lookup::AbsentBypassed);
    store.rebuild().unwrap();
    assert!(matches!(store.mode(), Mode::Trusted));
    assert_all_present(&store, &committed);
}
