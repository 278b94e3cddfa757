//! Removals through `FilteredStore`: a counting filter forgets removed keys, exactly, across
//! saves, restarts, catch-up, rebuilds, duplicates, changes behind the wrapper's back and
//! concurrent writers; a plain filter keeps stale bits, counts them and rebuilds once they
//! push its false-positive rate past the target. A key in the store is never reported absent.

mod support;

use bloom_core::Filter;
use std::sync::Arc;

use bloom_format::{DecodeOptions, Snapshot};
use bloom_store::{
    BypassReason, Change, DatasetGeneration, FilterOptions, FilteredStore, HistoryDigest,
    HistoryPoint, Incompatibility, Lookup, MemoryStore, MemoryStoreError, OpenOutcome,
    PrimaryStore, Removal, StoreIdentity,
};
use support::{Harness, assert_every_committed_key_present, claim_held, insert_all, named};

fn counting() -> FilterOptions {
    FilterOptions::new(2_000, 0.01).with_counting(true)
}

/// How many of `keys` the filter answers absent, once the store's claim holds again after
/// the wrapper's own commits (until the claim watcher has seen them, lookups go to the store).
fn forgotten<S: PrimaryStore>(w: &FilteredStore<S>, keys: &[String]) -> usize {
    claim_held(w);
    keys.iter()
        .filter(|k| w.contains(k).unwrap() == Lookup::AbsentByFilter)
        .count()
}

fn a_counting_filter_forgets_removed_keys_across_restarts<H: Harness>(h: &H) {
    let (w, _) = FilteredStore::open_and_recover(h.open(), counting()).unwrap();
    let kept = named("kept", 0..1_000);
    let gone = named("gone", 0..1_000);
    insert_all(&w, &kept);
    insert_all(&w, &gone);
    for key in &gone[..500] {
        assert!(w.remove(key).unwrap());
    }
    assert!(!w.remove("never-inserted").unwrap());
    // Absent from the filter, except its false positives (1% planned; 3% is far out).
    assert!(
        forgotten(&w, &gone[..500]) >= 485,
        "{}",
        forgotten(&w, &gone[..500])
    );
    let metrics = w.metrics();
    assert_eq!((metrics.removals, metrics.stale_removals), (500, 0));
    assert!(metrics.counting);
    w.save_snapshot(h.snapshot()).unwrap();
    // More removals after the save: the next open replays them from the store's history.
    for key in &gone[500..] {
        assert!(w.remove(key).unwrap());
    }
    drop(w);

    let (w, outcome) =
        FilteredStore::open(h.open(), counting().with_snapshot(h.snapshot())).unwrap();
    assert!(
        matches!(
            outcome,
            OpenOutcome::CaughtUp {
                keys: 0,
                removals: 500,
                ..
            }
        ),
        "{outcome:?}"
    );
    assert!(forgotten(&w, &gone) >= 970, "{}", forgotten(&w, &gone));
    assert_eq!(assert_every_committed_key_present(&w), 1_000);
    // The counts are exact: taking off every key leaves no counter above zero.
    for key in &kept {
        assert!(w.remove(key).unwrap());
    }
    let copy = w.filter_copy().unwrap();
    assert_eq!(copy.count_ones(), 0);
    assert_eq!(w.metrics().fill_ratio, 0.0);
}

fn duplicates_and_reinserts_keep_counts_exact<H: Harness>(h: &H) {
    let (w, _) = FilteredStore::open_and_recover(h.open(), counting()).unwrap();
    assert!(w.insert("a").unwrap());
    assert!(!w.insert("a").unwrap(), "a duplicate counts nothing");
    assert!(!w.insert("a").unwrap());
    assert!(w.remove("a").unwrap());
    assert_eq!(w.filter_copy().unwrap().count_ones(), 0);
    assert!(w.insert("a").unwrap(), "back in, as a new change");
    w.save_snapshot(h.snapshot()).unwrap();
    assert!(w.remove("a").unwrap());
    assert!(w.insert("a").unwrap());
    drop(w);
    let (w, outcome) =
        FilteredStore::open(h.open(), counting().with_snapshot(h.snapshot())).unwrap();
    assert!(
        matches!(
            outcome,
            OpenOutcome::CaughtUp {
                keys: 1,
                removals: 1,
                ..
            }
        ),
        "{outcome:?}"
    );
    assert_eq!(w.contains("a").unwrap(), Lookup::Present);
    assert!(w.remove("a").unwrap());
    assert_eq!(w.filter_copy().unwrap().count_ones(), 0);
}

