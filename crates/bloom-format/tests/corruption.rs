//! Every corruption of a snapshot is refused with the right typed error.

mod common;

use bloom_format::{DecodeError, DecodeOptions, IdKind, Section, Snapshot};

fn decode(bytes: &[u8]) -> Result<Snapshot, DecodeError> {
    Snapshot::decode(bytes.to_vec(), &DecodeOptions::unlimited())
}

#[test]
fn round_trip() {
    for snapshot in [
        common::small(),
        common::full(1),
        common::full(64),
        common::full(1027),
    ] {
        assert_eq!(decode(&snapshot.encode()), Ok(snapshot));
    }
}

#[test]
fn every_single_bit_flip_is_rejected() {
    let bytes = common::small().encode().to_vec();
    for i in 0..bytes.len() * 8 {
        let mut corrupt = bytes.clone();
        corrupt[i / 8] ^= 1 << (i % 8);
        assert!(decode(&corrupt).is_err(), "flip of bit {i} accepted");
    }
}

#[test]
fn every_truncation_is_rejected() {
    let bytes = common::small().encode().to_vec();
    for len in 0..bytes.len() {
        let result = decode(&bytes[..len]);
        assert!(
            matches!(result, Err(DecodeError::Truncated { got, .. }) if got == len as u64),
            "length {len}: {result:?}"
        );
    }
}

#[test]
fn appended_bytes_are_rejected() {
    let bytes = common::small().encode().to_vec();
    for extra in [&[0u8][..], &[0xff], &[0; 100]] {
        let mut longer = bytes.clone();
        longer.extend_from_slice(extra);
        assert_eq!(
            decode(&longer),
            Err(DecodeError::TrailingBytes {
                expected: bytes.len() as u64,
                found: longer.len() as u64
            })
        );
    }
}

#[test]
fn magic_version_and_header_length_are_checked_first() {
    let bytes = common::small().encode().to_vec();
    let mut bad = bytes.clone();
    bad[0] = b'B';
    assert!(matches!(decode(&bad), Err(DecodeError::BadMagic { .. })));
    assert!(matches!(
        decode(b"PK\x03\x04"),
        Err(DecodeError::BadMagic { .. })
    ));
    assert!(matches!(
        decode(b""),
        Err(DecodeError::Truncated {
            needed: 12,
            got: 0,
            ..
        })
    ));

    let mut bad = bytes.clone();
    bad[8] = 2;
    common::reseal(&mut bad);
    assert_eq!(
        decode(&bad),
        Err(DecodeError::UnsupportedVersion {
            found: 2,
            supported: 1..=1
        })
    );

    for header_len in [0u16, 99, 133, u16::MAX] {
        let mut bad = bytes.clone();
        bad[10..12].copy_from_slice(&header_len.to_le_bytes());
        assert_eq!(
            decode(&bad),
            Err(DecodeError::InvalidHeaderLength {
                found: header_len,
                min: 100,
                max: 132
            })
        );
    }
}

/// Corruptions whose header CRC has been recomputed: the structural checks must catch them.
#[test]
fn resealed_header_corruptions_fail_field_validation() {
    let bytes = common::small().encode().to_vec();
    let corrupt = |offset: usize, value: &[u8]| {
        let mut bad = bytes.clone();
        bad[offset..offset + value.len()].copy_from_slice(value);
        common::reseal(&mut bad);
        decode(&bad)
    };
    assert!(matches!(
        corrupt(16, &0u64.to_le_bytes()),
        Err(DecodeError::InvalidParameter {
            field: "bit count (m)",
            ..
        })
    ));
    assert!(matches!(
        corrupt(24, &0u32.to_le_bytes()),
        Err(DecodeError::InvalidParameter {
            field: "positions per key (k)",
            ..
        })
    ));
    // m says 2^62 bits, but the payload length still says 3 bytes.
    assert!(matches!(
        corrupt(16, &(1u64 << 62).to_le_bytes()),
        Err(DecodeError::InvalidParameter {
            field: "payload length",
            ..
        })
    ));
    assert!(matches!(
        corrupt(28, &9u16.to_le_bytes()),
        Err(DecodeError::UnknownId {
            kind: IdKind::PositionRule,
            found: 9,
            ..
        })
    ));
    assert!(matches!(
        corrupt(30, &2u16.to_le_bytes()),
        Err(DecodeError::UnknownId {
            kind: IdKind::Layout,
            found: 2,
            ..
        })
    ));
    assert!(matches!(
        corrupt(32, &0u16.to_le_bytes()),
        Err(DecodeError::UnknownId {
            kind: IdKind::KeyEncoding,
            found: 0,
            ..
        })
    ));
    assert!(matches!(
        corrupt(34, &2u16.to_le_bytes()),
        Err(DecodeError::UnknownId {
            kind: IdKind::KeyEncodingVersion,
            found: 2,
            ..
        })
    ));
    assert!(matches!(
        corrupt(36, &[0]),
        Err(DecodeError::InvalidParameter {
            field: "Unicode version",
            ..
        })
    ));
    // `bytes` (id 1) records no Unicode version, but one is present.
    assert!(matches!(
        corrupt(32, &1u16.to_le_bytes()),
        Err(DecodeError::InvalidParameter {
            field: "Unicode version",
            ..
        })
    ));
    assert!(matches!(
        corrupt(68, &5u16.to_le_bytes()),
        Err(DecodeError::InvalidParameter {
            field: "salt length",
            found: 5,
            ..
        })
    ));
    for offset in [12, 15, 39, 70, 95] {
        assert_eq!(
            corrupt(offset, &[7]),
            Err(DecodeError::NonZeroReserved {
                offset: offset as u64,
                found: 7
            })
        );
    }
}

