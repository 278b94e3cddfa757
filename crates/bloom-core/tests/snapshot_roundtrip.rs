//! A filter loaded from its snapshot answers exactly as the filter that wrote it, for every
//! rule, every encoding, with and without salt, at edge sizes.

use bloom_core::{
    BloomFilter, Filter, FilterConfig, FilterParams, KeyEncoding, Layout, PositionRule, Salt,
    SnapshotError,
};
use bloom_format::{DecodeOptions, IdKind, Snapshot};

const EDGE_BITS: [u64; 6] = [1, 63, 64, 65, 1024, (1 << 20) + 3];
const BLOCKED_BITS: [u64; 4] = [512, 1024, 512 * 3, 1 << 20];
/// Five shards of 64 bits, of 128, and of 13 * 64.
const SHARDED_BITS: [u64; 3] = [320, 640, 5 * 13 * 64];

fn keys() -> Vec<String> {
    let mut keys: Vec<String> = (0..40).map(|i| format!("record-{i}")).collect();
    keys.extend(["", "café", "cafe\u{301}", "  Mixed Case ", "中文", "😀"].map(String::from));
    keys
}

#[test]
fn round_trip_for_every_rule_layout_encoding_salt_and_edge_size() {
    let keys = keys();
    let probes: Vec<String> = (0..300).map(|i| format!("probe-{i}")).collect();
    let mut cases = 0;
    let sharded = [
        Layout::sharded(1).unwrap(),
        Layout::sharded(5).unwrap(),
        Layout::sharded_v1(1).unwrap(),
        Layout::sharded_v1(5).unwrap(),
    ];
    for layout in Layout::ALL.into_iter().chain(sharded) {
        let sizes: &[u64] = match layout {
            Layout::Standard => &EDGE_BITS,
            Layout::Sharded { shards: 1 } | Layout::ShardedV2 { shards: 1 } => &[64, 128, 1 << 20],
            Layout::Sharded { .. } | Layout::ShardedV2 { .. } => &SHARDED_BITS,
            _ => &BLOCKED_BITS,
        };
        for rule in PositionRule::ALL {
            if !rule.supports(layout) {
                continue;
            }
            let ks: &[u32] = match (rule, layout.split_block_bits()) {
                (_, Some(_)) => &[8],
                (PositionRule::Sha256Split4, _) => &[1, 3, 4],
                _ => &[1, 2, 7, 17, 64],
            };
            for encoding in KeyEncoding::ALL {
                for salt in [Salt::default(), Salt::new(b"round-trip salt").unwrap()] {
                    // Guava's rules take no salt and whole 64-bit words.
                    if rule.is_guava() && !salt.is_empty() {
                        continue;
                    }
                    for &bits in sizes {
                        if rule.is_guava() && bits % 64 != 0 {
                            continue;
                        }
                        for &k in ks {
                            let params = FilterParams::with_layout(layout, bits, k).unwrap();
                            let config =
                                FilterConfig::from_parts(params, rule, encoding, salt.clone())
                                    .unwrap();
                            let mut filter = BloomFilter::new(config).unwrap();
                            filter.insert_all(&keys);

                            let bytes = filter.to_snapshot(99).encode();
                            let decoded =
                                Snapshot::decode(bytes, &DecodeOptions::unlimited()).unwrap();
                            assert_eq!(decoded.header().dataset_generation.get(), 99);
                            assert_eq!(decoded.header().layout, layout.id());
                            let restored = BloomFilter::from_snapshot(&decoded).unwrap();

                            assert_eq!(
                                restored, filter,
                                "{rule} {layout} {encoding} m={bits} k={k}"
                            );
                            for key in keys.iter().chain(&probes) {
                                assert_eq!(restored.contains(key), filter.contains(key));
                            }
                            for key in &keys {
                                assert!(restored.contains(key));
                            }
                            cases += 1;
                        }
                    }
                }
            }
        }
    }
    // Per encoding: standard split4 (3 k) and two 5-k rules over 6 sizes with and without
    // salt; blocked, two rules over 4 sizes; the Guava rules unsalted over 2 sizes.
    // Sharded, both layouts: two rules over 3 sizes for each of the two shard counts,
    // salted and not. Split block, both sizes: four rules over 4 sizes, k = 8, salted and
    // not.
    assert_eq!(
        cases,
        5 * (2 * 6 * (3 + 5 + 5)
            + 2 * 4 * (5 + 5)
            + 2 * 2 * 5
            + 2 * 2 * 2 * 3 * (5 + 5)
            + 2 * 4 * 4 * 2)
    );
}

#[test]
fn snapshots_this_build_cannot_implement_are_refused() {
    // Rule 1 with k = 5 is a valid header for the format, but not a valid filter.
    let filter = BloomFilter::new(FilterConfig::new(FilterParams::new(64, 5).unwrap())).unwrap();
    // Rule 1 in the blocked layout neither.
    let blocked = BloomFilter::new(FilterConfig::new(
        FilterParams::with_layout(Layout::Blocked512, 512, 3).unwrap(),
    ))
    .unwrap();
    let (mut header, payload) = blocked.to_snapshot(0).into_parts();
    header.position_rule = bloom_format::PositionRuleId::Sha256Split4;
    assert!(matches!(
        BloomFilter::from_snapshot(&Snapshot::new(header, payload).unwrap()),
        Err(SnapshotError::Config(
            bloom_core::ConfigError::RuleLayout { .. }
        ))
    ));
    let (mut header, payload) = filter.to_snapshot(0).into_parts();
    header.position_rule = bloom_format::PositionRuleId::Sha256Split4;
    let snapshot = Snapshot::new(header, payload).unwrap();
    assert!(matches!(
        BloomFilter::from_snapshot(&snapshot),
        Err(SnapshotError::Config(
            bloom_core::ConfigError::TooManyHashesForRule { .. }
        ))
    ));

    // k above MAX_HASHES.
    let (mut header, payload) = filter.to_snapshot(0).into_parts();
    header.hash_count = 65;
    let snapshot = Snapshot::new(header, payload).unwrap();
    assert!(matches!(
        BloomFilter::from_snapshot(&snapshot),
        Err(SnapshotError::Config(bloom_core::ConfigError::Params(
            bloom_core::ParamsError::TooManyHashes { found: 65, .. }
        )))
    ));
    // The error names what is unsupported.
    let unsupported = SnapshotError::Unsupported {
        kind: IdKind::PositionRule,
        found: "9".into(),
    };
    assert!(unsupported.to_string().contains("rebuild"), "{unsupported}");
}

#[test]
fn the_seed_raw_snapshot_imports_into_a_working_filter() {
    let mut seed = BloomFilter::new(FilterConfig::seed_teaching()).unwrap();
    let keys: Vec<String> = (0..80).map(|i| format!("record-{i}")).collect();
    seed.insert_all(&keys);
    let raw = seed.to_bytes();
    assert_eq!(raw.len(), 128);

    let imported = bloom_format::import_seed_raw(&raw).unwrap();
    let filter = BloomFilter::from_snapshot(&imported).unwrap();
    for key in &keys {
        assert!(filter.contains(key));
    }
    assert_eq!(filter.config(), &FilterConfig::seed_teaching());
    assert_eq!(
        bloom_format::export_seed_raw(&filter.to_snapshot(0)).unwrap(),
        raw
    );
}
