//! The snapshot header: its fields, how format versions 1 to 3 lay them out, and the strict
//! checks of steps 1 to 5 of `docs/format.md`.

mod decode;
mod layout;
mod stages;

use crate::binding::{DatasetGeneration, StoreBinding};
use crate::error::DecodeError;
use crate::ids::{FormatVersion, KeyEncodingId, LayoutId, PositionRuleId};
use crate::plan::{Plan, Scalable};
use crate::unicode::UnicodeVersion;

pub use decode::{DEFAULT_MAX_PAYLOAD_LEN, DecodeOptions, MAX_SPLIT_BLOCKS};
pub(crate) use decode::{check_prefix, decode, parse_prefix, validate};
use layout::STAGE_LEN;
pub(crate) use layout::{encode, layout_of};

/// The eight magic bytes that start every snapshot: `\x89BLM\r\n\x1a\n`.
pub const MAGIC: [u8; 8] = [0x89, b'B', b'L', b'M', b'\r', b'\n', 0x1a, b'\n'];

/// The longest salt a snapshot can carry.
pub const MAX_SALT_LEN: usize = 32;

/// The most shards of the sharded layout (its layout parameter).
pub const MAX_SHARDS: u64 = 1 << 16;

/// The largest `m` a Guava stream can hold: `2^31 - 1` words of 64 bits.
pub const GUAVA_MAX_BITS: u64 = 64 * i32::MAX as u64;

/// The longest header of any version this build reads: enough buffer for any header.
pub const MAX_HEADER_LEN: u16 = layout_of(FormatVersion::V3).max_header_len();

/// Magic, version and header length: what a reader needs before it knows the header length.
pub(crate) const PREFIX_LEN: usize = 12;

/// The key encoding recorded in a header: id, rule version, and the Unicode versions of the
/// tables the writer applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct KeyEncodingSpec {
    /// The encoding.
    pub id: KeyEncodingId,
    /// The version of the encoding rule.
    pub version: u16,
    /// The Unicode version of the normalization tables; `None` for encodings that use none.
    pub normalization_unicode: Option<UnicodeVersion>,
    /// The Unicode version of the case-mapping and `White_Space` tables; `None` for
    /// encodings that use none, and for snapshots that did not record it (format version 1,
    /// which recorded one version for all tables in `normalization_unicode`).
    pub casing_unicode: Option<UnicodeVersion>,
}

impl KeyEncodingSpec {
    /// Encoding `id` at rule `version`, with no Unicode versions recorded.
    #[must_use]
    pub const fn new(id: KeyEncodingId, version: u16) -> Self {
        Self {
            id,
            version,
            normalization_unicode: None,
            casing_unicode: None,
        }
    }

    /// Records the Unicode version of the normalization tables.
    #[must_use]
    pub const fn with_normalization_unicode(mut self, version: Option<UnicodeVersion>) -> Self {
        self.normalization_unicode = version;
        self
    }

    /// Records the Unicode version of the case-mapping and `White_Space` tables.
    #[must_use]
    pub const fn with_casing_unicode(mut self, version: Option<UnicodeVersion>) -> Self {
        self.casing_unicode = version;
        self
    }
}

/// Every header field a writer chooses. Lengths and checksums are computed when encoding.
///
/// Build one with [`Header::new`] and set the other public fields; the struct may gain fields
/// in later versions, so it cannot be built with a struct literal outside this crate.
#[derive(Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Header {
    /// The bit count `m`.
    pub bit_count: u64,
    /// Positions per key `k`.
    pub hash_count: u32,
    /// The position rule.
    pub position_rule: PositionRuleId,
    /// The payload layout.
    pub layout: LayoutId,
    /// A number whose meaning the layout defines; 0 for layouts that define none (all layouts
    /// this build knows). Always 0 in format version 1.
    pub layout_parameter: u64,
    /// The key encoding.
    pub key_encoding: KeyEncodingSpec,
    /// The salt; empty for none. At most [`MAX_SALT_LEN`] bytes.
    pub salt: Vec<u8>,
    /// The generation of the primary store that the bits fully cover; 0 when the filter is
    /// not tied to a store.
    pub dataset_generation: DatasetGeneration,
    /// The number of items inserted, as the writer recorded it.
    pub item_count: u64,
    /// The store the bits were taken from and the point of its history they cover; `None`
    /// for filters not tied to a store, and always `None` in format version 1.
    pub store: Option<StoreBinding>,
    /// The capacity and rate the filter was planned for; `None` when not recorded, and
    /// always `None` before format version 3. Required for [`LayoutId::Scalable`], where it
    /// is the first stage's capacity and the rate of the whole chain.
    pub plan: Option<Plan>,
    /// The growth, tightening and stages of a [`LayoutId::Scalable`] filter; `None` for
    /// every other layout.
    pub scalable: Option<Scalable>,
}

/// Every field but the salt, which is a secret: only its length is shown.
impl std::fmt::Debug for Header {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Header")
            .field("bit_count", &self.bit_count)
            .field("hash_count", &self.hash_count)
            .field("position_rule", &self.position_rule)
            .field("layout", &self.layout)
            .field("layout_parameter", &self.layout_parameter)
            .field("key_encoding", &self.key_encoding)
            .field("salt", &format_args!("<{} secret bytes>", self.salt.len()))
            .field("dataset_generation", &self.dataset_generation)
            .field("item_count", &self.item_count)
            .field("store", &self.store)
            .field("plan", &self.plan)
            .field("scalable", &self.scalable)
            .finish()
    }
}

