//! Concurrency stress: inserting and querying threads, snapshots and a rebuild running at the
//! same time. Every key whose insert returned is found, by the live wrapper and by a wrapper
//! reopened from any snapshot taken meanwhile.

use bloom_core::Filter;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;

use bloom_store::{FilterOptions, FilteredStore, Lookup, SqliteStore};

fn assert_send_sync<T: Send + Sync>() {}

#[test]
fn the_wrapper_is_send_and_sync() {
    assert_send_sync::<FilteredStore<SqliteStore>>();
    assert_send_sync::<FilteredStore<bloom_store::MemoryStore>>();
}

#[test]
fn concurrent_inserts_queries_snapshots_and_rebuild_lose_nothing() {
    const WRITERS: u32 = 4;
    const PER_WRITER: u32 = 1_500;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("keys.sqlite");
    let snapshot = dir.path().join("keys.bloom");
    let store = SqliteStore::open(&db).unwrap();
    let (wrapper, _) =
        FilteredStore::open_and_recover(store, FilterOptions::new(2_000, 0.01)).unwrap();
    let wrapper = Arc::new(wrapper);
    let done = Arc::new(AtomicBool::new(false));
    // Events instead of sleeps: the rebuild starts once the writers are well under way, and
    // the snapshotter checks at least one snapshot however slow the machine.
    let inserted = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let rebuilt = Arc::new(AtomicBool::new(false));

    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let wrapper = Arc::clone(&wrapper);
            let inserted = Arc::clone(&inserted);
            let rebuilt = Arc::clone(&rebuilt);
            thread::spawn(move || {
                for i in 0..PER_WRITER {
                    if i == PER_WRITER * 9 / 10 {
                        // The last tenth goes in after the rebuild, whatever the timing.
                        let deadline =
                            std::time::Instant::now() + std::time::Duration::from_secs(300);
                        while !rebuilt.load(Ordering::SeqCst) {
                            assert!(std::time::Instant::now() < deadline, "no rebuild");
                            thread::yield_now();
                        }
                    }
                    let key = format!("w{w}-k{i}");
                    assert!(wrapper.insert(&key).unwrap());
                    inserted.fetch_add(1, Ordering::SeqCst);
                    // Read-your-writes: found right after the insert returned.
                    assert_eq!(wrapper.contains(&key).unwrap(), Lookup::Present, "{key}");
                    if i % 97 == 0 {
                        let earlier = format!("w{w}-k{}", i / 2);
                        assert_eq!(wrapper.contains(&earlier).unwrap(), Lookup::Present);
                    }
                }
            })
        })
        .collect();

    let snapshotter = {
        let wrapper = Arc::clone(&wrapper);
        let done = Arc::clone(&done);
        let snapshot = snapshot.clone();
        thread::spawn(move || {
            let mut checked = 0;
            // Until the writers are done, and at least once.
            while checked == 0 || !done.load(Ordering::SeqCst) {
                // Every key committed before the save starts is at or below the snapshot's
                // generation: the snapshot's bits alone must hold it (another wrapper cannot
                // open the database while this one lives).
                let mut keys = Vec::new();
                bloom_store::PrimaryStore::keys_since(
                    wrapper.store(),
                    bloom_store::DatasetGeneration::ZERO,
                    &mut |k| keys.push(k.to_vec()),
                )
                .unwrap();
                if wrapper.save_snapshot(&snapshot).is_ok() {
                    let saved = bloom_format::Snapshot::read_file(
                        &snapshot,
                        &bloom_format::DecodeOptions::unlimited(),
                    )
                    .unwrap();
                    let filter = bloom_core::BloomFilter::from_snapshot(&saved).unwrap();
                    for key in &keys {
                        assert!(
                            filter.contains(&bloom_core::EncodedKey::from_encoded(key)),
                            "{}",
                            String::from_utf8_lossy(key)
                        );
                    }
                    checked += 1;
                }
                thread::yield_now();
            }
            checked
        })
    };

    // A growth rebuild in the middle of the inserts: once a fifth of them are in (the filter
    // is planned for 2,000 keys, so it has to grow), with the last tenth after it.
    while inserted.load(Ordering::SeqCst) < WRITERS * PER_WRITER / 5 {
        thread::yield_now();
    }
    wrapper.rebuild().unwrap();
    rebuilt.store(true, Ordering::SeqCst);

    for w in writers {
        w.join().unwrap();
    }
    done.store(true, Ordering::SeqCst);
    let snapshots_checked = snapshotter.join().unwrap();
    assert!(snapshots_checked > 0);

    assert!(wrapper.mode().is_trusted());
    for w in 0..WRITERS {
        for i in 0..PER_WRITER {
            assert_eq!(
                wrapper.contains(&format!("w{w}-k{i}")).unwrap(),
                Lookup::Present
            );
        }
    }
    assert_eq!(wrapper.metrics().inserts, u64::from(WRITERS * PER_WRITER));
}

#[test]
fn concurrent_rebuilds_do_not_lose_inserts_made_meanwhile() {
    let (wrapper, _) = FilteredStore::open_and_recover(
        bloom_store::MemoryStore::new(),
        FilterOptions::new(500, 0.01),
    )
    .unwrap();
    let wrapper = Arc::new(wrapper);
    let inserter = {
        let wrapper = Arc::clone(&wrapper);
        thread::spawn(move || {
            for i in 0..20_000u32 {
                wrapper.insert(&format!("k{i}")).unwrap();
                // A key lost by a rebuild switch stays lost until the next rebuild finishes,
                // so recent keys are checked while the rebuilds run.
                for j in i.saturating_sub(16)..=i {
                    assert_eq!(
                        wrapper.contains(&format!("k{j}")).unwrap(),
                        Lookup::Present,
                        "k{j} lost while rebuilding"
                    );
                }
            }
        })
    };
    let rebuilders: Vec<_> = (0..3)
        .map(|_| {
            let wrapper = Arc::clone(&wrapper);
            thread::spawn(move || {
                for _ in 0..10 {
                    wrapper.rebuild().unwrap();
                }
            })
        })
        .collect();
    inserter.join().unwrap();
    for r in rebuilders {
        r.join().unwrap();
    }
    assert!(wrapper.mode().is_trusted());
    for i in 0..20_000 {
        assert_eq!(
            wrapper.contains(&format!("k{i}")).unwrap(),
            Lookup::Present,
            "k{i}"
        );
    }
}
