//! `FilteredStore::insert_with`: records the application writes with its own commit, with
//! the filter kept in step (bits first, then the commit).

mod support;

use bloom_core::Filter;
use bloom_store::{FilteredStore, Lookup, MemoryStore, PrimaryStore, StoreError};
use support::options;

#[test]
fn an_own_commit_keeps_the_filter_in_step() {
    let (w, _) = FilteredStore::open_and_recover(MemoryStore::new(), options()).unwrap();
    let mut seen = Vec::new();
    assert!(
        w.insert_with("cafe\u{301}", |store, key| {
            seen.push(key.to_vec());
            store.insert(key)
        })
        .unwrap()
    );
    // The commit got the key in the filter's encoding (NFC).
    assert_eq!(seen, ["caf\u{e9}".as_bytes()]);
    assert_eq!(w.contains("café").unwrap(), Lookup::Present);
    assert!(
        !w.insert_with("café", |store, key| store.insert(key))
            .unwrap()
    );
    assert_eq!(w.metrics().inserts, 2);
}

#[test]
fn a_failed_own_commit_commits_nothing() {
    let store = std::sync::Arc::new(MemoryStore::new());
    let (w, _) = FilteredStore::open_and_recover(std::sync::Arc::clone(&store), options()).unwrap();
    let result = w.insert_with("k", |store, _| {
        store.set_failing(true);
        let failed = store.insert(b"k");
        store.set_failing(false);
        failed
    });
    assert!(matches!(result, Err(StoreError::Store(_))));
    assert!(store.is_empty());
    // Its bits may stay: a false positive, refuted by the store.
    assert!(!w.contains("k").unwrap().is_present());
}

/// With a counting filter, an own commit that finds the key already there takes its count
/// back, so a later removal leaves nothing behind.
#[test]
fn a_counting_filter_counts_an_own_commit_once() {
    let counting = options().with_counting(true);
    let (w, _) = FilteredStore::open_and_recover(MemoryStore::new(), counting).unwrap();
    assert!(w.insert_with("k", |store, key| store.insert(key)).unwrap());
    assert!(!w.insert_with("k", |store, key| store.insert(key)).unwrap());
    assert!(w.remove("k").unwrap());
    assert_eq!(w.filter_copy().unwrap().count_ones(), 0);
}
