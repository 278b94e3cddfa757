//! Format version 3: the recorded plan, the scalable layout's stage directory, what a
//! version 2 reader says about a version 3 file, and every field a hostile file can set.

mod common;

use bloom_format::{
    DecodeError, DecodeOptions, FormatVersion, Header, KeyEncodingId, KeyEncodingSpec, LayoutId,
    MAX_STAGES, Plan, PositionRuleId, Scalable, Snapshot, Stage,
};

fn decode(bytes: &[u8]) -> Result<Snapshot, DecodeError> {
    Snapshot::decode(bytes.to_vec(), &DecodeOptions::unlimited())
}

/// A planned, unscalable snapshot: 1024 bits for 100 items at 1 %.
fn planned() -> Snapshot {
    let mut header = Header::new(
        1024,
        7,
        PositionRuleId::Xxh3_128,
        LayoutId::Standard,
        KeyEncodingSpec::new(KeyEncodingId::Bytes, 1),
    );
    header.plan = Plan::new(100, 0.01);
    header.item_count = 3;
    Snapshot::new(header, vec![0x11; 128]).unwrap()
}

/// The stages a writer plans: capacity `n * g^i`, rate `p (1 - r) r^i`.
fn stages(n: u64, p: f64, growth: u32, r: f64, count: usize) -> Vec<Stage> {
    let mut rate = p * (1.0 - r);
    let mut capacity = n;
    (0..count)
        .map(|i| {
            let layout = if i % 2 == 0 {
                LayoutId::SplitBlock512
            } else {
                LayoutId::Blocked512
            };
            let mut stage = Stage::new(
                512 * (i as u64 + 1),
                if layout == LayoutId::SplitBlock512 {
                    8
                } else {
                    5 + i as u32
                },
                layout,
                Plan::new(capacity, rate).unwrap(),
            );
            stage.item_count = capacity / 2;
            rate *= r;
            capacity *= u64::from(growth);
            stage
        })
        .collect()
}

#[test]
fn capacities_past_2_to_the_64_cannot_be_recorded() {
    // Growth 2 from 10 passes 2^64 at stage 61: the chain cannot go on.
    let mut header = scalable_header(60, 2);
    let payload = vec![0; header.payload_len() as usize];
    assert!(Snapshot::new(header.clone(), payload).is_ok());
    let scalable = header.scalable.as_mut().unwrap();
    let mut last = *scalable.stages.last().unwrap();
    last.plan.capacity = u64::MAX;
    last.item_count = 0;
    scalable.stages.push(last);
    header.bit_count += last.bit_count;
    header.hash_count += last.hash_count;
    let payload = vec![0; header.payload_len() as usize];
    assert!(matches!(
        Snapshot::new(header, payload),
        Err(bloom_format::EncodeError::Invalid(
            DecodeError::InvalidParameter {
                field: "stage capacity",
                ..
            }
        ))
    ));
}

/// A scalable header with `count` stages growing by `growth`, the totals filled in.
fn scalable_header(count: usize, growth: u32) -> Header {
    let stages = stages(10, 0.01, growth, 0.5, count);
    let mut header = Header::new(
        stages.iter().map(|s| s.bit_count).sum(),
        stages.iter().map(|s| s.hash_count).sum(),
        PositionRuleId::Xxh3_128,
        LayoutId::Scalable,
        KeyEncodingSpec::new(KeyEncodingId::Bytes, 1),
    );
    header.item_count = stages.iter().map(|s| s.item_count).sum();
    header.salt = b"salt".to_vec();
    header.plan = Plan::new(10, 0.01);
    header.scalable = Some(Scalable::new(growth, 0.5, stages));
    header
}

/// A scalable snapshot of `count` stages: growing by 2, or by 1 where 2 would take the
/// capacity past 2^64 (more than 60 stages).
fn scalable(count: usize) -> Snapshot {
    let header = scalable_header(count, if count > 32 { 1 } else { 2 });
    let payload = vec![0xa5; header.payload_len() as usize];
    Snapshot::new(header, payload).unwrap()
}

/// Corrupts `bytes` at `offset`, recomputes the header CRC, and decodes.
fn resealed(bytes: &[u8], offset: usize, value: &[u8]) -> Result<Snapshot, DecodeError> {
    let mut bad = bytes.to_vec();
    bad[offset..offset + value.len()].copy_from_slice(value);
    common::reseal(&mut bad);
    decode(&bad)
}

/// What a reader of versions 1 and 2 only (bloom 0.2 and 0.3, or this build told to read
/// no newer version) says about a version 3 file: the message `docs/format.md` documents.
#[test]
fn a_version_2_reader_refuses_version_3_files_by_name() {
    let v2_only = DecodeOptions::unlimited().with_max_version(FormatVersion::V2);
    for snapshot in [planned(), scalable(3), common::small()] {
        let err = Snapshot::decode(snapshot.encode(), &v2_only).unwrap_err();
        assert_eq!(
            err,
            DecodeError::UnsupportedVersion {
                found: 3,
                supported: 1..=2
            }
        );
        assert_eq!(
            err.to_string(),
            "snapshot was written by format version 3; this build reads versions 1..=2"
        );
    }
    // It still reads the versions it knows.
    assert!(Snapshot::decode(common::v2_fixture("store-bound"), &v2_only).is_ok());
    assert!(Snapshot::decode(common::v1_fixture("seed-contract"), &v2_only).is_ok());
}

