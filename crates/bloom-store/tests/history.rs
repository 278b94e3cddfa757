//! A snapshot is trusted only for the history it was taken from. Every way an operator's
//! database can lose, rewrite or replace its history ends with every committed key reported
//! present, on `MemoryStore` and on a real SQLite file.
//!
//! The first four tests are the sequences that reported committed keys absent before
//! snapshots were bound to the store's identity and history.

mod support;

use bloom_store::{
    BypassReason, FilteredStore, Lookup, OpenOutcome, PrimaryStore, SnapshotRefresh,
};
use support::{Harness, assert_every_committed_key_present, insert_all, named, options};

/// Opens with the snapshot, expecting it to be refused for `reason`, then checks every key.
fn assert_refused<H: Harness>(h: &H, expected: fn(&BypassReason) -> bool) -> usize {
    let (w, outcome) =
        FilteredStore::open(h.open(), options().with_snapshot(h.snapshot())).unwrap();
    match &outcome {
        OpenOutcome::Bypassed(reason) if expected(reason) => {}
        other => panic!("{}: unexpected outcome {other:?}", h.name()),
    }
    assert_every_committed_key_present(&w)
}

/// Recovers (rebuild and fresh snapshot), checks every key, and checks that the next open
/// trusts the fresh snapshot.
fn assert_recovers<H: Harness>(h: &H, committed: u64) {
    let (w, outcome) =
        FilteredStore::open_and_recover(h.open(), options().with_snapshot(h.snapshot())).unwrap();
    match &outcome {
        OpenOutcome::Rebuilt {
            snapshot: SnapshotRefresh::Saved(g),
            report,
            ..
        } => {
            assert_eq!(g.get(), committed, "{}", h.name());
            assert_eq!(report.generation.get(), committed);
        }
        other => panic!("{}: unexpected outcome {other:?}", h.name()),
    }
    assert_eq!(assert_every_committed_key_present(&w) as u64, committed);
    drop(w);
    let (w, outcome) =
        FilteredStore::open(h.open(), options().with_snapshot(h.snapshot())).unwrap();
    assert!(
        matches!(outcome, OpenOutcome::Trusted { generation } if generation.get() == committed),
        "{}: {outcome:?}",
        h.name()
    );
    assert_every_committed_key_present(&w);
}

fn power_loss_then_crash<H: Harness>(h: &H) {
    let (w, _) =
        FilteredStore::open_and_recover(h.open(), options().with_snapshot(h.snapshot())).unwrap();
    insert_all(&w, &named("first", 0..150));
    let durable = h.backup();
    insert_all(&w, &named("first", 150..200));
    assert_eq!(w.save_snapshot(h.snapshot()).unwrap().get(), 200);
    drop(w);
    // Power loss: the last 50 commits are rolled back; the snapshot of generation 200 stays.
    h.restore(&durable);

    let (w, outcome) =
        FilteredStore::open(h.open(), options().with_snapshot(h.snapshot())).unwrap();
    assert!(
        matches!(
            outcome,
            OpenOutcome::Bypassed(BypassReason::NewerThanStore { snapshot, store })
                if snapshot.get() == 200 && store.get() == 150
        ),
        "{outcome:?}"
    );
    w.rebuild().unwrap();
    insert_all(&w, &named("second", 0..60));
    drop(w); // a crash before any save: generation 210, the stale snapshot says 200

    let refused = assert_refused(
        h,
        |r| matches!(r, BypassReason::HistoryDiverged { generation } if generation.get() == 200),
    );
    assert_eq!(refused, 210);
    assert_recovers(h, 210);
}

fn backup_restore_then_crash<H: Harness>(h: &H) {
    let (w, _) = FilteredStore::open_and_recover(h.open(), options()).unwrap();
    insert_all(&w, &named("first", 0..100));
    let backup = h.backup();
    insert_all(&w, &named("first", 100..200));
    w.save_snapshot(h.snapshot()).unwrap();
    drop(w);
    h.restore(&backup);

    let (w, outcome) =
        FilteredStore::open(h.open(), options().with_snapshot(h.snapshot())).unwrap();
    assert!(
        matches!(
            outcome,
            OpenOutcome::Bypassed(BypassReason::NewerThanStore { .. })
        ),
        "{outcome:?}"
    );
    w.rebuild().unwrap();
    insert_all(&w, &named("after-restore", 0..150));
    drop(w);

    let refused = assert_refused(h, |r| matches!(r, BypassReason::HistoryDiverged { .. }));
    assert_eq!(refused, 250);
    assert_recovers(h, 250);
}

fn new_database_old_snapshot<H: Harness>(h: &H) {
    let (w, _) = FilteredStore::open_and_recover(h.open(), options()).unwrap();
    insert_all(&w, &named("old", 0..100));
    w.save_snapshot(h.snapshot()).unwrap();
    drop(w);
    h.recreate();

    // The new database is filled without the snapshot, which stays beside it.
    let (w, _) = FilteredStore::open_and_recover(h.open(), options()).unwrap();
    insert_all(&w, &named("new", 0..120));
    drop(w);

    let refused = assert_refused(h, |r| matches!(r, BypassReason::OtherStore { .. }));
    assert_eq!(refused, 120);
    assert_recovers(h, 120);
}

