//! The reference article's contract (bloom-check.swift), in Rust, plus independent vectors
//! for the `sha256-split4` rule computed with Python's hashlib.

use bloom_core::{BloomFilter, Filter, FilterConfig, FilterParams, KeyEncoding, PositionRule};

fn contract_keys() -> Vec<String> {
    let mut keys: Vec<String> = (0..80).map(|i| format!("record-{i}")).collect();
    keys.push(String::new());
    keys
}

fn seed_filter() -> BloomFilter {
    BloomFilter::new(FilterConfig::seed_teaching()).unwrap()
}

fn default_filter() -> BloomFilter {
    let params = FilterParams::for_false_positive_rate(100, 0.01).unwrap();
    BloomFilter::new(FilterConfig::new(params)).unwrap()
}

#[test]
fn the_contract_holds_for_both_rules() {
    for mut filter in [seed_filter(), default_filter()] {
        let rule = filter.config().rule();
        assert!(
            !filter.contains(""),
            "{rule}: empty filter contains the empty key"
        );

        let keys = contract_keys();
        for key in &keys {
            filter.insert(key);
        }
        for key in &keys {
            assert!(
                filter.contains(key),
                "{rule}: {key:?} not found after insert"
            );
        }

        let before = filter.to_bytes();
        for key in &keys {
            filter.insert(key);
        }
        assert_eq!(
            filter.to_bytes(),
            before,
            "{rule}: reinserting changed the bytes"
        );

        let restored =
            BloomFilter::from_bytes(filter.config().clone(), &before, filter.items_inserted())
                .unwrap();
        for key in &keys {
            assert!(restored.contains(key), "{rule}: restored copy lost {key:?}");
        }
        assert_eq!(restored, filter);
    }
}

#[test]
fn invalid_length_is_rejected() {
    let config = FilterConfig::seed_teaching();
    for len in [0, 127, 129] {
        assert!(matches!(
            BloomFilter::from_bytes(config.clone(), &vec![0; len], 0),
            Err(bloom_core::BitsError::Length { expected: 128, .. })
        ));
    }
}

#[test]
fn a_saturated_filter_says_maybe_for_a_key_never_inserted() {
    let saturated =
        BloomFilter::from_bytes(FilterConfig::seed_teaching(), &[0xff; 128], 0).unwrap();
    assert!(saturated.contains("never-inserted"));
    assert_eq!(saturated.count_ones(), saturated.config().bits());
    let estimate = saturated.estimated_items();
    assert!(estimate.is_finite() && estimate > 0.0, "{estimate}");
    assert!((saturated.estimated_false_positive_rate() - 1.0).abs() < f64::EPSILON);
}

#[test]
fn long_chinese_emoji_and_unicode_keys() {
    let long = "长".repeat(10_000);
    let long_bytes = vec![0xA5u8; 20_000];
    let keys = [
        "中文键",
        "😀🚀",
        "\u{1F468}\u{200D}\u{1F469}\u{200D}\u{1F467}",
        long.as_str(),
    ];
    for encoding in KeyEncoding::ALL {
        let params = FilterParams::for_false_positive_rate(100, 0.001).unwrap();
        let mut filter =
            BloomFilter::new(FilterConfig::new(params).with_encoding(encoding)).unwrap();
        for key in keys {
            filter.insert(key);
        }
        for key in keys {
            assert!(filter.contains(key), "{encoding}: {key:.20}");
        }
        if encoding == KeyEncoding::Bytes {
            assert_eq!(filter.insert(&long_bytes), Ok(true));
            assert_eq!(filter.contains(&long_bytes), Ok(true));
        } else {
            assert!(filter.insert(&long_bytes).is_err());
        }
    }
}

#[test]
fn nfc_unifies_nfc_and_nfd_while_utf8_keeps_them_apart() {
    let nfc = "Beyonc\u{e9} \u{ac00}"; // precomposed é and the Hangul syllable GA
    let nfd = "Beyonce\u{301} \u{1100}\u{1161}"; // e + combining acute, jamo G + A
    assert_ne!(nfc.as_bytes(), nfd.as_bytes());
    let params = FilterParams::new(1 << 16, 7).unwrap();

    // Where a key's bits land under `config`.
    let positions = |config: &FilterConfig, key: &str| -> Vec<u64> {
        config
            .positions(&config.encoding().encode_str(key))
            .collect()
    };
    let config = FilterConfig::new(params).with_encoding(KeyEncoding::Nfc);
    assert_eq!(positions(&config, nfc), positions(&config, nfd));
    let mut filter = BloomFilter::new(config).unwrap();
    filter.insert(nfd);
    assert!(filter.contains(nfc));

    let config = FilterConfig::new(params).with_encoding(KeyEncoding::Utf8);
    assert_ne!(positions(&config, nfc), positions(&config, nfd));
}

fn vectors() -> serde_json::Value {
    serde_json::from_str(include_str!("data/split4_vectors.json")).unwrap()
}

#[test]
fn split4_positions_match_the_independent_python_vectors() {
    let vectors = vectors();
    let config = FilterConfig::seed_teaching();
    assert_eq!(config.rule(), PositionRule::Sha256Split4);
    let cases = vectors["positions"].as_array().unwrap();
    assert_eq!(cases.len(), 8);
    for case in cases {
        let key = case["key"].as_str().unwrap();
        let expected: Vec<u64> = case["positions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.as_u64().unwrap())
            .collect();
        let actual: Vec<u64> = config
            .positions(&config.encoding().encode_str(key))
            .collect();
        assert_eq!(actual, expected, "key {key:.20?}");
    }
}

#[test]
fn split4_sets_exactly_the_bits_of_the_reference_code() {
    let vectors = vectors();
    let keys: Vec<String> = vectors["contract_keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(keys, contract_keys());
    let mut filter = seed_filter();
    filter.insert_all(&keys);
    let hex: String = filter
        .to_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(hex, vectors["contract_snapshot_hex"].as_str().unwrap());
}
