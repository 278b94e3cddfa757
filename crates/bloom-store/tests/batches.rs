//! Batched inserts and lookups through `FilteredStore`: the same answers and the same
//! guarantees as one key at a time, with one store commit per batch.

mod support;

use bloom_core::Filter;
use bloom_store::{FilterOptions, FilteredStore, Lookup, MemoryStore, PrimaryStore, StoreError};
use proptest::prelude::*;
use support::{Harness, assert_every_committed_key_present, named, options};

fn batches_answer_as_single_keys_do<H: Harness>(h: &H) {
    let (w, _) =
        FilteredStore::open_and_recover(h.open(), options().with_snapshot(h.snapshot())).unwrap();
    w.insert("seen-before").unwrap();
    let batch = ["a", "seen-before", "b", "a", "cafe\u{301}", "caf\u{e9}"];
    // A key repeated in the batch (or in another spelling of the same NFC key) is new once.
    assert_eq!(
        w.insert_all(batch).unwrap(),
        [true, false, true, false, true, false]
    );
    assert_eq!(w.store().generation().unwrap().get(), 4);
    let probes = ["a", "b", "café", "seen-before", "never-1", "never-2"];
    let batched = w.contains_each(probes).unwrap();
    let single: Vec<Lookup> = probes.iter().map(|k| w.contains(k).unwrap()).collect();
    assert_eq!(batched, single);
    assert!(batched[..4].iter().all(|l| l.is_present()));
    assert!(batched[4..].iter().all(|l| !l.is_present()));
    let m = w.metrics();
    assert_eq!(m.queries, 12);
    assert_eq!(m.inserts, 7);
    assert_eq!(m.store_lookups + m.lookups_avoided, 12);
    assert!(w.insert_all(Vec::<String>::new()).unwrap().is_empty());
    assert!(w.contains_each(Vec::<String>::new()).unwrap().is_empty());
    w.save_snapshot(h.snapshot()).unwrap();
    drop(w);
    let (w, outcome) =
        FilteredStore::open(h.open(), options().with_snapshot(h.snapshot())).unwrap();
    assert!(outcome.is_trusted(), "{outcome:?}");
    assert_eq!(assert_every_committed_key_present(&w), 4);
}

/// While the filter is bypassed every key of a batch goes to the store.
fn a_bypassed_filter_sends_every_key_of_a_batch_to_the_store<H: Harness>(h: &H) {
    let (w, outcome) = FilteredStore::open(h.open(), options()).unwrap();
    assert!(!outcome.is_trusted());
    assert_eq!(w.insert_all(["x", "y"]).unwrap(), [true, true]);
    assert_eq!(
        w.contains_each(["x", "z", "y"]).unwrap(),
        [Lookup::Present, Lookup::AbsentBypassed, Lookup::Present]
    );
    assert_eq!(w.metrics().store_lookups, 3);
    w.rebuild().unwrap();
    assert_eq!(assert_every_committed_key_present(&w), 2);
}

/// A counting filter counts a batch's new keys once each: duplicates in the batch, or keys
/// already in the store, take their count back.
fn a_counting_batch_counts_each_new_key_once<H: Harness>(h: &H) {
    let counting = options().with_counting(true);
    let (w, _) = FilteredStore::open_and_recover(h.open(), counting.clone()).unwrap();
    w.insert("old").unwrap();
    assert_eq!(
        w.insert_all(["k", "k", "old", "k"]).unwrap(),
        [true, false, false, false]
    );
    assert!(w.remove("k").unwrap());
    assert!(w.remove("old").unwrap());
    // Counted once each, so removed once each: no count left behind.
    let filter = w.filter_copy().unwrap();
    assert!(!filter.contains("k") && !filter.contains("old"));
    assert_eq!(filter.count_ones(), 0);
    w.save_snapshot(h.snapshot()).unwrap();
    drop(w);
    let (w, outcome) = FilteredStore::open(h.open(), counting.with_snapshot(h.snapshot())).unwrap();
    assert!(outcome.is_trusted(), "{outcome:?}");
    assert_eq!(w.filter_copy().unwrap().count_ones(), 0);
}

on_every_store!(
    batches_answer_as_single_keys_do,
    a_bypassed_filter_sends_every_key_of_a_batch_to_the_store,
    a_counting_batch_counts_each_new_key_once,
);

