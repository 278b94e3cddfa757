//! The `xxh3-128` rule and the `blocked-512`, sharded (both) and counting layouts against vectors computed
//! independently from `docs/format.md` (Python's hashlib and the `xxhash` package:
//! `tests/data/layout_vectors.py`): positions of sample keys for every combination, salted and
//! not, and the whole payload of every golden fixture that uses them.

use bloom_core::{EncodedKey, FilterConfig, FilterParams, KeyEncoding, Layout, PositionRule, Salt};
use bloom_format::{DecodeOptions, Snapshot};
use serde_json::Value;

fn vectors() -> Value {
    serde_json::from_str(include_str!("data/layout_vectors.json")).unwrap()
}

fn unhex(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

fn config(case: &Value) -> FilterConfig {
    let layout: Layout = case["layout"].as_str().unwrap().parse().unwrap();
    let rule: PositionRule = case["rule"].as_str().unwrap().parse().unwrap();
    let m = case["m"].as_u64().unwrap();
    let k = u32::try_from(case["k"].as_u64().unwrap()).unwrap();
    let salt = Salt::new(&unhex(case["salt_hex"].as_str().unwrap())).unwrap();
    FilterConfig::from_parts(
        FilterParams::with_layout(layout, m, k).unwrap(),
        rule,
        KeyEncoding::Bytes,
        salt,
    )
    .unwrap()
}

/// Every sample key of `case` has the positions the vectors list.
fn check_positions(config: &FilterConfig, case: &Value) {
    for entry in case["positions"].as_array().unwrap() {
        let key = entry["key"].as_str().unwrap();
        let expected: Vec<u64> = entry["positions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.as_u64().unwrap())
            .collect();
        let got: Vec<u64> = config
            .positions(&EncodedKey::from_encoded(key.as_bytes()))
            .collect();
        assert_eq!(got, expected, "{key:?} in {case:#}");
    }
}

#[test]
fn sample_positions_match_the_independent_implementation() {
    let vectors = vectors();
    let samples = vectors["samples"].as_array().unwrap();
    assert_eq!(samples.len(), 2 * 5 * 2);
    for case in samples {
        let config = config(case);
        check_positions(&config, case);
    }
}

#[test]
fn fixture_payloads_match_the_independent_implementation() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/v2");
    let vectors = vectors();
    let fixtures = vectors["fixtures"].as_array().unwrap();
    assert_eq!(fixtures.len(), 9);
    for case in fixtures {
        let name = case["fixture"].as_str().unwrap();
        let snapshot = Snapshot::read_file(
            root.join(format!("{name}.bloom")),
            &DecodeOptions::unlimited(),
        )
        .unwrap();
        let h = snapshot.header();
        let layout = match Layout::from_id(h.layout, h.layout_parameter) {
            Some(layout) => layout.to_string(),
            None => h.layout.name().to_owned(), // counting-4bit: placed as standard
        };
        assert_eq!(layout, case["layout"].as_str().unwrap(), "{name}");
        assert_eq!(
            h.position_rule.name(),
            case["rule"].as_str().unwrap(),
            "{name}"
        );
        assert_eq!(h.bit_count, case["m"].as_u64().unwrap(), "{name}");
        assert_eq!(
            snapshot.payload().as_ref(),
            unhex(case["payload_hex"].as_str().unwrap()).as_slice(),
            "{name}: the payload differs from the independent implementation's"
        );
    }
}

/// The `sharded-v2` layout against `tests/data/sharded_v2_vectors.py` (Python's hashlib
/// only): sample positions for several shard counts, salted and not, and the whole payload of
/// the `sha256-sharded-v2-salted` fixture.
#[test]
fn sharded_v2_matches_the_independent_implementation() {
    let vectors: Value =
        serde_json::from_str(include_str!("data/sharded_v2_vectors.json")).unwrap();
    let samples = vectors["samples"].as_array().unwrap();
    assert_eq!(samples.len(), 4 * 2);
    for case in samples {
        let config = config(case);
        assert_eq!(config.layout().id(), bloom_format::LayoutId::ShardedV2);
        check_positions(&config, case);
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/v2");
    let case = &vectors["fixtures"][0];
    let name = case["fixture"].as_str().unwrap();
    let snapshot = Snapshot::read_file(
        root.join(format!("{name}.bloom")),
        &DecodeOptions::unlimited(),
    )
    .unwrap();
    assert_eq!(snapshot.header().layout, bloom_format::LayoutId::ShardedV2);
    assert_eq!(
        snapshot.payload().as_ref(),
        unhex(case["payload_hex"].as_str().unwrap()).as_slice(),
        "{name}: the payload differs from the independent implementation's"
    );
}
