//! The counting filter: no false negatives under any sequence of inserts and removes of
//! inserted keys, saturation that never turns into an "absent", the false-positive rate of
//! the remaining load after removals, projection, union and snapshots.

use std::collections::HashMap;

use bloom_core::{
    BloomFilter, COUNTER_MAX, CountingBloomFilter, Filter, FilterConfig, FilterParams, KeyEncoding,
    Mismatch, PositionRule, RemoveError, Salt, SnapshotError,
};
use bloom_format::{DecodeError, DecodeOptions, EncodeError, LayoutId, Snapshot};
use proptest::prelude::*;

/// Two-sided 99.9% normal quantile.
const Z_999: f64 = 3.290_526_731_491_926;

fn config(items: u64, fpr: f64) -> FilterConfig {
    FilterConfig::new(FilterParams::for_false_positive_rate(items, fpr).unwrap())
}

#[derive(Clone, Debug)]
enum Op {
    Insert(u8),
    /// Removes the key with this index among the keys currently inserted (if any).
    Remove(u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        any::<u8>().prop_map(Op::Insert),
        any::<u8>().prop_map(Op::Remove)
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// After any sequence of inserts and removes of inserted keys, every key inserted more
    /// times than removed is reported present, and every such remove is accepted. Small
    /// filters (down to 16 counters) make collisions and saturation common.
    #[test]
    fn no_false_negatives_after_inserts_and_removes(
        bits in 16u64..2048,
        hashes in 1u32..8,
        rule in prop_oneof![Just(PositionRule::Xxh3_128), Just(PositionRule::Sha256Double)],
        ops in proptest::collection::vec(op(), 1..400),
    ) {
        let config = FilterConfig::new(FilterParams::new(bits, hashes).unwrap())
            .with_rule(rule)
            .unwrap();
        let mut filter = CountingBloomFilter::new(config).unwrap();
        let mut live: HashMap<String, u32> = HashMap::new();
        for op in ops {
            match op {
                Op::Insert(i) => {
                    let key = format!("key-{}", i % 64);
                    filter.insert(&key);
                    *live.entry(key).or_default() += 1;
                }
                Op::Remove(i) => {
                    let mut keys: Vec<&String> = live.keys().collect();
                    keys.sort();
                    let Some(key) = keys.get(usize::from(i) % keys.len().max(1)).map(|k| (*k).clone())
                    else {
                        continue;
                    };
                    prop_assert_eq!(filter.remove(&key), Ok(()), "{} was inserted", key);
                    let count = live.get_mut(&key).unwrap();
                    *count -= 1;
                    if *count == 0 {
                        live.remove(&key);
                    }
                }
            }
            for key in live.keys() {
                prop_assert!(filter.contains(key), "false negative for {}", key);
            }
        }
        let total: u64 = live.values().map(|&c| u64::from(c)).sum();
        prop_assert_eq!(filter.items_inserted(), total);
        // The projection answers exactly as the counters do.
        let plain = filter.to_bloom_filter().unwrap();
        for i in 0..64 {
            let key = format!("key-{i}");
            prop_assert_eq!(plain.contains(&key), filter.contains(&key));
        }
    }
}

#[test]
fn without_saturation_removing_keys_restores_the_exact_counters() {
    let config = config(2_000, 0.01);
    let mut both = CountingBloomFilter::new(config.clone()).unwrap();
    let mut kept = CountingBloomFilter::new(config.clone()).unwrap();
    let mut plain = BloomFilter::new(config).unwrap();
    for i in 0..2_000 {
        let key = format!("k{i}");
        both.insert(&key);
        if i % 2 == 0 {
            kept.insert(&key);
            plain.insert(&key);
        }
    }
    assert_eq!(both.saturated_counters(), 0);
    for i in (1..2_000).step_by(2) {
        both.remove(&format!("k{i}")).unwrap();
    }
    assert_eq!(both, kept);
    // The projection is bit for bit the plain filter of the remaining keys.
    assert_eq!(both.to_bloom_filter().unwrap().as_words(), plain.as_words());
    assert_eq!(both.count_ones(), plain.count_ones());
}

#[test]
fn removing_an_absent_key_is_refused_and_changes_nothing() {
    let mut filter = CountingBloomFilter::new(config(1_000, 0.001)).unwrap();
    filter.insert("present");
    let before = filter.clone();
    // Keys that read absent (so not false positives) are refused.
    let mut refused = 0;
    for i in 0..1_000 {
        let key = format!("absent-{i}");
        if !filter.contains(&key) {
            assert_eq!(filter.remove(&key), Err(RemoveError::Absent));
            refused += 1;
        }
    }
    assert!(refused > 990, "{refused}");
    assert_eq!(filter, before);
    // Removing more often than inserted: the second remove is refused.
    assert_eq!(filter.remove("present"), Ok(()));
    assert_eq!(filter.remove("present"), Err(RemoveError::Absent));
    assert_eq!(filter.count_ones(), 0);
    assert_eq!(filter.items_inserted(), 0);
}

#[test]
fn a_saturated_counter_stays_at_fifteen_through_removes() {
    // One key inserted 40 times drives its counters far past 15.
    let mut filter = CountingBloomFilter::new(config(100, 0.01)).unwrap();
    for _ in 0..40 {
        filter.insert("hot");
    }
    let hashes = u64::from(filter.config().hashes());
    assert!(filter.saturated_counters() >= 1);
    assert!(filter.saturated_counters() <= hashes);
    for _ in 0..40 {
        assert_eq!(filter.remove("hot"), Ok(()));
        assert!(filter.contains("hot"));
    }
    // The counters stayed at 15: a stale maybe, never a false absent.
    let positions: Vec<u64> = filter
        .config()
        .positions(&filter.config().encoding().encode_str("hot"))
        .collect();
    for p in positions {
        assert_eq!(filter.counter(p), COUNTER_MAX);
    }

    // Saturation shared by many keys: a tiny filter, hundreds of keys, half removed.
    let tiny = FilterConfig::new(FilterParams::new(64, 3).unwrap());
    let mut filter = CountingBloomFilter::new(tiny).unwrap();
    for i in 0..600 {
        filter.insert(&format!("k{i}"));
    }
    assert!(filter.saturated_counters() > 0);
    for i in (0..600).step_by(2) {
        assert_eq!(filter.remove(&format!("k{i}")), Ok(()));
    }
    for i in (1..600).step_by(2) {
        assert!(filter.contains(&format!("k{i}")), "k{i}");
    }
}

/// Inserts 2n keys, removes n of them, and compares the rate over fixed disjoint queries
/// with `(1 - e^(-k n / m))^k` for the n keys that remain, within a binomial 99.9% interval.
fn rate_after_removing_half(fpr: f64) {
    let n = 20_000u64;
    let config = config(n, fpr);
    let mut filter = CountingBloomFilter::new(config.clone()).unwrap();
    for i in 0..2 * n {
        filter.insert(&format!("inserted-{i}"));
    }
    for i in (0..2 * n).filter(|i| i % 2 == 1) {
        filter.remove(&format!("inserted-{i}")).unwrap();
    }
    for i in (0..2 * n).filter(|i| i % 2 == 0) {
        assert!(filter.contains(&format!("inserted-{i}")));
    }
    let queries = 200_000u64;
    let hits = (0..queries)
        .filter(|i| filter.contains(&format!("absent-{i}")))
        .count() as f64;
    let q = queries as f64;
    let observed = hits / q;
    let predicted = config.params().predicted_false_positive_rate(n);
    let sigma = (q * predicted * (1.0 - predicted)).sqrt();
    let tolerance = (Z_999 * sigma + 0.5) / q;
    println!("p={fpr}: observed {observed:.6}, predicted {predicted:.6} ± {tolerance:.6}");
    assert!(
        (observed - predicted).abs() <= tolerance,
        "observed {observed} vs predicted {predicted} (±{tolerance})"
    );
}

#[test]
fn false_positive_rate_after_removing_half_at_one_percent() {
    rate_after_removing_half(0.01);
}

#[test]
fn false_positive_rate_after_removing_half_at_a_tenth_of_a_percent() {
    rate_after_removing_half(0.001);
}

#[test]
fn union_adds_counters_and_saturates() {
    let config = config(500, 0.01);
    let mut a = CountingBloomFilter::new(config.clone()).unwrap();
    let mut b = CountingBloomFilter::new(config.clone()).unwrap();
    for _ in 0..10 {
        a.insert("shared");
        b.insert("shared");
    }
    a.insert("only-a");
    b.insert("only-b");
    a.union(&b).unwrap();
    assert!(a.contains("only-a") && a.contains("only-b") && a.contains("shared"));
    assert_eq!(a.items_inserted(), 22);
    let positions: Vec<u64> = config
        .positions(&config.encoding().encode_str("shared"))
        .collect();
    for p in positions {
        assert_eq!(a.counter(p), COUNTER_MAX, "10 + 10 saturates at 15");
    }
    a.remove("only-b").unwrap();
    assert!(a.contains("only-a") && a.contains("shared"));

    let other =
        CountingBloomFilter::new(config.clone().with_salt(Salt::new(b"x").unwrap()).unwrap())
            .unwrap();
    assert!(matches!(
        a.union(&other),
        Err(e) if e.mismatch == Mismatch::Salt
    ));
}

#[test]
fn snapshots_round_trip_and_are_told_apart_from_plain_ones() {
    for rule in [
        PositionRule::Xxh3_128,
        PositionRule::Sha256Double,
        PositionRule::Sha256Split4,
    ] {
        // 4: the most positions `sha256-split4` takes.
        let params = FilterParams::new(1_001, 4).unwrap();
        let config = FilterConfig::new(params)
            .with_rule(rule)
            .unwrap()
            .with_encoding(KeyEncoding::NfcTrimLowercase);
        let mut filter = CountingBloomFilter::new(config).unwrap();
        for i in 0..100 {
            filter.insert(&format!("Key {i}"));
        }
        filter.insert("Key 1");
        filter.remove("Key 2").unwrap();
        let snapshot = filter.to_snapshot(7u64);
        assert_eq!(snapshot.header().layout, LayoutId::Counting4);
        assert_eq!(snapshot.payload().len(), 501, "ceil(1001 / 2)");
        let read = Snapshot::decode(snapshot.encode(), &DecodeOptions::unlimited()).unwrap();
        let back = CountingBloomFilter::from_snapshot(&read).unwrap();
        assert_eq!(back, filter);
        assert!(
            back.contains("key 1"),
            "the encoding travels with the snapshot"
        );
        // A plain filter refuses a counting snapshot, and the other way round.
        assert!(matches!(
            BloomFilter::from_snapshot(&read),
            Err(SnapshotError::IsCounting)
        ));
        let plain = filter.to_bloom_filter().unwrap().to_snapshot(7u64);
        assert!(matches!(
            CountingBloomFilter::from_snapshot(&plain),
            Err(SnapshotError::NotCounting {
                layout: LayoutId::Standard
            })
        ));

        // With an odd m the last byte's high nibble is padding: set, it is refused.
        let mut damaged = snapshot.payload().to_vec();
        *damaged.last_mut().unwrap() |= 0x10;
        let header = snapshot.header().clone();
        assert!(matches!(
            Snapshot::new(header, damaged),
            Err(EncodeError::Invalid(DecodeError::NonZeroPadding {
                bit_count: 4004,
                ..
            }))
        ));
    }
}