#[test]
fn plans_and_stages_round_trip() {
    let snapshot = planned();
    let bytes = snapshot.encode();
    // 180 fixed bytes and the header CRC, then the payload.
    assert_eq!(bytes.len(), 184 + 128);
    let back = decode(&bytes).unwrap();
    assert_eq!(back.header().plan, Plan::new(100, 0.01));
    assert_eq!(back, snapshot);
    // The rate is the binary64 bits of 0.01 at offset 152.
    assert_eq!(bytes[144..152], 100u64.to_le_bytes());
    assert_eq!(bytes[152..160], 0.01f64.to_bits().to_le_bytes());

    for count in [1, 2, 5, MAX_STAGES] {
        let snapshot = scalable(count);
        let bytes = snapshot.encode();
        // The directory and the 4-byte salt between the fixed fields and the CRC.
        assert_eq!(
            bytes.len() as u64,
            184 + 40 * count as u64 + 4 + snapshot.header().payload_len()
        );
        let back = decode(&bytes).unwrap();
        assert_eq!(back, snapshot);
        assert_eq!(back.header().stages().len(), count);
        assert_eq!(u16::from_le_bytes([bytes[164], bytes[165]]) as usize, count);
    }
    // Old versions keep reading with no plan and no stages.
    let v2 = decode(&common::v2_fixture("store-bound")).unwrap();
    assert_eq!((v2.header().plan, v2.header().stages().len()), (None, 0));
}

#[test]
fn a_plan_is_both_fields_or_neither_and_a_rate_between_0_and_1() {
    let bytes = planned().encode().to_vec();
    assert!(matches!(
        resealed(&bytes, 144, &0u64.to_le_bytes()),
        Err(DecodeError::InvalidParameter {
            field: "planned capacity",
            found: 0,
            ..
        })
    ));
    assert!(matches!(
        resealed(&bytes, 152, &0u64.to_le_bytes()),
        Err(DecodeError::InvalidRate {
            field: "target false-positive rate",
            found_bits: 0,
            ..
        })
    ));
    for rate in [
        1.0f64,
        1.5,
        -0.01,
        -0.0,
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        -(f64::MIN_POSITIVE / 2.0),
    ] {
        let err = resealed(&bytes, 152, &rate.to_bits().to_le_bytes()).unwrap_err();
        assert_eq!(
            err,
            DecodeError::InvalidRate {
                field: "target false-positive rate",
                found_bits: rate.to_bits(),
                expected: "a number above 0 and below 1".into()
            },
            "{rate}"
        );
        assert!(
            err.to_string().contains("target false-positive rate"),
            "{err}"
        );
    }
    // Subnormal and nearly-1 rates are rates.
    for rate in [f64::MIN_POSITIVE / 2.0, 1.0 - f64::EPSILON] {
        let back = resealed(&bytes, 152, &rate.to_bits().to_le_bytes()).unwrap();
        assert_eq!(back.header().plan.unwrap().false_positive_rate, rate);
    }
    // A writer cannot make what a reader would refuse.
    let mut header = planned().header().clone();
    let mut zero = Plan::new(1, 0.5).unwrap();
    zero.capacity = 0;
    header.plan = Some(zero);
    assert!(Snapshot::new(header, vec![0; 128]).is_err());
    assert_eq!(Plan::new(0, 0.5), None);
    assert_eq!(Plan::new(5, 1.0), None);
    assert_eq!(Plan::new(5, f64::NAN), None);
}