fn changes_behind_the_wrappers_back_are_taken_in_exactly_once_by_a_save<H: Harness>(h: &H) {
    let (w, _) = FilteredStore::open_and_recover(h.open(), counting()).unwrap();
    insert_all(&w, &named("k", 0..100));
    // Another program inserts and removes directly in the store.
    assert!(w.store().insert(b"direct").unwrap().is_some());
    assert!(w.store().remove(b"k-7").unwrap().is_some());
    // And the wrapper goes on meanwhile (generations past the gap).
    assert!(w.remove("k-8").unwrap());
    assert!(w.insert("after").unwrap());
    w.save_snapshot(h.snapshot()).unwrap();
    assert_eq!(w.contains("direct").unwrap(), Lookup::Present);
    // Each change counted once: removing everything left leaves the counters at zero.
    for key in named("k", 0..100) {
        assert_eq!(w.remove(&key).unwrap(), key != "k-7" && key != "k-8");
    }
    assert!(w.remove("direct").unwrap());
    assert!(w.remove("after").unwrap());
    assert_eq!(w.filter_copy().unwrap().count_ones(), 0);
    assert!(w.mode().is_trusted());
}

fn a_removal_of_a_key_the_filter_never_counted_waits_for_the_next_save<H: Harness>(h: &H) {
    // A small filter with a high rate, so that a key inserted behind the wrapper's back is
    // easily a false positive: its removal must not take counts from the keys that are in.
    let options = FilterOptions::new(40, 0.2).with_counting(true);
    let (w, _) = FilteredStore::open_and_recover(h.open(), options.clone()).unwrap();
    insert_all(&w, &named("a", 0..40));
    claim_held(&w);
    let direct = (0..10_000)
        .map(|i| format!("x{i}"))
        .find(|k| w.contains(k).unwrap() == Lookup::FalsePositive)
        .expect("a false positive at 20%");
    w.store()
        .insert(w.encode(&direct).as_bytes())
        .unwrap()
        .unwrap();
    assert!(w.remove(&direct).unwrap());
    assert!(w.mode().is_trusted());
    assert_eq!(assert_every_committed_key_present(&w), 40);
    // The save takes in the insert and the removal, in order; the counts are then exact.
    w.save_snapshot(h.snapshot()).unwrap();
    drop(w);
    let (w, _) = FilteredStore::open(h.open(), options.with_snapshot(h.snapshot())).unwrap();
    assert_eq!(assert_every_committed_key_present(&w), 40);
    for key in named("a", 0..40) {
        assert!(w.remove(&key).unwrap());
    }
    assert_eq!(w.filter_copy().unwrap().count_ones(), 0);
}

fn counts_that_do_not_match_the_history_bypass_the_filter<H: Harness>(h: &H) {
    let (w, _) = FilteredStore::open_and_recover(h.open(), counting()).unwrap();
    insert_all(&w, &named("k", 0..10));
    w.save_snapshot(h.snapshot()).unwrap();
    assert!(w.remove("k-3").unwrap());
    assert_eq!(w.store().generation().unwrap().get(), 11);
    drop(w);
    // The snapshot keeps its binding, but its counters are zeroed (a damaged writer, say):
    // replaying the removal of k3 finds it absent.
    let snapshot = Snapshot::read_file(h.snapshot(), &DecodeOptions::unlimited()).unwrap();
    let zeroed = vec![0u8; snapshot.payload().len()];
    let forged = Snapshot::new(snapshot.header().clone(), zeroed).unwrap();
    std::fs::write(h.snapshot(), forged.encode()).unwrap();
    let (w, outcome) =
        FilteredStore::open(h.open(), counting().with_snapshot(h.snapshot())).unwrap();
    assert!(
        matches!(
            outcome,
            OpenOutcome::Bypassed(BypassReason::CountsDiverged { .. })
        ),
        "{outcome:?}"
    );
    assert_eq!(assert_every_committed_key_present(&w), 9);
    w.rebuild().unwrap();
    assert_eq!(assert_every_committed_key_present(&w), 9);
}

