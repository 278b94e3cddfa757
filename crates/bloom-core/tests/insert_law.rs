//! Property tests: no false negatives, union contains both sides, Guava's law
//! `insert(k) == !contains(k)` before the call, and the batched operations (`insert_all`,
//! `contains_each`) answering exactly as the one-key ones.

use bloom_core::{
    AtomicBloomFilter, BloomFilter, EncodedKey, Filter, FilterConfig, FilterParams, KeyEncoding,
    Layout, PositionRule, Salt,
};
use proptest::prelude::*;

fn config(
    bits: u64,
    hashes: u32,
    split4: bool,
    encoding: KeyEncoding,
    salted: bool,
) -> FilterConfig {
    config_of(
        bits,
        hashes,
        if split4 { 0 } else { 1 },
        false,
        encoding,
        salted,
    )
}

/// Rule 0 is `sha256-split4`, 1 `sha256-double`, 2 `xxh3-128`; `blocked` uses blocks of
/// `bits % 8 + 1` times 512 bits (split4 stays standard).
fn config_of(
    bits: u64,
    hashes: u32,
    rule: usize,
    blocked: bool,
    encoding: KeyEncoding,
    salted: bool,
) -> FilterConfig {
    // Rules 0..3 over the standard and blocked layouts; 3..7 over the split-block ones.
    let (rule, split) = match rule {
        0..3 => (PositionRule::ALL[rule], None),
        3 => (PositionRule::Xxh64, Some(Layout::SplitBlock256)),
        4 => (PositionRule::Xxh3_64, Some(Layout::SplitBlock512)),
        5 => (PositionRule::Xxh3_128, Some(Layout::SplitBlock256)),
        _ => (PositionRule::Sha256Double, Some(Layout::SplitBlock512)),
    };
    let hashes = if rule == PositionRule::Sha256Split4 {
        hashes.min(4)
    } else {
        hashes
    };
    let salt = if salted {
        Salt::new(b"property-salt").unwrap()
    } else {
        Salt::default()
    };
    let params = if let Some(layout) = split {
        FilterParams::with_layout(layout, (bits % 8 + 1) * 512, 8).unwrap()
    } else if blocked && rule.supports(Layout::Blocked512) {
        FilterParams::with_layout(Layout::Blocked512, (bits % 8 + 1) * 512, hashes).unwrap()
    } else {
        FilterParams::new(bits, hashes).unwrap()
    };
    FilterConfig::from_parts(params, rule, encoding, salt).unwrap()
}

fn any_config() -> impl Strategy<Value = FilterConfig> {
    (
        1u64..5000,
        1u32..16,
        0usize..7,
        any::<bool>(),
        prop::sample::select(KeyEncoding::ALL.to_vec()),
        any::<bool>(),
    )
        .prop_map(|(m, k, rule, blocked, e, salted)| config_of(m, k, rule, blocked, e, salted))
}

proptest! {
    #[test]
    fn never_a_false_negative(config in any_config(), keys in prop::collection::vec(".{0,40}", 0..200)) {
        let mut filter = BloomFilter::new(config).unwrap();
        for key in &keys {
            filter.insert(key);
        }
        for key in &keys {
            prop_assert!(filter.contains(key));
        }
    }

    #[test]
    fn never_a_false_negative_for_byte_keys(
        m in 1u64..5000,
        k in 1u32..16,
        keys in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..64), 0..100),
    ) {
        let mut filter = BloomFilter::new(config(m, k, false, KeyEncoding::Bytes, false)).unwrap();
        for key in &keys {
            prop_assert!(filter.insert(key).is_ok());
        }
        for key in &keys {
            prop_assert_eq!(filter.contains(key), Ok(true));
        }
    }

    #[test]
    fn union_contains_both_sides(
        config in any_config(),
        left in prop::collection::vec(".{0,20}", 0..100),
        right in prop::collection::vec(".{0,20}", 0..100),
    ) {
        let mut a = BloomFilter::new(config.clone()).unwrap();
        let mut b = BloomFilter::new(config).unwrap();
        a.insert_all(&left);
        b.insert_all(&right);
        let mut both = a.clone();
        both.intersect(&b).unwrap();
        a.union(&b).unwrap();
        for key in left.iter().chain(&right) {
            prop_assert!(a.contains(key));
        }
        for key in left.iter().filter(|k| right.contains(k)) {
            prop_assert!(both.contains(key));
        }
    }

    #[test]
    fn insert_reports_exactly_what_contains_said_before(
        config in any_config(),
        keys in prop::collection::vec(".{0,12}", 0..300),
    ) {
        let mut filter = BloomFilter::new(config).unwrap();
        for key in &keys {
            let before = filter.contains(key);
            prop_assert_eq!(filter.insert(key), !before);
        }
    }
}

