//! Small snapshots shared by the format tests.

#![allow(dead_code, unreachable_pub)]

use bloom_format::{
    Header, KeyEncodingId, KeyEncodingSpec, LayoutId, PositionRuleId, Snapshot, UnicodeVersion,
};

/// A 21-bit, salted, NFC snapshot: small enough to flip every bit of it.
pub fn small() -> Snapshot {
    let header = Header {
        bit_count: 21,
        hash_count: 3,
        position_rule: PositionRuleId::Sha256Double,
        layout: LayoutId::Standard,
        key_encoding: KeyEncodingSpec {
            id: KeyEncodingId::Nfc,
            version: 1,
            unicode: Some(UnicodeVersion {
                major: 16,
                minor: 0,
                update: 0,
            }),
        },
        salt: b"pepper".to_vec(),
        dataset_generation: 42,
        item_count: 5,
    };
    Snapshot::new(header, vec![0b1001_0110, 0b0100_0001, 0b0001_1000]).unwrap()
}

/// An unsalted `bytes` snapshot of `bits` bits with every valid bit set.
pub fn full(bits: u64) -> Snapshot {
    let header = Header {
        bit_count: bits,
        hash_count: 4,
        position_rule: PositionRuleId::Sha256Split4,
        layout: LayoutId::Standard,
        key_encoding: KeyEncodingSpec {
            id: KeyEncodingId::Bytes,
            version: 1,
            unicode: None,
        },
        salt: Vec::new(),
        dataset_generation: 0,
        item_count: 0,
    };
    let mut payload = vec![0xffu8; bits.div_ceil(8) as usize];
    if !bits.is_multiple_of(8) {
        *payload.last_mut().unwrap() = (1u8 << (bits % 8)) - 1;
    }
    Snapshot::new(header, payload).unwrap()
}

/// Rewrites the header CRC so that a deliberately corrupted header passes the checksum.
pub fn reseal(bytes: &mut [u8]) {
    let header_len = u16::from_le_bytes([bytes[10], bytes[11]]) as usize;
    let crc = crc32fast::hash(&bytes[..header_len - 4]);
    bytes[header_len - 4..header_len].copy_from_slice(&crc.to_le_bytes());
}