fn a_snapshot_of_the_other_kind_is_rebuilt_over<H: Harness>(h: &H) {
    let plain = FilterOptions::new(2_000, 0.01);
    let (w, _) = FilteredStore::open_and_recover(h.open(), plain.clone()).unwrap();
    insert_all(&w, &named("k", 0..50));
    w.save_snapshot(h.snapshot()).unwrap();
    drop(w);
    let (w, outcome) =
        FilteredStore::open_and_recover(h.open(), counting().with_snapshot(h.snapshot())).unwrap();
    assert!(
        matches!(
            &outcome,
            OpenOutcome::Rebuilt {
                reason: BypassReason::Incompatible(Incompatibility::Counting { snapshot: false }),
                ..
            }
        ),
        "{outcome:?}"
    );
    assert_eq!(assert_every_committed_key_present(&w), 50);
    drop(w);
    // The rebuilt counting snapshot is refused by a plain filter the same way.
    let (w, outcome) = FilteredStore::open(h.open(), plain.with_snapshot(h.snapshot())).unwrap();
    assert!(
        matches!(
            &outcome,
            OpenOutcome::Bypassed(BypassReason::Incompatible(Incompatibility::Counting {
                snapshot: true
            }))
        ),
        "{outcome:?}"
    );
    assert_eq!(assert_every_committed_key_present(&w), 50);
}

fn a_plain_filter_counts_stale_removals_and_rebuilds_past_the_target<H: Harness>(h: &H) {
    let options = FilterOptions::new(1_000, 0.01);
    let (w, _) = FilteredStore::open_and_recover(h.open(), options).unwrap();
    let first = named("first", 0..900);
    insert_all(&w, &first);
    for key in &first[..500] {
        assert!(w.remove(key).unwrap());
    }
    let metrics = w.metrics();
    assert_eq!((metrics.removals, metrics.stale_removals), (500, 500));
    assert!(!metrics.counting);
    // The removed keys still read "maybe"; the store refutes them (once the claim watcher
    // has seen the wrapper's own commits: until then lookups go to the store).
    claim_held(&w);
    assert_eq!(w.contains(&first[0]).unwrap(), Lookup::FalsePositive);
    // More keys: 400 live + 500 stale + new ones push the rate past 1%; a remove notices
    // and rebuilds from the 400 + new live keys.
    let second = named("second", 0..700);
    insert_all(&w, &second);
    let before = w.metrics().predicted_false_positive_rate;
    assert!(before > 0.01, "{before}");
    let mut rebuilt = false;
    for key in &second[..300] {
        w.remove(key).unwrap();
        if w.metrics().stale_removals == 0 {
            rebuilt = true;
            break;
        }
    }
    assert!(rebuilt, "no rebuild: {:?}", w.metrics());
    let after = w.metrics();
    assert!(
        after.predicted_false_positive_rate < 0.01,
        "{}",
        after.predicted_false_positive_rate
    );
    // Rebuilt from the keys in the store only: the stale bits are gone.
    let live = assert_every_committed_key_present(&w) as f64;
    assert!(
        (after.estimated_items - live).abs() < 0.05 * live,
        "{} estimated, {live} in the store",
        after.estimated_items
    );
}

on_every_store!(
    a_counting_filter_forgets_removed_keys_across_restarts,
    duplicates_and_reinserts_keep_counts_exact,
    changes_behind_the_wrappers_back_are_taken_in_exactly_once_by_a_save,
    a_removal_of_a_key_the_filter_never_counted_waits_for_the_next_save,
    counts_that_do_not_match_the_history_bypass_the_filter,
    a_snapshot_of_the_other_kind_is_rebuilt_over,
    a_plain_filter_counts_stale_removals_and_rebuilds_past_the_target,
);

