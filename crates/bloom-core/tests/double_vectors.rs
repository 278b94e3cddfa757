//! `sha256-double` at large m, against vectors computed independently from
//! `docs/format.md` (Python's hashlib and integers, `tests/data/double_vectors.py`). Each of
//! the first three keys is a witness: its positions differ between the rule and one tempting
//! misreading of it (`b += i`, `b` updated before `a`, no increment), which no filter of an
//! ordinary size can tell apart.

use bloom_core::{EncodedKey, FilterConfig, FilterParams, KeyEncoding, PositionRule, Salt};
use serde_json::Value;

#[test]
fn large_m_witness_vectors_pin_every_step_of_the_rule() {
    let vectors: Value = serde_json::from_str(include_str!("data/double_vectors.json")).unwrap();
    let cases = vectors["cases"].as_array().unwrap();
    let mut refuted = Vec::new();
    for case in cases {
        let m = case["m"].as_u64().unwrap();
        let k = u32::try_from(case["k"].as_u64().unwrap()).unwrap();
        let salt_hex = case["salt_hex"].as_str().unwrap();
        let salt: Vec<u8> = (0..salt_hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&salt_hex[i..i + 2], 16).unwrap())
            .collect();
        let config = FilterConfig::from_parts(
            FilterParams::new(m, k).unwrap(),
            PositionRule::Sha256Double,
            KeyEncoding::Bytes,
            Salt::new(&salt).unwrap(),
        )
        .unwrap();
        let key = case["key"].as_str().unwrap();
        let expected: Vec<u64> = case["positions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.as_u64().unwrap())
            .collect();
        let got: Vec<u64> = config
            .positions(&EncodedKey::from_encoded(key.as_bytes()))
            .collect();
        assert_eq!(got, expected, "{key} at m = {m}, salt {salt_hex:?}");
        let variant = case["refutes"].as_str().unwrap();
        if !variant.is_empty() {
            let wrong: Vec<u64> = case["refuted_positions"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p.as_u64().unwrap())
                .collect();
            assert_ne!(got, wrong, "{key} must tell the rule from `{variant}`");
            refuted.push(variant.to_owned());
        }
    }
    refuted.sort();
    assert_eq!(refuted, ["b += i", "b before a", "no increment"]);
}