fn another_stores_snapshot<H: Harness>(h: &H) {
    // Store B, with fewer keys than this one, and its snapshot.
    let other = bloom_store::MemoryStore::new();
    let (b, _) = FilteredStore::open_and_recover(&other, options()).unwrap();
    insert_all(&b, &named("other", 0..50));
    let (a, _) = FilteredStore::open_and_recover(h.open(), options()).unwrap();
    insert_all(&a, &named("this", 0..80));
    drop(a);
    // B's snapshot is dropped in where A's belongs.
    b.save_snapshot(h.snapshot()).unwrap();

    let refused = assert_refused(h, |r| matches!(r, BypassReason::OtherStore { .. }));
    assert_eq!(refused, 80);
    assert_recovers(h, 80);
}

/// A copy of the database (same identity) that received other writes: its snapshot has the
/// right identity and generation, but not the history.
fn a_diverged_copys_snapshot<H: Harness>(h: &H) {
    let (w, _) = FilteredStore::open_and_recover(h.open(), options()).unwrap();
    insert_all(&w, &named("shared", 0..40));
    drop(w);
    let copy = h.backup();

    // This machine goes on.
    let (w, _) = FilteredStore::open_and_recover(h.open(), options()).unwrap();
    insert_all(&w, &named("here", 0..30));
    drop(w);
    let here = h.backup();

    // The copy, on another machine, writes other keys up to the same generation and saves.
    let dir = tempfile::tempdir().unwrap();
    let elsewhere = dir.path().join("elsewhere.bloom");
    h.restore(&copy);
    let (w, _) = FilteredStore::open_and_recover(h.open(), options()).unwrap();
    insert_all(&w, &named("there", 0..30));
    assert_eq!(w.save_snapshot(&elsewhere).unwrap().get(), 70);
    drop(w);

    // Back on this machine, the other machine's snapshot is dropped in.
    h.restore(&here);
    std::fs::copy(&elsewhere, h.snapshot()).unwrap();
    let refused = assert_refused(
        h,
        |r| matches!(r, BypassReason::HistoryDiverged { generation } if generation.get() == 70),
    );
    assert_eq!(refused, 70);
    assert_recovers(h, 70);
}

/// A database restored together with the snapshot saved from it is still trusted: binding
/// snapshots to the history does not throw good snapshots away.
fn database_and_snapshot_restored_together<H: Harness>(h: &H) {
    let (w, _) = FilteredStore::open_and_recover(h.open(), options()).unwrap();
    insert_all(&w, &named("k", 0..90));
    w.save_snapshot(h.snapshot()).unwrap();
    let backup = h.backup();
    let saved = std::fs::read(h.snapshot()).unwrap();
    insert_all(&w, &named("later", 0..10));
    w.save_snapshot(h.snapshot()).unwrap();
    drop(w);

    h.restore(&backup);
    std::fs::write(h.snapshot(), saved).unwrap();
    let (w, outcome) =
        FilteredStore::open(h.open(), options().with_snapshot(h.snapshot())).unwrap();
    assert!(
        matches!(outcome, OpenOutcome::Trusted { generation } if generation.get() == 90),
        "{outcome:?}"
    );
    assert_eq!(assert_every_committed_key_present(&w), 90);
    assert_eq!(w.contains("later-3").unwrap(), Lookup::AbsentByFilter);
}

/// The same store reopened without its snapshot for a while, then with it again: the
/// snapshot is older but of the same history, so it is caught up, not thrown away.
fn an_older_snapshot_of_the_same_history_catches_up<H: Harness>(h: &H) {
    let (w, _) = FilteredStore::open_and_recover(h.open(), options()).unwrap();
    insert_all(&w, &named("k", 0..25));
    w.save_snapshot(h.snapshot()).unwrap();
    insert_all(&w, &named("k", 25..40));
    drop(w);
    let (w, outcome) =
        FilteredStore::open(h.open(), options().with_snapshot(h.snapshot())).unwrap();
    assert!(
        matches!(
            outcome,
            OpenOutcome::CaughtUp { from, to, keys: 15, removals: 0 } if from.get() == 25 && to.get() == 40
        ),
        "{outcome:?}"
    );
    assert_every_committed_key_present(&w);
}

/// Snapshots that prove nothing about a store: the frozen version 1 fixture (format version
/// 1 has no binding) and a version 2 snapshot built outside a store. Refused once, then the
/// fresh snapshot is trusted.
fn unbound_snapshots_are_rebuilt_once<H: Harness>(h: &H) {
    let (w, _) = FilteredStore::open_and_recover(h.open(), options()).unwrap();
    insert_all(&w, &named("k", 0..14));
    drop(w);
    let v1 = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/v1/unicode-nfc.bloom");
    let v2 = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/v2/unicode-nfc.bloom");
    for fixture in [v1, v2] {
        std::fs::copy(&fixture, h.snapshot()).unwrap();
        // Generation 14 and the right parameters, but no binding.
        let refused = assert_refused(h, |r| matches!(r, BypassReason::NotBound));
        assert_eq!(refused, 14);
        assert_recovers(h, 14);
    }
}

on_every_store!(
    power_loss_then_crash,
    backup_restore_then_crash,
    new_database_old_snapshot,
    another_stores_snapshot,
    a_diverged_copys_snapshot,
    database_and_snapshot_restored_together,
    an_older_snapshot_of_the_same_history_catches_up,
    unbound_snapshots_are_rebuilt_once,
);

#[test]
fn the_primary_store_trait_is_implemented_by_shared_and_boxed_stores() {
    fn takes<S: PrimaryStore>(store: S) -> u64 {
        store.generation().unwrap().get()
    }
    let store = support::memory_store_with(&["a", "b"]);
    assert_eq!(takes(&store), 2);
    assert_eq!(takes(std::sync::Arc::new(store.clone())), 2);
    assert_eq!(takes(Box::new(store)), 2);
}