/// Writers inserting and removing from several threads while saves and rebuilds run: no
/// committed key is ever reported absent, and at the end every count is exact (removing
/// every key left leaves no counter above zero).
#[test]
fn concurrent_inserts_removals_saves_and_rebuilds_keep_counts_exact() {
    let h = support::Sqlite::new();
    let (w, _) = FilteredStore::open_and_recover(h.open(), counting()).unwrap();
    let w = Arc::new(w);
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let w = Arc::clone(&w);
            std::thread::spawn(move || {
                for i in 0..300 {
                    let key = format!("t{t}-{i}");
                    w.insert(&key).unwrap();
                    // A shared key, inserted and removed by every thread.
                    w.insert("shared").unwrap();
                    if i % 2 == 1 {
                        assert!(w.remove(&format!("t{t}-{}", i - 1)).unwrap());
                        let _ = w.remove("shared").unwrap();
                    }
                    assert_eq!(w.contains(&key).unwrap(), Lookup::Present);
                }
            })
        })
        .collect();
    let snapshot = h.snapshot().to_path_buf();
    let background = {
        let w = Arc::clone(&w);
        std::thread::spawn(move || {
            for round in 0..10 {
                if round % 3 == 0 {
                    w.rebuild().unwrap();
                } else {
                    w.save_snapshot(&snapshot).unwrap();
                }
            }
        })
    };
    for t in threads {
        t.join().unwrap();
    }
    background.join().unwrap();
    assert!(w.mode().is_trusted());
    let present = assert_every_committed_key_present(&w);
    w.save_snapshot(h.snapshot()).unwrap();

    let w = Arc::try_unwrap(w).ok().unwrap();
    drop(w);
    let (w, _) = FilteredStore::open(h.open(), counting().with_snapshot(h.snapshot())).unwrap();
    assert_eq!(assert_every_committed_key_present(&w), present);
    let mut keys = Vec::new();
    w.store()
        .keys_since(bloom_store::DatasetGeneration::ZERO, &mut |k| {
            keys.push(String::from_utf8(k.to_vec()).unwrap());
        })
        .unwrap();
    for key in keys {
        assert!(w.remove(&key).unwrap());
    }
    assert_eq!(w.filter_copy().unwrap().count_ones(), 0);
}

/// A memory store whose history reads can be made to fail, leaving inserts and removals
/// working: a rebuild fails, a removal does not.
struct FlakyHistory {
    inner: MemoryStore,
    failing: std::sync::atomic::AtomicBool,
    /// When set, `changes_since` fails after visiting this many changes.
    replay_budget: std::sync::Mutex<Option<usize>>,
}

impl FlakyHistory {
    fn check(&self) -> Result<(), MemoryStoreError> {
        if self.failing.load(std::sync::atomic::Ordering::SeqCst) {
            Err(MemoryStoreError)
        } else {
            Ok(())
        }
    }
}

impl PrimaryStore for FlakyHistory {
    type Error = MemoryStoreError;
    fn identity(&self) -> Result<StoreIdentity, Self::Error> {
        self.inner.identity()
    }
    fn contains(&self, key: &[u8]) -> Result<bool, Self::Error> {
        self.inner.contains(key)
    }
    fn head(&self) -> Result<HistoryPoint, Self::Error> {
        self.check()?;
        self.inner.head()
    }
    fn history_at(&self, g: DatasetGeneration) -> Result<Option<HistoryDigest>, Self::Error> {
        self.inner.history_at(g)
    }
    fn keys_since(
        &self,
        after: DatasetGeneration,
        visit: &mut dyn FnMut(&[u8]),
    ) -> Result<DatasetGeneration, Self::Error> {
        self.check()?;
        self.inner.keys_since(after, visit)
    }
    fn changes_since(
        &self,
        after: DatasetGeneration,
        visit: &mut dyn FnMut(Change<'_>),
    ) -> Result<DatasetGeneration, Self::Error> {
        self.check()?;
        let budget = *self.replay_budget.lock().unwrap();
        let Some(budget) = budget else {
            return self.inner.changes_since(after, visit);
        };
        let mut seen = 0;
        self.inner.changes_since(after, &mut |change| {
            if seen < budget {
                visit(change);
            }
            seen += 1;
        })?;
        if seen > budget {
            return Err(MemoryStoreError);
        }
        Ok(DatasetGeneration::new(after.get() + seen as u64))
    }
    fn insert(&self, key: &[u8]) -> Result<Option<DatasetGeneration>, Self::Error> {
        self.inner.insert(key)
    }
    fn remove(&self, key: &[u8]) -> Result<Option<Removal>, Self::Error> {
        self.inner.remove(key)
    }
    fn claim_key_encoding(&self, proposed: &str) -> Result<String, Self::Error> {
        self.inner.claim_key_encoding(proposed)
    }
}

fn flaky() -> FlakyHistory {
    FlakyHistory {
        inner: MemoryStore::new(),
        failing: std::sync::atomic::AtomicBool::new(false),
        replay_budget: std::sync::Mutex::new(None),
    }
}

/// A counting save whose replay of the changes made behind the wrapper's back fails halfway
/// is resumed by the next save, never applied twice.
#[test]
fn a_save_that_fails_halfway_through_its_replay_is_resumed_not_repeated() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = dir.path().join("c.bloom");
    let (w, _) = FilteredStore::open_and_recover(flaky(), counting()).unwrap();
    let encoded = |k: &str| w.encode(k).as_bytes().to_vec();
    assert!(w.insert("k").unwrap());
    assert!(w.store().inner.remove(&encoded("k")).unwrap().is_some()); // behind its back
    assert!(w.insert("k").unwrap());
    assert!(w.store().inner.insert(&encoded("other")).unwrap().is_some());
    // Each replay sees one change, then fails: the first save fails after taking in the
    // removal, the next one resumes after it.
    *w.store().replay_budget.lock().unwrap() = Some(1);
    let mut failures = 0;
    while w.save_snapshot(&snapshot).is_err() {
        failures += 1;
        assert!(failures < 4, "the replay never got past its first change");
        assert_eq!(w.contains("k").unwrap(), Lookup::Present);
    }
    assert!(failures >= 1);
    *w.store().replay_budget.lock().unwrap() = None;
    w.save_snapshot(&snapshot).unwrap();
    assert_eq!(w.contains("k").unwrap(), Lookup::Present);
    assert_eq!(w.contains("other").unwrap(), Lookup::Present);
    // Exact: taking both keys off leaves no counter above zero.
    assert!(w.remove("k").unwrap());
    assert!(w.remove("other").unwrap());
    assert_eq!(w.filter_copy().unwrap().count_ones(), 0);
}

