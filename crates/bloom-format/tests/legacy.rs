//! The seed's raw 128-byte snapshot.

mod common;

use bloom_format::{LegacyError, PositionRuleId, export_seed_raw, import_seed_raw};

#[test]
fn import_and_export_round_trip() {
    let raw: Vec<u8> = (0..128u8).collect();
    let snapshot = import_seed_raw(&raw).unwrap();
    let h = snapshot.header();
    assert_eq!((h.bit_count, h.hash_count), (1024, 4));
    assert_eq!(h.position_rule, PositionRuleId::Sha256Split4);
    assert_eq!(snapshot.payload().as_ref(), raw.as_slice());
    assert_eq!(export_seed_raw(&snapshot).unwrap(), raw);
}

#[test]
fn other_lengths_are_rejected() {
    for len in [0usize, 1, 127, 129, 256] {
        assert_eq!(
            import_seed_raw(&vec![0; len]),
            Err(LegacyError::Length {
                found: len as u64,
                expected: 128
            })
        );
    }
}

#[test]
fn export_refuses_other_parameters() {
    assert!(matches!(
        export_seed_raw(&common::small()),
        Err(LegacyError::Incompatible {
            field: "bit count (m)",
            ..
        })
    ));
    let (mut header, payload) = import_seed_raw(&[0; 128]).unwrap().into_parts();
    header.salt = b"s".to_vec();
    let salted = bloom_format::Snapshot::new(header, payload).unwrap();
    assert!(matches!(
        export_seed_raw(&salted),
        Err(LegacyError::Incompatible {
            field: "salt length",
            ..
        })
    ));
}
