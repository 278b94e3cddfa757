//! The order of the reader's checks, as docs/format.md gives it ("Reading: what a reader
//! must check, in this order"): a header that breaks two rules is refused for the one the
//! spec checks first, so that an independent reader names the same error.

mod common;

use bloom_format::{
    DecodeError, DecodeOptions, Header, KeyEncodingId, KeyEncodingSpec, LayoutId, Plan,
    PositionRuleId, Scalable, Snapshot, Stage,
};

fn decode(bytes: &[u8]) -> Result<Snapshot, DecodeError> {
    Snapshot::decode(bytes.to_vec(), &DecodeOptions::unlimited())
}

/// `bytes` with `value` at `offset`, the header CRC recomputed, decoded.
fn resealed(bytes: &[u8], edits: &[(usize, &[u8])]) -> Result<Snapshot, DecodeError> {
    let mut bad = bytes.to_vec();
    for &(offset, value) in edits {
        bad[offset..offset + value.len()].copy_from_slice(value);
    }
    common::reseal(&mut bad);
    decode(&bad)
}

/// A planned version 3 snapshot: 1024 bits, k = 7, xxh3-128, standard, 100 keys at 1 %.
fn planned() -> Vec<u8> {
    let mut header = Header::new(
        1024,
        7,
        PositionRuleId::Xxh3_128,
        LayoutId::Standard,
        KeyEncodingSpec::new(KeyEncodingId::Bytes, 1),
    );
    header.plan = Plan::new(100, 0.01);
    Snapshot::new(header, vec![0; 128])
        .unwrap()
        .encode()
        .to_vec()
}

/// A two-stage chain of split-block-512 stages with rule xxh3-64 (rule 7).
fn chain() -> Vec<u8> {
    let stage = |capacity, rate| {
        Stage::new(
            1024,
            8,
            LayoutId::SplitBlock512,
            Plan::new(capacity, rate).unwrap(),
        )
    };
    let stages = vec![stage(10, 0.005), stage(20, 0.0025)];
    let mut header = Header::new(
        2048,
        16,
        PositionRuleId::Xxh3_64,
        LayoutId::Scalable,
        KeyEncodingSpec::new(KeyEncodingId::Bytes, 1),
    );
    header.plan = Plan::new(10, 0.01);
    header.scalable = Some(Scalable::new(2, 0.5, stages));
    Snapshot::new(header, vec![0; 256])
        .unwrap()
        .encode()
        .to_vec()
}

const RULE: usize = 28;
const LAYOUT: usize = 30;
const RATE: usize = 152;
const GROWTH: usize = 160;
const STAGES: usize = 164;
const SALT_LEN: usize = 68;

#[test]
fn split_block_checks_come_before_the_plan() {
    // k = 7, rule 3, layout 6 (split-block-256), a planned rate of 2.0: step 5.12 (k = 8 for
    // the split-block layouts) comes before 5.13 (the plan's rate).
    let found = resealed(
        &planned(),
        &[(LAYOUT, &6u16.to_le_bytes()), (RATE, &2.0f64.to_le_bytes())],
    );
    assert!(
        matches!(
            found,
            Err(DecodeError::InvalidParameter {
                field: "positions per key (k)",
                found: 7,
                ..
            })
        ),
        "{found:?}"
    );
}

#[test]
fn guava_checks_come_before_the_split_block_ones_and_the_plan() {
    // Rule 4 (Guava) with layout 2 and a bad rate: 5.11 names the layout first.
    let found = resealed(
        &planned(),
        &[
            (RULE, &4u16.to_le_bytes()),
            (LAYOUT, &2u16.to_le_bytes()),
            (RATE, &2.0f64.to_le_bytes()),
        ],
    );
    assert!(
        matches!(
            found,
            Err(DecodeError::InvalidParameter {
                field: "layout id",
                found: 2,
                ..
            })
        ),
        "{found:?}"
    );
}

#[test]
fn the_split_block_rules_come_before_growth_on_another_layout() {
    // Layout 6 with k = 7 and a growth factor: 5.12 (k) before 5.14 (stage count).
    let found = resealed(
        &planned(),
        &[(LAYOUT, &6u16.to_le_bytes()), (GROWTH, &2u32.to_le_bytes())],
    );
    assert!(
        matches!(
            found,
            Err(DecodeError::InvalidParameter {
                field: "positions per key (k)",
                ..
            })
        ),
        "{found:?}"
    );
}

#[test]
fn a_chain_checks_its_stage_count_before_growth_and_tightening() {
    // Layout 8 with T = 0 (the directory and the salt's place kept by a longer salt would
    // change H; here the header simply claims no stage) and a growth factor out of range:
    // check 1 of "Scalable filters" names the stage count first. T = 0 leaves the 80 bytes of
    // the directory to the salt, which 5.2 refuses (at most 32 bytes) before any of it.
    let found = resealed(
        &chain(),
        &[
            (STAGES, &0u16.to_le_bytes()),
            (SALT_LEN, &80u16.to_le_bytes()),
        ],
    );
    assert!(
        matches!(
            found,
            Err(DecodeError::InvalidParameter {
                field: "salt length",
                ..
            })
        ),
        "{found:?}"
    );
    // Built in memory (no header length to keep), the same order holds in check 1.
    let mut header = Header::new(
        1024,
        8,
        PositionRuleId::Xxh3_64,
        LayoutId::Scalable,
        KeyEncodingSpec::new(KeyEncodingId::Bytes, 1),
    );
    header.plan = Plan::new(10, 0.01);
    header.scalable = Some(Scalable::new(2000, 0.5, Vec::new()));
    let found = Snapshot::new(header, vec![0; 128]);
    assert!(
        matches!(
            found,
            Err(bloom_format::EncodeError::Invalid(
                DecodeError::InvalidParameter {
                    field: "stage count",
                    found: 0,
                    ..
                }
            ))
        ),
        "{found:?}"
    );
}

#[test]
fn a_salt_longer_than_32_bytes_is_refused_at_step_5_2() {
    // An unassigned rule id too: the salt's length (5.2) is checked before identifiers (5.3).
    let found = resealed(
        &chain(),
        &[
            (STAGES, &0u16.to_le_bytes()),
            (SALT_LEN, &80u16.to_le_bytes()),
            (RULE, &999u16.to_le_bytes()),
        ],
    );
    assert!(
        matches!(
            found,
            Err(DecodeError::InvalidParameter {
                field: "salt length",
                found: 80,
                ..
            })
        ),
        "{found:?}"
    );
}

#[test]
fn rules_6_and_7_make_chains_of_split_block_stages_only() {
    // The chain of split-block-512 stages with rule 7 reads back.
    assert!(decode(&chain()).is_ok());
    // A blocked-512 stage under rule 7 is refused at the stage, by its layout id. The first
    // entry's layout id is at 180 + 12, and a blocked stage needs no other change (1024 is
    // a multiple of 512) but its k.
    let found = resealed(&chain(), &[(192, &2u16.to_le_bytes())]);
    assert!(
        matches!(
            found,
            Err(DecodeError::InvalidParameter {
                field: "layout id",
                found: 2,
                ..
            })
        ),
        "{found:?}"
    );
}