#[test]
fn payload_corruption_padding_and_limits() {
    let snapshot = common::small();
    let bytes = snapshot.encode().to_vec();
    let header_len = snapshot.header().header_len() as usize;

    let mut bad = bytes.clone();
    bad[header_len] ^= 0x10;
    assert!(matches!(
        decode(&bad),
        Err(DecodeError::PayloadChecksumMismatch { .. })
    ));

    // Bit 21 is past m = 21: padding. Fix the payload CRC so only the padding is wrong.
    let mut bad = bytes.clone();
    *bad.last_mut().unwrap() |= 0b0010_0000;
    let crc = crc32fast::hash(&bad[header_len..]);
    bad[64..68].copy_from_slice(&crc.to_le_bytes());
    common::reseal(&mut bad);
    assert!(matches!(
        decode(&bad),
        Err(DecodeError::NonZeroPadding { bit_count: 21, .. })
    ));

    let mut bad = bytes.clone();
    bad[96] ^= 1; // a salt byte
    assert!(matches!(
        decode(&bad),
        Err(DecodeError::HeaderChecksumMismatch { .. })
    ));

    assert_eq!(
        Snapshot::decode(bytes.clone(), &DecodeOptions::with_max_payload_len(2)),
        Err(DecodeError::OverLimit {
            payload_len: 3,
            limit: 2
        })
    );
    assert!(Snapshot::decode(bytes, &DecodeOptions::with_max_payload_len(3)).is_ok());
}

#[test]
fn a_tiny_file_claiming_a_huge_filter_fails_fast() {
    // A valid header that claims m = 2^62, followed by only a few payload bytes.
    let mut bytes = common::full(8).encode().to_vec();
    bytes[16..24].copy_from_slice(&(1u64 << 62).to_le_bytes());
    bytes[56..64].copy_from_slice(&(1u64 << 59).to_le_bytes());
    common::reseal(&mut bytes);
    assert_eq!(
        decode(&bytes),
        Err(DecodeError::Truncated {
            section: Section::Payload,
            needed: 100 + (1 << 59),
            got: bytes.len() as u64
        })
    );
    let sixty: Vec<u8> = bytes[..60].to_vec();
    assert!(matches!(
        decode(&sixty),
        Err(DecodeError::Truncated {
            needed: 100,
            got: 60,
            ..
        })
    ));
    let stream = Snapshot::read_from(&bytes[..], &DecodeOptions::unlimited());
    assert!(matches!(
        stream,
        Err(bloom_format::ReadError::Decode(DecodeError::Truncated {
            section: Section::Payload,
            ..
        }))
    ));
}

#[test]
fn encoder_refuses_what_the_decoder_would_refuse() {
    let (mut header, payload) = common::small().into_parts();
    header.salt = vec![1; 33];
    assert!(Snapshot::new(header.clone(), payload.clone()).is_err());
    header.salt.clear();
    header.hash_count = 0;
    assert!(Snapshot::new(header.clone(), payload.clone()).is_err());
    header.hash_count = 3;
    assert!(Snapshot::new(header.clone(), vec![0u8; 4]).is_err());
    assert!(Snapshot::new(header.clone(), vec![0, 0, 0xff]).is_err());
    assert!(Snapshot::new(header, payload).is_ok());
}
