//! `KeyPlacer`: the first position alone, and each position visited, as
//! `FilterConfig::positions` lists them, for every rule and layout. (Both walk the one
//! implementation of the rules, whose positions the golden vector tests pin down; this
//! checks that stopping after the first changes nothing.)

use bloom_core::{EncodedKey, FilterConfig, FilterParams, KeyEncoding, Layout, PositionRule, Salt};

#[test]
fn the_placer_agrees_with_positions_for_every_rule_and_layout() {
    let layouts = Layout::ALL.into_iter().chain([
        Layout::sharded(1).unwrap(),
        Layout::sharded(5).unwrap(),
        Layout::sharded_v1(5).unwrap(),
    ]);
    let keys: Vec<String> = (0..200).map(|i| format!("placed-{i}")).collect();
    let mut cases = 0;
    for layout in layouts {
        for rule in PositionRule::ALL {
            if !rule.supports(layout) {
                continue;
            }
            let bits = match layout {
                // Guava's rules take whole 64-bit words.
                Layout::Standard if rule.is_guava() => 1_000_000,
                Layout::Standard => 1_000_003,
                Layout::Sharded { .. } | Layout::ShardedV2 { .. } => 5 * 13 * 64 * 100,
                _ => 512 * 1000,
            };
            let k = match (rule, layout.split_block_bits()) {
                (_, Some(_)) => 8,
                (PositionRule::Sha256Split4, _) => 3,
                _ => 7,
            };
            let salt = if rule.is_guava() {
                Salt::default()
            } else {
                Salt::new(b"placer salt").unwrap()
            };
            let params = FilterParams::with_layout(layout, bits, k).unwrap();
            let config = FilterConfig::from_parts(params, rule, KeyEncoding::Utf8, salt).unwrap();
            let placer = config.placer();
            for key in &keys {
                let key = EncodedKey::from_encoded(key.as_bytes());
                let expected: Vec<u64> = config.positions(&key).collect();
                let mut visited = Vec::new();
                placer.for_each_position(&key, |p| visited.push(p));
                assert_eq!(visited, expected, "{rule} {layout}");
                assert_eq!(placer.first_position(&key), expected[0], "{rule} {layout}");
            }
            cases += 1;
        }
    }
    assert!(cases >= 15, "only {cases} rule and layout pairs");
}
