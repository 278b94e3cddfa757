//! The split-block layouts and the 64-bit rules against vectors computed from
//! `docs/format.md` by an independent Python implementation (`data/split_block_vectors.py`,
//! hashlib and the `xxhash` package).

use bloom_core::{
    BloomFilter, EncodedKey, FilterConfig, FilterParams, KeyEncoding, Layout, PositionRule, Salt,
};
use serde_json::Value;

fn vectors() -> Value {
    serde_json::from_str(include_str!("data/split_block_vectors.json")).unwrap()
}

fn config(case: &Value) -> FilterConfig {
    let layout: Layout = case["layout"].as_str().unwrap().parse().unwrap();
    let rule: PositionRule = case["rule"].as_str().unwrap().parse().unwrap();
    let salt = bloom_format::unhex(case["salt"].as_str().unwrap()).unwrap();
    let salt = if salt.is_empty() {
        Salt::default()
    } else {
        Salt::new(&salt).unwrap()
    };
    let params = FilterParams::with_layout(layout, case["m"].as_u64().unwrap(), 8).unwrap();
    FilterConfig::from_parts(params, rule, KeyEncoding::Bytes, salt).unwrap()
}

#[test]
fn positions_of_sample_keys_match_the_specification() {
    let vectors = vectors();
    let samples = vectors["samples"].as_array().unwrap();
    assert_eq!(samples.len(), 2 * 4 * 2 * 6);
    for case in samples {
        let config = config(case);
        let key = bloom_format::unhex(case["key"].as_str().unwrap()).unwrap();
        let expected: Vec<u64> = case["positions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.as_u64().unwrap())
            .collect();
        let got: Vec<u64> = config.positions(&EncodedKey::from_encoded(&key)).collect();
        assert_eq!(got, expected, "{case}");
    }
}

#[test]
fn whole_payloads_match_the_specification() {
    let vectors = vectors();
    let filters = vectors["filters"].as_array().unwrap();
    assert_eq!(filters.len(), 2 * 4 * 2);
    for case in filters {
        let config = config(case);
        let mut plain = BloomFilter::new(config.clone()).unwrap();
        let atomic = bloom_core::AtomicBloomFilter::new(config).unwrap();
        let keys: Vec<Vec<u8>> = (0..300).map(|i| format!("key-{i}").into_bytes()).collect();
        for key in &keys {
            assert!(plain.insert(key.as_slice()).is_ok());
        }
        let _ = atomic.insert_all(keys.iter().map(Vec::as_slice));
        let expected = case["payload"].as_str().unwrap();
        assert_eq!(
            bloom_format::hex(&plain.to_bytes()),
            expected,
            "{}",
            case["rule"]
        );
        assert_eq!(
            bloom_format::hex(&atomic.to_filter().unwrap().to_bytes()),
            expected
        );
    }
}
