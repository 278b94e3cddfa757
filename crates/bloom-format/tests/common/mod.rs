//! Small snapshots shared by the format tests.

#![allow(dead_code, unreachable_pub)]

use bloom_format::{
    DatasetGeneration, Header, HistoryDigest, KeyEncodingId, KeyEncodingSpec, LayoutId,
    PositionRuleId, Snapshot, StoreBinding, StoreIdentity, UnicodeVersion,
};

/// Where the version 3 header of an unscalable filter puts the salt.
pub const V3_SALT_AT: usize = 180;

/// A 21-bit, salted, NFC-trim-lower snapshot bound to a store: small enough to flip every
/// bit of it, and with every version 2 field set (no plan).
pub fn small() -> Snapshot {
    let mut header = Header::new(
        21,
        3,
        PositionRuleId::Sha256Double,
        LayoutId::Standard,
        KeyEncodingSpec::new(KeyEncodingId::NfcTrimLowercase, 1)
            .with_normalization_unicode(Some(UnicodeVersion::new(16, 0, 0)))
            .with_casing_unicode(Some(UnicodeVersion::new(15, 1, 0))),
    );
    header.salt = b"pepper".to_vec();
    header.dataset_generation = DatasetGeneration::new(42);
    header.item_count = 5;
    header.store = Some(StoreBinding::new(
        StoreIdentity::from_bytes([0x5a; 16]),
        HistoryDigest::from_bytes(*b"history-digest-!"),
    ));
    Snapshot::new(header, vec![0b1001_0110, 0b0100_0001, 0b0001_1000]).unwrap()
}

/// An unsalted, unbound `bytes` snapshot of `bits` bits with every valid bit set.
pub fn full(bits: u64) -> Snapshot {
    let header = Header::new(
        bits,
        4,
        PositionRuleId::Sha256Split4,
        LayoutId::Standard,
        KeyEncodingSpec::new(KeyEncodingId::Bytes, 1),
    );
    let mut payload = vec![0xffu8; bits.div_ceil(8) as usize];
    if !bits.is_multiple_of(8) {
        *payload.last_mut().unwrap() = (1u8 << (bits % 8)) - 1;
    }
    Snapshot::new(header, payload).unwrap()
}

/// The bytes of a frozen format version 1 fixture: real output of the version 1 writer.
pub fn v1_fixture(name: &str) -> Vec<u8> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/v1")
        .join(format!("{name}.bloom"));
    std::fs::read(path).unwrap()
}

/// The bytes of a frozen format version 2 fixture: real output of the version 2 writer.
pub fn v2_fixture(name: &str) -> Vec<u8> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/v2")
        .join(format!("{name}.bloom"));
    std::fs::read(path).unwrap()
}

/// Rewrites the header CRC so that a deliberately corrupted header passes the checksum.
pub fn reseal(bytes: &mut [u8]) {
    let header_len = u16::from_le_bytes([bytes[10], bytes[11]]) as usize;
    let crc = crc32fast::hash(&bytes[..header_len - 4]);
    bytes[header_len - 4..header_len].copy_from_slice(&crc.to_le_bytes());
}
