//! How format versions 1 to 3 lay out the header's fields, and the encoder that writes them.

use std::ops::RangeInclusive;

use bytes::{BufMut, Bytes, BytesMut};

use crate::ids::FormatVersion;
use crate::unicode::UnicodeVersion;

use super::{Header, MAGIC, MAX_SALT_LEN};

/// Where one format version keeps its fields. Versions share offsets 0..96; version 2 adds
/// a 48-byte extension before the salt, version 3 another 36 bytes and the stage directory.
#[derive(Debug)]
pub(crate) struct VersionLayout {
    /// Bytes of fixed fields before the stage directory (or the salt).
    pub(super) fixed_len: usize,
    /// Whether a stage directory of [`STAGE_LEN`] bytes per stage follows the fixed fields.
    pub(super) stage_directory: bool,
    /// `(offset, length)` of every reserved range, in offset order.
    pub(super) reserved: &'static [(usize, usize)],
}

pub(super) const V1_LAYOUT: VersionLayout = VersionLayout {
    fixed_len: 96,
    stage_directory: false,
    reserved: &[(12, 4), (39, 1), (70, 26)],
};

pub(super) const V2_LAYOUT: VersionLayout = VersionLayout {
    fixed_len: 144,
    stage_directory: false,
    reserved: &[(12, 4), (39, 1), (70, 26), (131, 1), (140, 4)],
};

pub(super) const V3_LAYOUT: VersionLayout = VersionLayout {
    fixed_len: 180,
    stage_directory: true,
    reserved: &[
        (12, 4),
        (39, 1),
        (70, 26),
        (131, 1),
        (140, 4),
        (166, 2),
        (176, 4),
    ],
};

/// Offsets of the version 2 extension.
pub(super) const V2_IDENTITY: usize = 96;
pub(super) const V2_HISTORY: usize = 112;
pub(super) const V2_CASING: usize = 128;
pub(super) const V2_LAYOUT_PARAMETER: usize = 132;

/// Offsets of the version 3 extension.
pub(super) const V3_CAPACITY: usize = 144;
pub(super) const V3_RATE: usize = 152;
pub(super) const V3_GROWTH: usize = 160;
pub(super) const V3_STAGES: usize = 164;
pub(super) const V3_TIGHTENING: usize = 168;

/// The bytes of one stage directory entry.
pub(crate) const STAGE_LEN: usize = 40;

pub(crate) const fn layout_of(version: FormatVersion) -> &'static VersionLayout {
    match version {
        FormatVersion::V1 => &V1_LAYOUT,
        FormatVersion::V2 => &V2_LAYOUT,
        FormatVersion::V3 => &V3_LAYOUT,
    }
}

impl VersionLayout {
    /// The header length without a salt: fixed fields plus the header CRC.
    pub(super) const fn min_header_len(&self) -> u16 {
        // At most 180 + 4: fits in u16.
        (self.fixed_len + 4) as u16
    }

    /// The longest stage directory.
    pub(super) const fn max_directory_len(&self) -> usize {
        if self.stage_directory {
            STAGE_LEN * crate::plan::MAX_STAGES
        } else {
            0
        }
    }

    pub(super) const fn max_header_len(&self) -> u16 {
        // At most 184 + 2560 + 32: fits in u16.
        self.min_header_len() + self.max_directory_len() as u16 + MAX_SALT_LEN as u16
    }
}

impl FormatVersion {
    /// The valid header lengths of this version: its fixed fields and CRC, plus 0 to 32
    /// bytes of salt (and in version 3, 0 to 64 stage directory entries of 40 bytes).
    #[must_use]
    pub const fn header_len_range(self) -> RangeInclusive<u16> {
        let layout = layout_of(self);
        layout.min_header_len()..=layout.max_header_len()
    }
}

/// Encodes `header` in the current format version, with the given payload length and CRC.
/// The caller has validated the header ([`validate`](super::validate)).
pub(crate) fn encode(header: &Header, payload_len: u64, payload_crc: u32) -> Bytes {
    let layout = layout_of(FormatVersion::CURRENT);
    let h = header;
    // validate() capped the salt at 32 bytes.
    let salt_len = u16::try_from(h.salt.len()).unwrap_or(u16::MAX);
    let directory_len = STAGE_LEN * h.stages().len();
    let mut buf = BytesMut::with_capacity(layout.fixed_len + directory_len + h.salt.len() + 4);
    buf.put_slice(&MAGIC);
    buf.put_u16_le(FormatVersion::CURRENT.value());
    // At most 2560 + 32 bytes past the minimum: fits in u16.
    buf.put_u16_le(layout.min_header_len() + directory_len as u16 + salt_len);
    buf.put_bytes(0, 4);
    buf.put_u64_le(h.bit_count);
    buf.put_u32_le(h.hash_count);
    buf.put_u16_le(h.position_rule.value());
    buf.put_u16_le(h.layout.value());
    buf.put_u16_le(h.key_encoding.id.value());
    buf.put_u16_le(h.key_encoding.version);
    buf.put_slice(&UnicodeVersion::to_bytes(
        h.key_encoding.normalization_unicode,
    ));
    buf.put_u8(0);
    buf.put_u64_le(h.dataset_generation.get());
    buf.put_u64_le(h.item_count);
    buf.put_u64_le(payload_len);
    buf.put_u32_le(payload_crc);
    buf.put_u16_le(salt_len);
    buf.put_bytes(0, 26);
    debug_assert_eq!(buf.len(), V2_IDENTITY);
    let (identity, history) = h.store.map_or(([0; 16], [0; 16]), |b| {
        (b.identity.to_bytes(), b.history.to_bytes())
    });
    buf.put_slice(&identity);
    buf.put_slice(&history);
    buf.put_slice(&UnicodeVersion::to_bytes(h.key_encoding.casing_unicode));
    buf.put_u8(0);
    buf.put_u64_le(h.layout_parameter);
    buf.put_bytes(0, 4);
    debug_assert_eq!(buf.len(), V3_CAPACITY);
    let (capacity, rate) = h
        .plan
        .map_or((0, 0), |p| (p.capacity, p.false_positive_rate.to_bits()));
    buf.put_u64_le(capacity);
    buf.put_u64_le(rate);
    let stages = h.stages();
    let (growth, tightening) = h
        .scalable
        .as_ref()
        .map_or((0, 0), |s| (s.growth, s.tightening.to_bits()));
    buf.put_u32_le(growth);
    // validate() capped the stages at 64.
    buf.put_u16_le(u16::try_from(stages.len()).unwrap_or(u16::MAX));
    buf.put_bytes(0, 2);
    buf.put_u64_le(tightening);
    buf.put_bytes(0, 4);
    debug_assert_eq!(buf.len(), layout.fixed_len);
    for stage in stages {
        buf.put_u64_le(stage.bit_count);
        buf.put_u32_le(stage.hash_count);
        buf.put_u16_le(stage.layout.value());
        buf.put_bytes(0, 2);
        buf.put_u64_le(stage.plan.capacity);
        buf.put_u64_le(stage.plan.false_positive_rate.to_bits());
        buf.put_u64_le(stage.item_count);
    }
    buf.put_slice(&h.salt);
    let crc = crc32fast::hash(&buf);
    buf.put_u32_le(crc);
    buf.freeze()
}
