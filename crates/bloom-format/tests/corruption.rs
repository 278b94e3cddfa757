//! Every corruption of a snapshot is refused with the right typed error.

mod common;

use bloom_format::{
    DecodeError, DecodeOptions, FormatVersion, HistoryDigest, IdKind, Section, Snapshot,
    StoreBinding, StoreIdentity, UnicodeVersion,
};

fn decode(bytes: &[u8]) -> Result<Snapshot, DecodeError> {
    Snapshot::decode(bytes.to_vec(), &DecodeOptions::unlimited())
}

/// A version 2 snapshot and real version 1 output (a salted, nfc-trim-lower fixture).
fn every_version() -> [Vec<u8>; 3] {
    [
        common::small().encode().to_vec(),
        common::v2_fixture("salted-trim-lower"),
        common::v1_fixture("salted-trim-lower"),
    ]
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
fn version_1_fixtures_decode_with_their_version() {
    let bytes = common::v1_fixture("salted-trim-lower");
    let snapshot = decode(&bytes).unwrap();
    assert_eq!(snapshot.format_version(), FormatVersion::V1);
    assert_eq!(
        snapshot.header_len() as usize,
        100 + snapshot.header().salt.len()
    );
    assert_eq!(snapshot.header().store, None);
    assert_eq!(snapshot.header().key_encoding.casing_unicode, None);
    assert_eq!(
        snapshot.header().key_encoding.normalization_unicode,
        Some(UnicodeVersion::new(18, 0, 0))
    );
    // Re-encoding writes the current version, with the same fields.
    let again = decode(&snapshot.encode()).unwrap();
    assert_eq!(again.format_version(), FormatVersion::V3);
    assert_eq!(again.header(), snapshot.header());
    assert_eq!(again.payload(), snapshot.payload());
}

#[test]
fn every_single_bit_flip_is_rejected() {
    for bytes in every_version() {
        for i in 0..bytes.len() * 8 {
            let mut corrupt = bytes.clone();
            corrupt[i / 8] ^= 1 << (i % 8);
            assert!(decode(&corrupt).is_err(), "flip of bit {i} accepted");
        }
    }
}

#[test]
fn every_truncation_is_rejected() {
    for bytes in every_version() {
        for len in 0..bytes.len() {
            let result = decode(&bytes[..len]);
            assert!(
                matches!(result, Err(DecodeError::Truncated { got, .. }) if got == len as u64),
                "length {len}: {result:?}"
            );
        }
    }
}

#[test]
fn appended_bytes_are_rejected() {
    for bytes in every_version() {
        appended_bytes_are_rejected_in(&bytes);
    }
}

fn appended_bytes_are_rejected_in(bytes: &[u8]) {
    let bytes = bytes.to_vec();
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

    for version in [0u16, 4, 0x0100, u16::MAX] {
        let mut bad = bytes.clone();
        bad[8..10].copy_from_slice(&version.to_le_bytes());
        common::reseal(&mut bad);
        assert_eq!(
            decode(&bad),
            Err(DecodeError::UnsupportedVersion {
                found: version,
                supported: 1..=3
            })
        );
    }

    for header_len in [0u16, 99, 100, 147, 183, 2777, u16::MAX] {
        let mut bad = bytes.clone();
        bad[10..12].copy_from_slice(&header_len.to_le_bytes());
        assert_eq!(
            decode(&bad),
            Err(DecodeError::InvalidHeaderLength {
                version: 3,
                found: header_len,
                min: 184,
                max: 2776
            })
        );
    }
    let v2 = common::v2_fixture("seed-contract");
    for header_len in [0u16, 99, 147, 181, 184] {
        let mut bad = v2.clone();
        bad[10..12].copy_from_slice(&header_len.to_le_bytes());
        assert_eq!(
            decode(&bad),
            Err(DecodeError::InvalidHeaderLength {
                version: 2,
                found: header_len,
                min: 148,
                max: 180
            })
        );
    }
    let v1 = common::v1_fixture("seed-contract");
    for header_len in [0u16, 99, 133, 148] {
        let mut bad = v1.clone();
        bad[10..12].copy_from_slice(&header_len.to_le_bytes());
        assert_eq!(
            decode(&bad),
            Err(DecodeError::InvalidHeaderLength {
                version: 1,
                found: header_len,
                min: 100,
                max: 132
            })
        );
    }
}

/// What a reader of version 1 only (the first release, or this build told to read no newer
/// version) says about a version 2 file: the message `docs/format.md` documents.
#[test]
fn a_version_1_reader_refuses_version_2_files_by_name() {
    let v1_only = DecodeOptions::unlimited().with_max_version(FormatVersion::V1);
    let err = Snapshot::decode(common::v2_fixture("seed-contract"), &v1_only).unwrap_err();
    assert_eq!(
        err,
        DecodeError::UnsupportedVersion {
            found: 2,
            supported: 1..=1
        }
    );
    assert_eq!(
        err.to_string(),
        "snapshot was written by format version 2; this build reads versions 1..=1"
    );
    assert!(Snapshot::decode(common::v1_fixture("seed-contract"), &v1_only).is_ok());
}

/// Corrupts `bytes` at `offset`, recomputes the header CRC, and decodes.
fn resealed(bytes: &[u8], offset: usize, value: &[u8]) -> Result<Snapshot, DecodeError> {
    let mut bad = bytes.to_vec();
    bad[offset..offset + value.len()].copy_from_slice(value);
    common::reseal(&mut bad);
    decode(&bad)
}

/// Corruptions whose header CRC has been recomputed: the structural checks must catch them.
#[test]
fn resealed_header_corruptions_fail_field_validation() {
    for bytes in every_version() {
        resealed_corruptions_of_shared_fields(&bytes);
    }
    let v3 = common::small().encode().to_vec();
    for offset in [12, 15, 39, 70, 95, 131, 140, 143, 166, 167, 176, 179] {
        assert_eq!(
            resealed(&v3, offset, &[7]),
            Err(DecodeError::NonZeroReserved {
                offset: offset as u64,
                found: 7
            })
        );
    }
    let v2 = common::v2_fixture("salted-trim-lower");
    for offset in [12, 15, 39, 70, 95, 131, 140, 143] {
        assert_eq!(
            resealed(&v2, offset, &[7]),
            Err(DecodeError::NonZeroReserved {
                offset: offset as u64,
                found: 7
            })
        );
    }
    let v1 = common::v1_fixture("salted-trim-lower");
    for offset in [12, 15, 39, 70, 95] {
        assert_eq!(
            resealed(&v1, offset, &[7]),
            Err(DecodeError::NonZeroReserved {
                offset: offset as u64,
                found: 7
            })
        );
    }
    // Version 2 fields (in a version 3 header). An unbound snapshot (identity zero) with a history digest:
    assert!(matches!(
        resealed(&v3, 96, &[0; 16]),
        Err(DecodeError::InvalidParameter {
            field: "history digest",
            ..
        })
    ));
    assert!(matches!(
        resealed(&v3, 132, &5u64.to_le_bytes()),
        Err(DecodeError::InvalidParameter {
            field: "layout parameter",
            found: 5,
            ..
        })
    ));
    // nfc (id 3) uses no casing tables, but a casing version is recorded.
    assert_eq!(
        resealed(&v3, 32, &3u16.to_le_bytes()).unwrap_err(),
        DecodeError::InvalidUnicodeVersion {
            table: "casing",
            found: UnicodeVersion::new(15, 1, 0),
            expected: "0.0.0 for the nfc encoding".into()
        }
    );
    // nfc-trim-lower with a table version not recorded (0.0.0) is valid in version 2: bits
    // built with mixed or unknown tables.
    let unrecorded = resealed(&v3, 128, &[0, 0, 0]).unwrap();
    assert_eq!(unrecorded.header().key_encoding.casing_unicode, None);
    let unrecorded = resealed(&v3, 36, &[0, 0, 0]).unwrap();
    assert_eq!(unrecorded.header().key_encoding.normalization_unicode, None);
    // Version 1 always recorded the version for an encoding that uses tables.
    assert_eq!(
        resealed(&v1, 36, &[0, 0, 0]).unwrap_err(),
        DecodeError::InvalidUnicodeVersion {
            table: "normalization",
            found: UnicodeVersion::new(0, 0, 0),
            expected: "at least 1.0.0 for the nfc-trim-lower encoding".into()
        }
    );
    // 0.0.1 and 0.1.0 (or any 0.x.y) are no Unicode version: refused as 0.0.0 is.
    for version in [[0, 0, 1], [0, 1, 0], [0, 255, 255]] {
        assert_eq!(
            resealed(&v1, 36, &version).unwrap_err(),
            DecodeError::InvalidUnicodeVersion {
                table: "normalization",
                found: UnicodeVersion::new(version[0], version[1], version[2]),
                expected: "at least 1.0.0 for the nfc-trim-lower encoding".into()
            }
        );
    }
    // 1.0.0 itself is a version: read, and the reader answers non-ASCII keys "maybe".
    let oldest = resealed(&v1, 36, &[1, 0, 0]).unwrap();
    assert_eq!(
        oldest.header().key_encoding.normalization_unicode,
        Some(UnicodeVersion::new(1, 0, 0))
    );
}

fn resealed_corruptions_of_shared_fields(bytes: &[u8]) {
    let corrupt = |offset: usize, value: &[u8]| resealed(bytes, offset, value);
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
    // m says 2^62 bits, but the payload length still says a few bytes.
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
        corrupt(30, &9u16.to_le_bytes()),
        Err(DecodeError::UnknownId {
            kind: IdKind::Layout,
            found: 9,
            ..
        })
    ));
    // The sharded layout (3) needs a shard count as its parameter, which this header (0)
    // lacks.
    assert!(matches!(
        corrupt(30, &3u16.to_le_bytes()),
        Err(DecodeError::InvalidParameter {
            field: "layout parameter",
            found: 0,
            ..
        })
    ));
    // The blocked layout (2) needs whole 512-bit blocks; these bit counts are not.
    assert!(matches!(
        corrupt(30, &2u16.to_le_bytes()),
        Err(DecodeError::InvalidParameter {
            field: "bit count (m)",
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
    // `bytes` (id 1) records no Unicode version, but one is present.
    assert!(matches!(
        corrupt(32, &1u16.to_le_bytes()),
        Err(DecodeError::InvalidUnicodeVersion {
            table: "normalization",
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
    // Unicode versions print as versions, not as packed integers.
    let err = corrupt(32, &1u16.to_le_bytes()).unwrap_err().to_string();
    assert!(
        err.contains("found 18.0.0") || err.contains("found 16.0.0"),
        "{err}"
    );
}

#[test]
fn payload_corruption_padding_and_limits() {
    let snapshot = common::small();
    let bytes = snapshot.encode().to_vec();
    let header_len = usize::from(snapshot.header_len());

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
    bad[common::V3_SALT_AT] ^= 1; // a salt byte
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
            needed: 184 + (1 << 59),
            got: bytes.len() as u64
        })
    );
    let sixty: Vec<u8> = bytes[..60].to_vec();
    assert!(matches!(
        decode(&sixty),
        Err(DecodeError::Truncated {
            needed: 184,
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

/// The default options bound the payload at 1 GiB: a header claiming more is refused by its
/// size, before a byte of payload is read or allocated, by the one-shot and streaming readers.
#[test]
fn the_default_options_refuse_a_payload_over_a_gibibyte() {
    assert_eq!(
        DecodeOptions::default().max_payload_len,
        Some(bloom_format::DEFAULT_MAX_PAYLOAD_LEN)
    );
    assert_eq!(bloom_format::DEFAULT_MAX_PAYLOAD_LEN, 1 << 30);
    let mut bytes = common::full(8).encode().to_vec();
    let bits = (1u64 << 33) + 8; // one byte past 1 GiB of payload
    bytes[16..24].copy_from_slice(&bits.to_le_bytes());
    bytes[56..64].copy_from_slice(&bits.div_ceil(8).to_le_bytes());
    common::reseal(&mut bytes);
    let over = Err(DecodeError::OverLimit {
        payload_len: (1 << 30) + 1,
        limit: 1 << 30,
    });
    assert_eq!(
        Snapshot::decode(bytes.clone(), &DecodeOptions::default()),
        over
    );
    assert!(matches!(
        Snapshot::read_from(&bytes[..], &DecodeOptions::default()),
        Err(bloom_format::ReadError::Decode(
            DecodeError::OverLimit { .. }
        ))
    ));
    // Unlimited, the same header is only short of its payload.
    assert!(matches!(decode(&bytes), Err(DecodeError::Truncated { .. })));
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
    let mut zero_identity = header.clone();
    zero_identity.store = Some(StoreBinding::new(
        StoreIdentity::from_bytes([0; 16]),
        HistoryDigest::from_bytes([1; 16]),
    ));
    assert!(matches!(
        Snapshot::new(zero_identity, payload.clone()),
        Err(bloom_format::EncodeError::Invalid(
            DecodeError::InvalidParameter {
                field: "store identity",
                ..
            }
        ))
    ));
    let mut layout_parameter = header.clone();
    layout_parameter.layout_parameter = 1;
    assert!(Snapshot::new(layout_parameter, payload.clone()).is_err());
    assert!(Snapshot::new(header, payload).is_ok());
}