impl Header {
    /// A header for an empty, unsalted filter not tied to a store.
    #[must_use]
    pub const fn new(
        bit_count: u64,
        hash_count: u32,
        position_rule: PositionRuleId,
        layout: LayoutId,
        key_encoding: KeyEncodingSpec,
    ) -> Self {
        Self {
            bit_count,
            hash_count,
            position_rule,
            layout,
            layout_parameter: 0,
            key_encoding,
            salt: Vec::new(),
            dataset_generation: DatasetGeneration::ZERO,
            item_count: 0,
            store: None,
            plan: None,
            scalable: None,
        }
    }

    /// The stages of a scalable filter, oldest first; empty for every other layout.
    #[must_use]
    pub fn stages(&self) -> &[crate::plan::Stage] {
        self.scalable.as_ref().map_or(&[], |s| s.stages.as_slice())
    }

    /// The payload length this header's layout requires: `ceil(m / 8)` for the standard
    /// layout.
    #[must_use]
    pub const fn payload_len(&self) -> u64 {
        match self.layout {
            LayoutId::Counting4 => self.bit_count.div_ceil(2),
            LayoutId::Standard
            | LayoutId::Blocked512
            | LayoutId::Sharded
            | LayoutId::ShardedV2
            | LayoutId::SplitBlock256
            | LayoutId::SplitBlock512
            | LayoutId::Scalable => self.bit_count.div_ceil(8),
        }
    }

    /// The bits of the payload that hold data: `m` for the bit layouts, `4 m` for
    /// [`LayoutId::Counting4`]. Bits past them in the last byte are padding and must be zero.
    #[must_use]
    pub const fn payload_bits(&self) -> u64 {
        match self.layout {
            LayoutId::Counting4 => self.bit_count.saturating_mul(4),
            LayoutId::Standard
            | LayoutId::Blocked512
            | LayoutId::Sharded
            | LayoutId::ShardedV2
            | LayoutId::SplitBlock256
            | LayoutId::SplitBlock512
            | LayoutId::Scalable => self.bit_count,
        }
    }

    /// Checks the fields as decoding would (steps 5.1 to 5.14 of `docs/format.md` that
    /// concern field values), for headers that arrive by another route than a snapshot
    /// file, such as a filter's metadata kept beside its bits.
    ///
    /// # Errors
    /// The [`DecodeError`] a snapshot with this header would fail with.
    pub fn check(&self) -> Result<(), DecodeError> {
        validate(self, FormatVersion::CURRENT, self.payload_len())
    }

    /// The length of this header when encoded in the current format version.
    #[must_use]
    pub fn encoded_len(&self) -> u64 {
        u64::from(layout_of(FormatVersion::CURRENT).min_header_len())
            + (STAGE_LEN * self.stages().len()) as u64
            + self.salt.len() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::layout::{V1_LAYOUT, V2_LAYOUT, V3_LAYOUT};
    use super::*;
    use crate::binding::{HistoryDigest, StoreIdentity};

    #[test]
    fn version_layouts_are_what_the_spec_says() {
        assert_eq!(FormatVersion::V1.header_len_range(), 100..=132);
        assert_eq!(FormatVersion::V2.header_len_range(), 148..=180);
        assert_eq!(FormatVersion::V3.header_len_range(), 184..=2776);
        assert_eq!(MAX_HEADER_LEN, 2776);
        // Reserved ranges do not overlap any field and are in offset order.
        for layout in [&V1_LAYOUT, &V2_LAYOUT, &V3_LAYOUT] {
            for pair in layout.reserved.windows(2) {
                assert!(pair[0].0 + pair[0].1 <= pair[1].0);
            }
            let last = layout.reserved.last().unwrap();
            assert!(last.0 + last.1 <= layout.fixed_len);
        }
    }

    #[test]
    fn encoded_header_has_the_v3_length_and_decodes_back() {
        let mut header = Header::new(
            100,
            3,
            PositionRuleId::Sha256Double,
            LayoutId::Standard,
            KeyEncodingSpec::new(KeyEncodingId::NfcTrimLowercase, 1)
                .with_normalization_unicode(Some(UnicodeVersion::new(18, 0, 0)))
                .with_casing_unicode(Some(UnicodeVersion::new(17, 0, 0))),
        );
        header.salt = b"salt".to_vec();
        header.store = Some(StoreBinding::new(
            StoreIdentity::from_bytes([1; 16]),
            HistoryDigest::from_bytes([2; 16]),
        ));
        header.dataset_generation = DatasetGeneration::new(9);
        validate(&header, FormatVersion::CURRENT, 13).unwrap();
        let bytes = encode(&header, 13, 0xdead_beef);
        assert_eq!(bytes.len() as u64, header.encoded_len());
        assert_eq!(bytes.len(), 188);
        let decoded = decode(&bytes, &DecodeOptions::unlimited()).unwrap();
        assert_eq!(decoded.header, header);
        assert_eq!(decoded.version, FormatVersion::V3);
        assert_eq!(
            (decoded.payload_len, decoded.payload_crc),
            (13, 0xdead_beef)
        );
    }
}
