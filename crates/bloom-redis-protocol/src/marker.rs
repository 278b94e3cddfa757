//! The shards' markers: the 64-bit value at both ends of every shard, bound to the filter's
//! creation, its configuration text and the shard's number (`docs/format.md`, "Sharded filters
//! held in Redis", "Shards and markers"), and how Redis reads one.
//!
//! A shard that is missing, emptied, of another filter, of another shard, or read with another
//! configuration reads a marker other than the expected one; every command on a shard, by
//! bloom-redis's `BITFIELD`s or inside the module, reads both of them first.

use bloom_format::Header;

use crate::config::config_text;
use crate::meta::Creation;

/// Bits of one marker: a shard's own bits start at this bit offset.
pub const MARKER_BITS: u64 = 64;

/// Bytes of one marker.
pub const MARKER_BYTES: u64 = MARKER_BITS / 8;

/// splitmix64's finalizer: a bijection of u64 that mixes every bit.
const fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// FNV-1a, 64 bits.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The markers of a filter's shards: each shard's depends on the creation, on the
/// configuration the shards were made for, and on the shard's number, so that a shard that
/// is missing, emptied, of another filter, of another shard, or read with another
/// configuration reads a marker other than the expected one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShardMarkers {
    creation: u64,
    config: u64,
}

impl ShardMarkers {
    /// The markers of the filter created as `creation` with the configuration `config_text`
    /// (see [`config_text`]).
    #[must_use]
    pub fn new(creation: &[u8; 16], config_text: &[u8]) -> Self {
        let [a, b, c, d, e, f, g, h, ..] = *creation;
        Self {
            creation: u64::from_le_bytes([h, g, f, e, d, c, b, a]),
            config: fnv1a(config_text),
        }
    }

    /// The markers of the filter `creation` made with `header`'s configuration (its
    /// [`config_text`]; the generation, item count, plan and store binding are not part of
    /// it).
    #[must_use]
    pub fn for_filter(creation: Creation, header: &Header) -> Self {
        Self::new(&creation.bytes(), config_text(header).as_bytes())
    }

    /// The marker of shard `shard`, as `BITFIELD key GET i64 offset` reads it: never 0 (what
    /// a missing or emptied key reads).
    #[must_use]
    pub fn of(self, shard: u32) -> i64 {
        let m = mix(self.creation ^ mix(self.config.wrapping_add(u64::from(shard) + 1)));
        i64::from_le_bytes(if m == 0 { 1 } else { m }.to_le_bytes())
    }

    /// The marker's 8 bytes as stored in the shard (Redis reads them most significant first).
    #[must_use]
    pub fn bytes(self, shard: u32) -> [u8; 8] {
        let [a, b, c, d, e, f, g, h] = self.of(shard).to_le_bytes();
        [h, g, f, e, d, c, b, a]
    }
}

/// A marker's (or a write counter's) 8 stored bytes as Redis's `GET i64` reads them: most
/// significant first.
#[must_use]
pub fn read_i64(bytes: [u8; 8]) -> i64 {
    let [a, b, c, d, e, f, g, h] = bytes;
    i64::from_le_bytes([h, g, f, e, d, c, b, a])
}

#[cfg(test)]
mod tests {
    use super::*;
    use bloom_format::{
        DatasetGeneration, KeyEncodingId, KeyEncodingSpec, LayoutId, PositionRuleId, UnicodeVersion,
    };

    /// Computed independently from docs/format.md (a few lines of Python: splitmix64's
    /// finalizer and FNV-1a over the field values).
    #[test]
    fn markers_follow_the_spec() {
        let mut spec = KeyEncodingSpec::new(KeyEncodingId::Nfc, 1);
        spec.normalization_unicode = Some(UnicodeVersion::new(18, 0, 0));
        let mut header = Header::new(96_256, 7, PositionRuleId::Xxh3_128, LayoutId::Sharded, spec);
        header.layout_parameter = 16;
        let creation = Creation::from_bytes(core::array::from_fn(|i| i as u8 + 1)).unwrap();
        let markers = ShardMarkers::for_filter(creation, &header);
        let hex = |s| bloom_format::hex(&markers.bytes(s));
        assert_eq!(hex(0), "023b1fea9385d3f8");
        assert_eq!(hex(1), "4488b1e542d65303");
        assert_eq!(hex(15), "e10573572fd54728");
        // Generation, items and the binding are not part of the configuration.
        header.dataset_generation = DatasetGeneration::new(5);
        header.item_count = 9;
        assert_eq!(
            bloom_format::hex(&ShardMarkers::for_filter(creation, &header).bytes(0)),
            hex(0)
        );
        header.hash_count = 8;
        assert_ne!(
            bloom_format::hex(&ShardMarkers::for_filter(creation, &header).bytes(0)),
            hex(0)
        );
    }

    #[test]
    fn markers_are_never_zero_and_differ_by_shard() {
        let markers = ShardMarkers::new(&[1; 16], b"x\n");
        assert_ne!(markers.of(0), markers.of(1));
        assert!((0..1000).all(|s| markers.of(s) != 0));
        assert_eq!(read_i64(markers.bytes(7)), markers.of(7));
    }
}