/// A store that loses commits while the wrapper is open (a failover to a lagging replica) is
/// caught by the next save, which refuses and bypasses the filter: no snapshot claims a
/// history the store no longer has.
#[test]
fn a_store_that_loses_commits_under_an_open_wrapper_is_caught_by_the_next_save() {
    for counting in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let snapshot = dir.path().join("s.bloom");
        let options = FilterOptions::new(2_000, 0.01).with_counting(counting);
        let (w, _) = FilteredStore::open_and_recover(MemoryStore::new(), options.clone()).unwrap();
        insert_all(&w, &named("x", 0..10));
        w.save_snapshot(&snapshot).unwrap();
        assert!(w.remove("x-9").unwrap());
        w.store().rollback_to(DatasetGeneration::new(5));
        for i in 0..8 {
            w.store().insert(format!("late-{i}").as_bytes()).unwrap();
        }
        assert!(
            matches!(
                w.save_snapshot(&snapshot),
                Err(bloom_store::StoreError::NotTrusted(
                    BypassReason::HistoryDiverged { .. }
                ))
            ),
            "counting: {counting}"
        );
        assert!(!w.mode().is_trusted());
        assert_eq!(assert_every_committed_key_present(&w), 13);
        drop(w);
        // The snapshot on disk is of the lost history: never trusted again.
        let store = MemoryStore::new();
        let (w, outcome) = FilteredStore::open(store, options.with_snapshot(&snapshot)).unwrap();
        assert!(!outcome.is_trusted(), "{outcome:?}");
        drop(w);
    }
}

/// A store rolled back behind what the filter holds, under a wrapper that never saved (the
/// last point it verified is generation 0). A counting filter's counts no longer describe
/// the store: the save refuses, and says where the store is and what the filter holds, not
/// "generation 0". A plain filter's bits are a superset of the store's keys: its save is
/// a correct snapshot at the store's generation.
#[test]
fn a_save_after_a_rollback_names_the_generations_it_found() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = dir.path().join("s.bloom");
    let plain = FilterOptions::new(2_000, 0.01);
    let (w, _) = FilteredStore::open_and_recover(MemoryStore::new(), plain.clone()).unwrap();
    insert_all(&w, &named("x", 0..50));
    w.store().rollback_to(DatasetGeneration::new(20));
    assert_eq!(w.save_snapshot(&snapshot).unwrap().get(), 20);
    let store = w.store().clone();
    drop(w);
    let (w, outcome) = FilteredStore::open(store, plain.with_snapshot(&snapshot)).unwrap();
    assert!(outcome.is_trusted(), "{outcome:?}");
    assert_eq!(assert_every_committed_key_present(&w), 20);

    {
        let counting = true;
        let snapshot = dir.path().join("c.bloom");
        let options = FilterOptions::new(2_000, 0.01).with_counting(counting);
        let (w, _) = FilteredStore::open_and_recover(MemoryStore::new(), options.clone()).unwrap();
        insert_all(&w, &named("x", 0..50));
        w.store().rollback_to(DatasetGeneration::new(20));
        let err = w.save_snapshot(&snapshot).unwrap_err();
        assert!(
            matches!(
                &err,
                bloom_store::StoreError::NotTrusted(BypassReason::RolledBack { holds, store })
                    if holds.get() == 50 && store.get() == 20
            ),
            "counting: {counting}: {err:?}"
        );
        let message = err.to_string();
        assert!(
            message.contains("generation 20") && message.contains("generation 50"),
            "{message}"
        );
        assert!(!message.contains("generation 0"), "{message}");
        assert!(!w.mode().is_trusted());
        assert_eq!(assert_every_committed_key_present(&w), 20);
        assert!(!snapshot.exists());
    }
}