/// Configurations over the 10 MiB below which many-key calls hash and probe each key in one
/// step, so that the batched path itself is checked against single calls.
fn large_config() -> impl Strategy<Value = FilterConfig> {
    (
        prop_oneof![
            Just(Layout::Standard),
            Just(Layout::Blocked512),
            Just(Layout::SplitBlock256),
            Just(Layout::SplitBlock512)
        ],
        prop_oneof![
            Just(PositionRule::Xxh3_128),
            Just(PositionRule::Sha256Double),
            Just(PositionRule::Xxh64),
            Just(PositionRule::Xxh3_64)
        ],
        1u32..12,
    )
        .prop_map(|(layout, rule, hashes)| {
            let bits = 100_000_000 / 512 * 512;
            // The split-block layouts take k = 8 and every rule computing an h1; the others
            // not the 64-bit rules.
            let (layout, hashes) = match (layout.split_block_bits(), rule.is_64_bit()) {
                (Some(_), _) => (layout, 8),
                (None, true) => (Layout::SplitBlock512, 8),
                (None, false) => (layout, hashes),
            };
            FilterConfig::new(FilterParams::with_layout(layout, bits, hashes).unwrap())
                .with_rule(rule)
                .unwrap()
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn batched_calls_on_filters_past_the_cache_answer_as_single_calls(
        config in large_config(),
        keys in prop::collection::vec("[a-c]{0,3}", 0..100),
        queries in prop::collection::vec("[a-e]{0,3}", 0..100),
    ) {
        let mut one_by_one = BloomFilter::new(config.clone()).unwrap();
        let changed: u64 = keys.iter().map(|k| u64::from(one_by_one.insert(k))).sum();
        let mut all = BloomFilter::new(config.clone()).unwrap();
        prop_assert_eq!(all.insert_all(&keys), changed);
        prop_assert_eq!(&all, &one_by_one);
        let answers: Vec<bool> = queries.iter().map(|k| all.contains(k)).collect();
        // Both kinds batch past the caches.
        let each = all.contains_each(&queries);
        let shown = format!("{each:?}");
        prop_assert!(shown.contains("in_cache: false"), "{}", shown);
        prop_assert_eq!(each.collect::<Vec<_>>(), answers.clone());
        let atomic = AtomicBloomFilter::new(config).unwrap();
        prop_assert_eq!(atomic.insert_all(&keys), changed);
        let each = atomic.contains_each(&queries);
        let shown = format!("{each:?}");
        prop_assert!(shown.contains("in_cache: false"), "{}", shown);
        prop_assert_eq!(each.collect::<Vec<_>>(), answers);
    }
}

/// Byte keys, some of them refused (not UTF-8) at any place: first, last, in a row, at a
/// batch's edge.
fn byte_keys() -> impl Strategy<Value = Vec<Vec<u8>>> {
    prop::collection::vec(
        prop_oneof![
            4 => "[a-e]{0,3}".prop_map(String::into_bytes),
            1 => Just(b"\xc3".to_vec()),
        ],
        0..80,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Past the caches, answers come a batch at a time while the next batch's lines are on
    /// their way: the answers, refusals included, are still one per key, in order, however
    /// the iterator is driven.
    #[test]
    fn batched_lookups_of_refused_byte_keys_answer_as_single_calls(
        config in large_config(),
        inserted in prop::collection::vec("[a-c]{0,3}", 0..40),
        queries in byte_keys(),
        step in 1usize..40,
    ) {
        let mut plain = BloomFilter::new(config.clone()).unwrap();
        plain.insert_all(&inserted);
        let atomic = AtomicBloomFilter::new(config).unwrap();
        atomic.insert_all(&inserted);
        let expected: Vec<_> = queries.iter().map(|k| plain.contains(k)).collect();
        prop_assert_eq!(plain.contains_each(&queries).collect::<Vec<_>>(), expected.clone());
        prop_assert_eq!(atomic.contains_each(&queries).collect::<Vec<_>>(), expected.clone());
        // Driven by `next` a few at a time, with the size hint checked on the way.
        let mut each = plain.contains_each(&queries);
        let mut answers = Vec::new();
        loop {
            let (low, high) = each.size_hint();
            prop_assert!(low <= queries.len() - answers.len(), "{} {} {}", low, queries.len(), answers.len());
            prop_assert_eq!(high, Some(queries.len() - answers.len()));
            let taken: Vec<_> = each.by_ref().take(step).collect();
            if taken.is_empty() {
                break;
            }
            answers.extend(taken);
        }
        prop_assert_eq!(answers, expected);
    }

    /// A batched insert of byte keys stops at the first refused key, after every key before
    /// it, as one insert per key would.
    #[test]
    fn batched_inserts_of_refused_byte_keys_stop_where_single_calls_would(
        config in large_config(),
        keys in byte_keys(),
    ) {
        let mut one_by_one = BloomFilter::new(config.clone()).unwrap();
        let mut changed = 0;
        let mut refused = false;
        for key in &keys {
            match one_by_one.insert(key) {
                Ok(c) => changed += u64::from(c),
                Err(_) => {
                    refused = true;
                    break;
                }
            }
        }
        let mut all = BloomFilter::new(config).unwrap();
        let outcome = all.insert_all(&keys);
        prop_assert_eq!(outcome.is_err(), refused);
        if let Ok(c) = outcome {
            prop_assert_eq!(c, changed);
        }
        prop_assert_eq!(&all, &one_by_one);
        prop_assert_eq!(all.items_inserted(), changed);
    }
}

proptest! {
    #[test]
    fn insert_all_equals_one_insert_per_key(
        config in any_config(),
        keys in prop::collection::vec("[a-c]{0,3}", 0..100),
    ) {
        let mut one_by_one = BloomFilter::new(config.clone()).unwrap();
        let changed: u64 = keys.iter().map(|k| u64::from(one_by_one.insert(k))).sum();
        let mut all = BloomFilter::new(config).unwrap();
        // Short keys from a tiny alphabet repeat: the count must follow insertion order.
        prop_assert_eq!(all.insert_all(&keys), changed);
        prop_assert_eq!(&all, &one_by_one);
        prop_assert_eq!(all.items_inserted(), changed);
    }

    #[test]
    fn atomic_insert_all_equals_one_insert_per_key(
        config in any_config(),
        keys in prop::collection::vec("[a-c]{0,3}", 0..100),
    ) {
        let one_by_one = AtomicBloomFilter::new(config.clone()).unwrap();
        let changed: u64 = keys.iter().map(|k| u64::from(one_by_one.insert(k))).sum();
        let all = AtomicBloomFilter::new(config).unwrap();
        prop_assert_eq!(all.insert_all(&keys), changed);
        prop_assert_eq!(all.to_filter().unwrap(), one_by_one.to_filter().unwrap());
    }

    #[test]
    fn contains_each_answers_exactly_what_contains_does(
        config in any_config(),
        inserted in prop::collection::vec("[a-d]{0,3}", 0..60),
        queries in prop::collection::vec("[a-e]{0,3}", 0..100),
    ) {
        let mut filter = BloomFilter::new(config).unwrap();
        filter.insert_all(&inserted);
        let one_by_one: Vec<bool> = queries.iter().map(|k| filter.contains(k)).collect();
        let each = filter.contains_each(&queries);
        prop_assert_eq!(each.size_hint(), (queries.len(), Some(queries.len())));
        prop_assert_eq!(each.collect::<Vec<_>>(), one_by_one.clone());
        let atomic = AtomicBloomFilter::from(filter);
        prop_assert_eq!(atomic.contains_each(&queries).collect::<Vec<_>>(), one_by_one);
    }

    /// Keys given already encoded (as a store returns them) go through the same batches and
    /// land on the same bits as text keys.
    #[test]
    fn encoded_batches_equal_one_encoded_key_at_a_time(
        config in any_config(),
        inserted in prop::collection::vec("[a-dé]{0,3}", 0..60),
        queries in prop::collection::vec("[a-eé]{0,3}", 0..100),
    ) {
        let encode = |keys: &[String]| -> Vec<Vec<u8>> {
            keys.iter().map(|k| config.encoding().encode_str(k).as_bytes().to_vec()).collect()
        };
        let (inserted_bytes, query_bytes) = (encode(&inserted), encode(&queries));
        let mut text = BloomFilter::new(config.clone()).unwrap();
        let mut encoded = BloomFilter::new(config.clone()).unwrap();
        let changed: u64 = inserted_bytes
            .iter()
            .map(|k| u64::from(text.insert(&EncodedKey::from_encoded(k))))
            .sum();
        prop_assert_eq!(encoded.insert_all(inserted_bytes.iter().map(|k| bloom_core::EncodedKey::from_encoded(k.as_ref()))), changed);
        prop_assert_eq!(encoded.as_words(), text.as_words());
        let one_by_one: Vec<bool> = query_bytes
            .iter()
            .map(|k| encoded.contains(&EncodedKey::from_encoded(k)))
            .collect();
        prop_assert_eq!(encoded.contains_each(query_bytes.iter().map(|k| bloom_core::EncodedKey::from_encoded(k.as_ref()))).collect::<Vec<_>>(), one_by_one.clone());
        let atomic = AtomicBloomFilter::new(config.clone()).unwrap();
        atomic.insert_all(inserted_bytes.iter().map(|k| bloom_core::EncodedKey::from_encoded(k.as_ref())));
        let copy = atomic.to_filter().unwrap();
        prop_assert_eq!(copy.as_words(), text.as_words());
        prop_assert_eq!(atomic.contains_each(query_bytes.iter().map(|k| bloom_core::EncodedKey::from_encoded(k.as_ref()))).collect::<Vec<_>>(), one_by_one);
        // Setting without a probe first: the same bits, the same count of keys that changed one.
        let set = AtomicBloomFilter::new(config).unwrap();
        prop_assert_eq!(set.insert_all(inserted_bytes.iter().map(|k| bloom_core::EncodedKey::from_encoded(k.as_ref()))), changed);
        let set_copy = set.to_filter().unwrap();
        prop_assert_eq!(set_copy.as_words(), text.as_words());
        prop_assert_eq!(set.items_inserted(), changed);
    }
}

#[test]
fn contains_each_takes_keys_lazily_from_an_endless_stream() {
    let mut filter = BloomFilter::new(config(4096, 5, false, KeyEncoding::Utf8, true)).unwrap();
    filter.insert_all((0..100).map(|i| i.to_string()));
    let mut taken = 0;
    let stream = (0u64..).map(|i| {
        taken += 1;
        i.to_string()
    });
    let answers: Vec<bool> = filter.contains_each(stream).take(40).collect();
    assert_eq!(answers, vec![true; 40]);
    // Keys are pulled a batch at a time, never the whole (endless) stream.
    assert!((40..=256).contains(&taken), "took {taken} keys");
}

#[test]
fn contains_each_is_fused_and_counts_down() {
    let filter = BloomFilter::new(config(1024, 3, false, KeyEncoding::Nfc, false)).unwrap();
    let keys: Vec<String> = (0..20).map(|i| format!("k{i}")).collect();
    let mut each = filter.contains_each(&keys);
    assert_eq!(each.next(), Some(false));
    assert_eq!(each.size_hint(), (19, Some(19)));
    assert_eq!(each.by_ref().count(), 19);
    assert_eq!(each.next(), None);
    assert_eq!(each.next(), None);
}

#[test]
fn clear_removes_every_key_and_keeps_the_configuration() {
    let config = config(2048, 4, false, KeyEncoding::NfcTrimLowercase, true);
    let mut filter = BloomFilter::new(config.clone()).unwrap();
    filter.insert_all(["Alpha", "beta", " GAMMA "]);
    assert!(filter.count_ones() > 0);
    filter.clear();
    assert_eq!(filter, BloomFilter::new(config.clone()).unwrap());
    assert_eq!(filter.config(), &config);
    assert!(!filter.contains("alpha"));
    assert!(filter.insert("gamma"));
    assert!(filter.contains(" Gamma"));
}

#[test]
fn union_and_intersect_refuse_incompatible_filters() {
    use bloom_core::{IncompatibleFilters, Mismatch};
    let base = config(1024, 4, false, KeyEncoding::Nfc, false);
    let cases = [
        (
            config(1025, 4, false, KeyEncoding::Nfc, false),
            Mismatch::Bits,
        ),
        (
            config(1024, 5, false, KeyEncoding::Nfc, false),
            Mismatch::Hashes,
        ),
        (
            config(1024, 4, true, KeyEncoding::Nfc, false),
            Mismatch::Rule,
        ),
        (
            config(1024, 4, false, KeyEncoding::Utf8, false),
            Mismatch::Encoding,
        ),
        (
            config(1024, 4, false, KeyEncoding::Nfc, true),
            Mismatch::Salt,
        ),
    ];
    for (other, mismatch) in cases {
        let mut a = BloomFilter::new(base.clone()).unwrap();
        a.insert("kept");
        let before = a.clone();
        let b = BloomFilter::new(other).unwrap();
        assert_eq!(a.union(&b), Err(IncompatibleFilters { mismatch }));
        assert_eq!(a.intersect(&b), Err(IncompatibleFilters { mismatch }));
        assert_eq!(
            a, before,
            "a refused combination must not change the filter"
        );
    }
}

#[test]
fn split4_refuses_more_than_four_positions() {
    let params = FilterParams::new(1024, 5).unwrap();
    assert!(matches!(
        FilterConfig::new(params).with_rule(PositionRule::Sha256Split4),
        Err(bloom_core::ConfigError::TooManyHashesForRule {
            found: 5,
            max: 4,
            ..
        })
    ));
}

#[test]
fn filters_past_two_to_the_thirty_two_bits_use_high_positions() {
    // 2^33 bits is a 1 GiB array; build the positions only, which is what could overflow.
    let config = FilterConfig::new(FilterParams::new((1 << 33) + 7, 8).unwrap());
    let high = (0..1000)
        .flat_map(|i| {
            config
                .positions(&config.encoding().encode_str(&format!("key-{i}")))
                .collect::<Vec<_>>()
        })
        .filter(|&p| p >= 1 << 32)
        .count();
    // Half the positions should land above 2^32; a 32-bit computation would give none.
    assert!(
        (3000..5000).contains(&high),
        "{high} of 8000 positions above 2^32"
    );
}

/// One-key calls of an unsalted `xxh3-128` filter with the blocked layout run code compiled
/// for its k (6, 7, 8 or 10). They must test and set exactly the bits of
/// `FilterConfig::positions` (the general code), for keys in every length class XXH3 treats
/// apart (0, 1–3, 4–8, 9–16, 17–128, 129–240 and longer), salted or not, k compiled or not.
#[test]
fn compiled_probes_test_and_set_exactly_the_specified_positions() {
    let blocked = [5, 6, 7, 8, 9, 10, 11].map(|k| (PositionRule::Xxh3_128, Layout::Blocked512, k));
    let split = [
        PositionRule::Xxh64,
        PositionRule::Xxh3_64,
        PositionRule::Xxh3_128,
        PositionRule::Sha256Double,
    ]
    .into_iter()
    .flat_map(|rule| {
        [
            (rule, Layout::SplitBlock256, 8),
            (rule, Layout::SplitBlock512, 8),
        ]
    });
    for (rule, layout, k) in blocked.into_iter().chain(split) {
        for salt in [Salt::default(), Salt::new(b"pepper").unwrap()] {
            let params = FilterParams::with_layout(layout, 512 * 37, k).unwrap();
            let config = FilterConfig::from_parts(params, rule, KeyEncoding::Bytes, salt).unwrap();
            let mut filter = BloomFilter::new(config.clone()).unwrap();
            let mut expected = vec![0u64; filter.as_words().len()];
            for len in 0..=300usize {
                let key: Vec<u8> = (0..len).map(|i| (i * 7 + len) as u8).collect();
                let positions: Vec<u64> =
                    config.positions(&EncodedKey::from_encoded(&key)).collect();
                assert_eq!(positions.len(), k as usize);
                let present = positions
                    .iter()
                    .all(|&p| expected[(p / 64) as usize] >> (p % 64) & 1 == 1);
                assert_eq!(
                    filter.contains(&key),
                    Ok(present),
                    "{rule} {layout} k {k}, length {len}"
                );
                assert_eq!(
                    filter.insert(&key),
                    Ok(!present),
                    "{rule} {layout} k {k}, length {len}"
                );
                for p in positions {
                    expected[(p / 64) as usize] |= 1 << (p % 64);
                }
                assert_eq!(
                    filter.as_words(),
                    &expected[..],
                    "{rule} {layout} k {k}, length {len}"
                );
            }
        }
    }
}