#[test]
fn a_stage_directory_is_checked_entry_by_entry() {
    let bytes = scalable(3).encode().to_vec();
    let entry = |i: usize| 180 + 40 * i;
    // The stage count must fit the header length (here, the salt length disagrees).
    assert!(matches!(
        resealed(&bytes, 164, &2u16.to_le_bytes()),
        Err(DecodeError::InvalidParameter {
            field: "salt length",
            ..
        })
    ));
    for count in [65u16, 66, u16::MAX] {
        assert!(matches!(
            resealed(&bytes, 164, &count.to_le_bytes()),
            Err(DecodeError::InvalidParameter {
                field: "stage count",
                ..
            })
        ));
    }
    // Layouts: unknown, or not a plain bit layout.
    assert!(matches!(
        resealed(&bytes, entry(1) + 12, &99u16.to_le_bytes()),
        Err(DecodeError::UnknownId { found: 99, .. })
    ));
    for layout in [3u16, 4, 5, 8] {
        assert!(matches!(
            resealed(&bytes, entry(1) + 12, &layout.to_le_bytes()),
            Err(DecodeError::InvalidParameter {
                field: "stage layout id",
                ..
            })
        ));
    }
    assert_eq!(
        resealed(&bytes, entry(2) + 15, &[1]).unwrap_err(),
        DecodeError::NonZeroReserved {
            offset: entry(2) as u64 + 15,
            found: 1
        }
    );
    // A stage's own layout rules: split-block-512 has k = 8 and whole blocks.
    assert!(matches!(
        resealed(&bytes, entry(0) + 8, &7u32.to_le_bytes()),
        Err(DecodeError::InvalidParameter {
            field: "positions per key (k)",
            ..
        })
    ));
    assert!(matches!(
        resealed(&bytes, entry(1), &1000u64.to_le_bytes()),
        Err(DecodeError::InvalidParameter {
            field: "stage bit count",
            ..
        })
    ));
    // Capacities follow the growth factor from the planned capacity.
    assert!(matches!(
        resealed(&bytes, entry(1) + 16, &21u64.to_le_bytes()),
        Err(DecodeError::InvalidParameter {
            field: "stage capacity",
            found: 21,
            ..
        })
    ));
    // Stage rates: each a rate, all of them within the target.
    assert!(matches!(
        resealed(&bytes, entry(2) + 24, &0.5f64.to_bits().to_le_bytes()),
        Err(DecodeError::InvalidRate {
            field: "stage false-positive rate",
            ..
        })
    ));
    assert!(matches!(
        resealed(&bytes, entry(2) + 24, &f64::NAN.to_bits().to_le_bytes()),
        Err(DecodeError::InvalidRate {
            field: "stage false-positive rate",
            ..
        })
    ));
    // The header's m, k and item count are the stages' totals.
    for (offset, field) in [
        (16, "bit count (m)"),
        (24, "positions per key (k)"),
        (48, "item count"),
    ] {
        let mut bad = bytes.clone();
        bad[offset] ^= 0x40;
        common::reseal(&mut bad);
        let err = decode(&bad).unwrap_err();
        assert!(
            matches!(&err, DecodeError::InvalidParameter { field: f, .. } if *f == field)
                || matches!(
                    &err,
                    DecodeError::InvalidParameter {
                        field: "payload length",
                        ..
                    }
                ),
            "{field}: {err}"
        );
    }
    let mut bad = bytes.clone();
    bad[entry(0) + 32..entry(0) + 40].copy_from_slice(&u64::MAX.to_le_bytes());
    common::reseal(&mut bad);
    assert!(matches!(
        decode(&bad),
        Err(DecodeError::InvalidParameter {
            field: "item count",
            ..
        })
    ));
}

#[test]
fn growth_tightening_and_the_plan_belong_to_the_scalable_layout() {
    let bytes = scalable(2).encode().to_vec();
    for growth in [0u32, 1025, u32::MAX] {
        assert!(matches!(
            resealed(&bytes, 160, &growth.to_le_bytes()),
            Err(DecodeError::InvalidParameter {
                field: "growth factor",
                ..
            })
        ));
    }
    for r in [0.0f64, 1.0, -0.5, f64::NAN, f64::INFINITY] {
        assert!(matches!(
            resealed(&bytes, 168, &r.to_bits().to_le_bytes()),
            Err(DecodeError::InvalidRate {
                field: "tightening ratio",
                ..
            })
        ));
    }
    // No plan: the chain has no first capacity or target.
    let mut bad = bytes.clone();
    bad[144..160].fill(0);
    common::reseal(&mut bad);
    assert!(matches!(
        decode(&bad),
        Err(DecodeError::InvalidParameter {
            field: "planned capacity",
            ..
        })
    ));
    // Another layout id with a stage directory, or growth, is refused.
    assert!(matches!(
        resealed(&bytes, 30, &1u16.to_le_bytes()),
        Err(DecodeError::InvalidParameter {
            field: "stage count",
            ..
        })
    ));
    let plain = planned().encode().to_vec();
    assert!(matches!(
        resealed(&plain, 160, &2u32.to_le_bytes()),
        Err(DecodeError::InvalidParameter {
            field: "stage count",
            ..
        })
    ));
    // The scalable layout id without stages.
    assert!(matches!(
        resealed(&plain, 30, &8u16.to_le_bytes()),
        Err(DecodeError::InvalidParameter {
            field: "stage count",
            found: 0,
            ..
        })
    ));
    // Guava's rules are standard-only, so never scalable.
    assert!(matches!(
        resealed(&bytes, 28, &4u16.to_le_bytes()),
        Err(DecodeError::InvalidParameter {
            field: "layout id",
            ..
        })
    ));
    // A salted stage directory: the salt sits after the directory.
    assert_eq!(decode(&bytes).unwrap().header().salt, b"salt");
}

#[test]
fn every_single_bit_flip_of_a_scalable_snapshot_is_rejected() {
    let bytes = scalable(2).encode().to_vec();
    for i in 0..bytes.len() * 8 {
        let mut corrupt = bytes.clone();
        corrupt[i / 8] ^= 1 << (i % 8);
        assert!(decode(&corrupt).is_err(), "flip of bit {i} accepted");
    }
    for len in 0..bytes.len() {
        assert!(
            decode(&bytes[..len]).is_err(),
            "truncation to {len} accepted"
        );
    }
}