/// A removal that triggers a rebuild of a plain filter succeeds even when the rebuild fails:
/// the key is gone from the store, so the caller must hear `Ok(true)`.
#[test]
fn a_failed_automatic_rebuild_does_not_fail_the_removal() {
    let store = flaky();
    let (w, _) = FilteredStore::open_and_recover(store, FilterOptions::new(1_000, 0.01)).unwrap();
    let keys = named("k", 0..2_000);
    insert_all(&w, &keys);
    w.store()
        .failing
        .store(true, std::sync::atomic::Ordering::SeqCst);
    for key in &keys[..200] {
        assert!(w.remove(key).unwrap(), "{key} was removed");
        assert!(!w.store().contains(w.encode(key).as_bytes()).unwrap());
    }
    let metrics = w.metrics();
    assert!(metrics.failed_automatic_rebuilds >= 1, "{metrics:?}");
    assert!(w.mode().is_trusted());
    assert_eq!(metrics.stale_removals, 200);
    w.store()
        .failing
        .store(false, std::sync::atomic::Ordering::SeqCst);
    assert!(w.remove(&keys[200]).unwrap());
    assert_eq!(assert_every_committed_key_present(&w), 1_799);
}

/// A change log edited by hand: rows that cannot follow the store (in the past, or a second
/// insert of a key that is in) are refused by SQLite; a removal appended by hand undid no
/// insert (it is not linked to one), so the replay leaves the key's count alone; and a
/// checkpoint digest made up by hand fails the replay, so catch-up bypasses instead of
/// replaying a history that does not follow.
#[test]
fn a_change_log_edited_by_hand_is_never_replayed() {
    let h = support::Sqlite::new();
    let (w, _) = FilteredStore::open_and_recover(h.open(), counting()).unwrap();
    insert_all(&w, &named("k", 0..10));
    w.save_snapshot(h.snapshot()).unwrap();
    drop(w);
    let conn = rusqlite::Connection::open(h.db()).unwrap();
    for sql in [
        // Not after the newest change.
        "INSERT INTO bloom_changes (seq, kind, key, history) VALUES (5, 2, CAST('k-3' AS BLOB), zeroblob(16))",
        // An insert of a key that is in.
        "INSERT INTO bloom_changes (seq, kind, key, history) VALUES (11, 1, CAST('k-3' AS BLOB), zeroblob(16))",
    ] {
        assert!(conn.execute(sql, []).is_err(), "{sql} was accepted");
    }

    // Removals appended by hand, up to just before the next checkpoint: not changes of the
    // store's keys.
    conn.execute_batch(
        "WITH RECURSIVE n(seq) AS (SELECT 11 UNION ALL SELECT seq + 1 FROM n WHERE seq < 63)
         INSERT INTO bloom_changes (seq, kind, key, history)
             SELECT seq, 2, CAST('k-3' AS BLOB), randomblob(16) FROM n;",
    )
    .unwrap();
    let (w, outcome) =
        FilteredStore::open(h.open(), counting().with_snapshot(h.snapshot())).unwrap();
    assert!(
        matches!(outcome, OpenOutcome::CaughtUp { removals: 0, .. }),
        "{outcome:?}"
    );
    assert_eq!(w.contains("k-3").unwrap(), Lookup::Present);
    assert!(w.filter_copy().unwrap().contains("k-3"));
    drop(w);

    // The checkpoint's digest made up by hand: the replay fails.
    conn.execute(
        "INSERT INTO bloom_changes (seq, kind, key, history) VALUES (64, 2, CAST('k-3' AS BLOB), randomblob(16))",
        [],
    )
    .unwrap();
    drop(conn);
    let (w, outcome) =
        FilteredStore::open(h.open(), counting().with_snapshot(h.snapshot())).unwrap();
    assert!(
        matches!(
            outcome,
            OpenOutcome::Bypassed(BypassReason::CatchUpFailed(_))
        ),
        "{outcome:?}"
    );
    assert_eq!(w.contains("k-3").unwrap(), Lookup::Present);
    assert_eq!(assert_every_committed_key_present(&w), 10);
}
