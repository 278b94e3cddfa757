//! Concurrent inserts into an `AtomicBloomFilter` lose no bits.

use std::sync::Arc;
use std::thread;

use bloom_core::{AtomicBloomFilter, BloomFilter, Filter, FilterConfig, FilterParams};

/// Every thread's keys are found afterwards, whether it inserted one key per call or in
/// batches, and the bits are exactly those of a sequential build.
#[test]
fn threads_inserting_disjoint_sets_end_with_the_bits_of_a_sequential_build() {
    const THREADS: usize = 8;
    const PER_THREAD: usize = 20_000;
    // A small filter, so threads constantly write the same words.
    let config = FilterConfig::new(FilterParams::new(1 << 14, 5).unwrap());
    let shared = Arc::new(AtomicBloomFilter::new(config.clone()).unwrap());
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let shared = Arc::clone(&shared);
            thread::spawn(move || {
                let keys = (0..PER_THREAD).map(|i| format!("t{t}-k{i}"));
                // Half the threads insert one key per call, half in batches.
                if t % 2 == 0 {
                    keys.for_each(|k| _ = shared.insert(&k));
                } else {
                    shared.insert_all(keys);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }

    let mut sequential = BloomFilter::new(config).unwrap();
    for t in 0..THREADS {
        for i in 0..PER_THREAD {
            sequential.insert(&format!("t{t}-k{i}"));
        }
    }
    let concurrent = shared.to_filter().unwrap();
    assert_eq!(concurrent.as_words(), sequential.as_words());
    assert_eq!(concurrent.to_bytes(), sequential.to_bytes());
}

#[test]
fn conversion_round_trips_and_copies_taken_during_inserts_hold_finished_keys() {
    let config = FilterConfig::new(FilterParams::for_false_positive_rate(50_000, 0.01).unwrap());
    let shared = Arc::new(AtomicBloomFilter::new(config).unwrap());
    let writer = {
        let shared = Arc::clone(&shared);
        thread::spawn(move || {
            for i in 0..50_000 {
                shared.insert(&format!("key-{i}"));
            }
        })
    };
    // Keys inserted on this thread before each copy must be in that copy.
    for i in 0..200 {
        let key = format!("mine-{i}");
        shared.insert(&key);
        let copy = shared.to_filter().unwrap();
        assert!(copy.contains(&key));
    }
    writer.join().unwrap();
    let copy = shared.to_filter().unwrap();
    for i in 0..50_000 {
        assert!(copy.contains(&format!("key-{i}")));
    }
    let back = AtomicBloomFilter::from(copy.clone());
    assert_eq!(back.to_filter().unwrap(), copy);
    assert_eq!(back.count_ones(), copy.count_ones());
}

/// A count loaded at `u64::MAX` (a snapshot may record it) saturates, as `BloomFilter`'s
/// does, for one insert, a batch, and threads inserting at once.
#[test]
fn the_item_count_saturates_and_never_wraps() {
    let config = bloom_core::FilterConfig::planned(1000, 0.01).unwrap();
    let bytes = vec![0u8; usize::try_from(config.params().byte_len()).unwrap()];
    let load = |items: u64| {
        let mut header = config.to_header(0.into(), items);
        header.item_count = items;
        AtomicBloomFilter::from_payload::<bloom_core::SnapshotError>(&header, |sink| {
            sink(&bytes);
            Ok(())
        })
        .unwrap()
    };
    let full = load(u64::MAX);
    assert!(full.insert("one"));
    assert_eq!(full.items_inserted(), u64::MAX);
    assert_eq!(full.insert_all(["two", "three"]), 2);
    assert_eq!(full.items_inserted(), u64::MAX);
    assert_eq!(full.to_filter().unwrap().items_inserted(), u64::MAX);

    let near = load(u64::MAX - 100);
    std::thread::scope(|scope| {
        for t in 0..4 {
            let near = &near;
            scope.spawn(move || {
                for i in 0..200 {
                    near.insert(&format!("{t}-{i}"));
                }
            });
        }
    });
    assert_eq!(near.items_inserted(), u64::MAX);
    // The plain filter agrees.
    let mut plain = full.to_filter().unwrap();
    plain.insert("four");
    assert_eq!(plain.items_inserted(), u64::MAX);
}