/// A batch the store fails to commit is not committed; its bits may stay (false positives),
/// and nothing committed is ever reported absent.
#[test]
fn a_failed_batch_commits_nothing_and_loses_nothing() {
    let store = std::sync::Arc::new(MemoryStore::new());
    let (w, _) = FilteredStore::open_and_recover(std::sync::Arc::clone(&store), options()).unwrap();
    w.insert_all(named("kept", 0..100)).unwrap();
    store.set_failing(true);
    assert!(matches!(
        w.insert_all(named("lost", 0..100)),
        Err(StoreError::Store(_))
    ));
    assert!(matches!(
        w.contains_each(named("kept", 0..3)),
        Err(StoreError::Store(_))
    ));
    store.set_failing(false);
    assert_eq!(store.len(), 100);
    let lost = w.contains_each(named("lost", 0..100)).unwrap();
    assert!(lost.iter().all(|l| *l == Lookup::FalsePositive), "{lost:?}");
    assert_eq!(assert_every_committed_key_present(&w), 100);
}

/// A batch that runs while a rebuild scans sets its bits in the new filter too.
#[test]
fn a_batch_during_a_rebuild_is_in_the_rebuilt_filter() {
    let h = support::Sqlite::new();
    let (w, _) = FilteredStore::open_and_recover(h.open(), options()).unwrap();
    let w = std::sync::Arc::new(w);
    w.insert_all(named("before", 0..2000)).unwrap();
    let writer = {
        let w = std::sync::Arc::clone(&w);
        std::thread::spawn(move || {
            for round in 0..20 {
                w.insert_all(named(&format!("during-{round}-"), 0..100))
                    .unwrap();
            }
        })
    };
    w.rebuild().unwrap();
    writer.join().unwrap();
    assert_eq!(assert_every_committed_key_present(&w), 4000);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Never a false negative: whatever the batches (repeats, keys already present, empty
    /// batches, NFD spellings), every key inserted in any of them is reported present, and
    /// batched lookups answer as single ones.
    #[test]
    fn batches_never_lose_a_key(
        batches in proptest::collection::vec(
            proptest::collection::vec("[a-c\u{e9}]{0,3}|e\u{301}", 0..20), 0..8),
        counting in any::<bool>(),
    ) {
        let options = FilterOptions::new(1000, 0.05).with_counting(counting);
        let (w, _) = FilteredStore::open_and_recover(MemoryStore::new(), options).unwrap();
        let mut all = Vec::new();
        for batch in &batches {
            w.insert_all(batch).unwrap();
            all.extend(batch.iter().cloned());
        }
        let answers = w.contains_each(&all).unwrap();
        prop_assert!(answers.iter().all(|l| l.is_present()));
        for key in &all {
            prop_assert_eq!(w.contains(key).unwrap(), Lookup::Present);
        }
        prop_assert_eq!(assert_every_committed_key_present(&w), w.store().len());
    }
}

/// One wrapper per database. A second wrapper would answer "absent" for the first one's keys
/// (and, counting, take back a count the first one's insert stood for), so it is refused,
/// typed, while the first lives, whether it comes through the same path, a symbolic link to
/// the file, or the other store kinds; once the first is dropped the next opens, and finds
/// every key the first committed.
#[test]
fn a_second_wrapper_on_one_database_is_refused_until_the_first_is_dropped() {
    let h = support::Sqlite::new();
    let counting = options().with_counting(true);
    let (a, _) = FilteredStore::open_and_recover(h.open(), counting.clone()).unwrap();
    assert_eq!(a.insert_all(["k1", "k2"]).unwrap(), [true, true]);
    let link = h.db().with_extension("link");
    #[cfg(unix)]
    std::os::unix::fs::symlink(h.db(), &link).unwrap();
    #[cfg(not(unix))]
    let link = h.db().to_path_buf();
    for options in [counting.clone(), options()] {
        for store in [h.open(), bloom_store::SqliteStore::open(&link).unwrap()] {
            assert!(matches!(
                FilteredStore::open(store, options.clone()),
                Err(StoreError::InUse)
            ));
        }
    }
    let err = FilteredStore::open(h.open(), options()).unwrap_err();
    assert!(
        err.to_string().contains("one FilteredStore per store"),
        "{err}"
    );
    a.save_snapshot(h.snapshot()).unwrap();
    drop(a);
    let (b, _) =
        FilteredStore::open(h.open(), counting.clone().with_snapshot(h.snapshot())).unwrap();
    assert!(!b.insert("k1").unwrap());
    for key in ["k1", "k2"] {
        assert_eq!(b.contains(key).unwrap(), Lookup::Present, "{key}");
    }
    drop(b);

    // A memory store and an in-memory database, shared by reference.
    let memory = MemoryStore::new();
    let first = FilteredStore::open(&memory, options()).unwrap();
    assert!(matches!(
        FilteredStore::open(&memory, options()),
        Err(StoreError::InUse)
    ));
    // A copy (a backup) is another store.
    let copy = memory.clone();
    assert!(FilteredStore::open(&copy, options()).is_ok());
    drop(first);
    assert!(FilteredStore::open(&memory, options()).is_ok());
    let in_memory = bloom_store::SqliteStore::open_in_memory().unwrap();
    let first = FilteredStore::open(&in_memory, options()).unwrap();
    assert!(matches!(
        FilteredStore::open(&in_memory, options()),
        Err(StoreError::InUse)
    ));
    drop(first);
    assert!(FilteredStore::open(&in_memory, options()).is_ok());
}

/// The claim is a lock another process can hold: `flock(1)` holding the lock file keeps
/// every wrapper out, and killing it (a crashed process) frees the database at once.
#[cfg(target_os = "linux")]
#[test]
fn a_claim_held_by_another_process_is_refused_and_freed_by_its_death() {
    use std::io::BufRead;
    let h = support::Sqlite::new();
    drop(h.open()); // the database exists
    let mut lock = std::fs::canonicalize(h.db()).unwrap().into_os_string();
    lock.push("-bloom.lock");
    // --no-fork: the process killed below is the one holding the lock.
    let mut holder = std::process::Command::new("flock")
        .arg("--no-fork")
        .arg(&lock)
        .args(["-c", "echo held; exec cat"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(holder.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line, "held\n");
    assert!(matches!(
        FilteredStore::open(h.open(), options()),
        Err(StoreError::InUse)
    ));
    holder.kill().unwrap();
    holder.wait().unwrap();
    let (w, _) = FilteredStore::open_and_recover(h.open(), options()).unwrap();
    assert!(w.insert("after").unwrap());
}

/// Already-encoded keys are checked against the encoding before anything is inserted: bytes
/// the encoding would never make are refused, never committed where text lookups miss them.
#[test]
fn encoded_keys_not_in_the_encoding_are_refused() {
    let (w, _) = FilteredStore::open_and_recover(MemoryStore::new(), options()).unwrap();
    for bad in ["zo\u{308}e".as_bytes(), b"\xff\xfe"] {
        assert!(matches!(
            w.insert_all([b"fine".as_slice(), bad].map(bloom_core::EncodedKey::from_encoded)),
            Err(StoreError::Key(bloom_core::KeyError::NotEncoded { .. }))
        ));
        assert!(matches!(
            w.insert(&bloom_core::EncodedKey::from_encoded(bad)),
            Err(StoreError::Key(bloom_core::KeyError::NotEncoded { .. }))
        ));
    }
    assert!(w.store().is_empty(), "nothing of the batch went in");
    assert_eq!(
        w.insert_all(["z\u{f6}e".as_bytes()].map(bloom_core::EncodedKey::from_encoded))
            .unwrap(),
        [true]
    );
    assert_eq!(w.contains("zo\u{308}e").unwrap(), Lookup::Present);
}

/// The lock beside the database must be a regular file: a symbolic link there (dangling, or
/// to a device every store could share), a named pipe or a directory is refused with a typed
/// error, and nothing is created where a link points.
#[cfg(unix)]
#[test]
fn a_lock_path_that_is_not_a_regular_file_is_refused() {
    let h = support::Sqlite::new();
    drop(h.open());
    let mut lock = std::fs::canonicalize(h.db()).unwrap().into_os_string();
    lock.push("-bloom.lock");
    let lock = std::path::PathBuf::from(lock);
    let elsewhere = h.db().with_extension("elsewhere");
    type Make<'a> = &'a dyn Fn(&std::path::Path);
    let make: [(&str, Make<'_>); 4] = [
        ("a dangling link", &|p| {
            std::os::unix::fs::symlink(&elsewhere, p).unwrap()
        }),
        ("a link to /dev/null", &|p| {
            std::os::unix::fs::symlink("/dev/null", p).unwrap()
        }),
        ("a named pipe", &|p| {
            assert!(
                std::process::Command::new("mkfifo")
                    .arg(p)
                    .status()
                    .unwrap()
                    .success()
            );
        }),
        ("a directory", &|p| std::fs::create_dir(p).unwrap()),
    ];
    for (what, make) in make {
        make(&lock);
        let result = FilteredStore::open(h.open(), options());
        assert!(
            matches!(
                &result,
                Err(StoreError::Store(
                    bloom_store::SqliteStoreError::Lock { .. }
                ))
            ),
            "{what}: {:?}",
            result.as_ref().err()
        );
        assert!(!elsewhere.exists(), "{what}: the link's target was created");
        if lock.is_dir() && !lock.is_symlink() {
            std::fs::remove_dir(&lock).unwrap();
        } else {
            std::fs::remove_file(&lock).unwrap();
        }
    }
    // A regular file (or none) is a lock again.
    assert!(FilteredStore::open(h.open(), options()).is_ok());
}
