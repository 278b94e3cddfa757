//! The append-only identifier tables: format versions, position rules, layouts and key
//! encodings. An assigned number is never reused or renumbered.

use std::fmt;

/// Which table an unknown identifier was looked up in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum IdKind {
    /// The position rule table.
    PositionRule,
    /// The layout table.
    Layout,
    /// The key encoding table.
    KeyEncoding,
    /// The versions of one key encoding.
    KeyEncodingVersion,
}

impl fmt::Display for IdKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::PositionRule => "position rule id",
            Self::Layout => "layout id",
            Self::KeyEncoding => "key encoding id",
            Self::KeyEncodingVersion => "key encoding version",
        })
    }
}

macro_rules! id_table {
    (
        $(#[$meta:meta])*
        $name:ident: $repr:ty {
            $( $(#[$vmeta:meta])* $variant:ident = $value:literal, $label:literal; )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[non_exhaustive]
        #[repr($repr)]
        pub enum $name {
            $( $(#[$vmeta])* $variant = $value, )+
        }

        impl $name {
            /// Every assigned identifier, in numeric order.
            pub const ALL: &'static [Self] = &[$(Self::$variant),+];

            /// The short name used in dumps and on the command line.
            #[must_use]
            pub const fn name(self) -> &'static str {
                match self {
                    $( Self::$variant => $label, )+
                }
            }

            /// The numeric value written to disk.
            #[must_use]
            pub const fn value(self) -> $repr {
                self as $repr
            }
        }

        impl TryFrom<$repr> for $name {
            type Error = $repr;

            /// Looks up an identifier; returns the number back if it is not assigned.
            fn try_from(value: $repr) -> Result<Self, $repr> {
                match value {
                    $( $value => Ok(Self::$variant), )+
                    other => Err(other),
                }
            }
        }

        impl From<$name> for $repr {
            fn from(id: $name) -> $repr {
                id as $repr
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

id_table! {
    /// A snapshot format version.
    FormatVersion: u16 {
        /// The first version: a 96-byte fixed header.
        V1 = 1, "1";
        /// Adds the store binding (identity and history digest), the Unicode version of the
        /// casing tables and the layout parameter: a 144-byte fixed header.
        V2 = 2, "2";
        /// Adds the plan (the capacity and false-positive rate a filter was sized for) and
        /// the scalable layout's growth, tightening and stage directory: a 180-byte fixed
        /// header, then 40 bytes per stage.
        V3 = 3, "3";
    }
}

id_table! {
    /// How a key's digest becomes bit positions. The hashing itself lives in bloom-core.
    PositionRuleId: u16 {
        /// Four big-endian words of SHA-256, each mod m; k <= 4.
        Sha256Split4 = 1, "sha256-split4";
        /// SHA-256, two little-endian words, then the layout's rule (enhanced double
        /// hashing for the standard layout); any k.
        Sha256Double = 2, "sha256-double";
        /// XXH3-128 (xxHash 0.8), its low and high 64 bits, then the layout's rule; any k.
        /// Fast and stable, not a defence against chosen keys.
        Xxh3_128 = 3, "xxh3-128";
        /// Guava's `MURMUR128_MITZ_64` (the default strategy since Guava 17): murmur3 x64
        /// 128-bit, seed 0, double hashing over 63-bit values mod m. Standard layout, no
        /// salt, m a multiple of 64.
        GuavaMitz64 = 4, "guava-mitz64";
        /// Guava's `MURMUR128_MITZ_32` (before Guava 17): the first 64 bits of murmur3 x64
        /// 128-bit, seed 0, split into two 32-bit halves for double hashing. Standard layout,
        /// no salt, m a multiple of 64.
        GuavaMitz32 = 5, "guava-mitz32";
        /// XXH64 (seed 0 without a salt), one 64-bit hash: Apache Parquet's hash for its
        /// split-block Bloom filters. Split-block layouts only.
        Xxh64 = 6, "xxh64";
        /// XXH3-64 (xxHash 0.8, seed 0 without a salt), one 64-bit hash. Split-block
        /// layouts only. Fast and stable, not a defence against chosen keys.
        Xxh3_64 = 7, "xxh3-64";
    }
}

id_table! {
    /// How the payload stores the bits.
    LayoutId: u16 {
        /// One flat bit array, `ceil(m / 8)` bytes, least significant bit first.
        Standard = 1, "standard";
        /// The same bit array cut into 512-bit blocks; all of a key's bits fall in one
        /// block. `m` is a multiple of 512; `m / 8` bytes.
        Blocked512 = 2, "blocked-512";
        /// The bit array cut into `S` equal shards (the layout parameter), each a multiple of
        /// 64 bits; all of a key's bits fall in one shard, so that a filter held in `S`
        /// separate bitmaps (Redis keys, say) answers a key from one of them. `m` is a
        /// multiple of `64 S`; `m / 8` bytes.
        Sharded = 3, "sharded";
        /// Counters instead of bits: `m` counters of 4 bits (a counting Bloom filter, which
        /// can delete keys), two per byte, counter `i` in byte `i / 2`, the low nibble for
        /// even `i`. Positions are those of the standard layout. `ceil(m / 2)` bytes.
        Counting4 = 4, "counting-4bit";
        /// The bit array cut into `S` equal shards, as [`LayoutId::Sharded`], with a key's
        /// positions inside its shard stepped independently of the shard choice (see
        /// `docs/format.md`). `m` is a multiple of `64 S`; `m / 8` bytes.
        ShardedV2 = 5, "sharded-v2";
        /// Apache Parquet's split-block Bloom filter: blocks of 256 bits, each eight 32-bit
        /// words; a key sets one bit in each word of one block (so k = 8). `m` is a multiple
        /// of 256; `m / 8` bytes, which are byte for byte the Parquet bitset.
        SplitBlock256 = 6, "split-block-256";
        /// The split block widened to 512 bits (one cache line), eight 64-bit words; a key
        /// sets one bit in each word of one block (k = 8). `m` is a multiple of 512; `m / 8`
        /// bytes.
        SplitBlock512 = 7, "split-block-512";
        /// A scalable filter: a chain of stages, each a filter of its own layout (1, 2, 6 or
        /// 7), size and `k`, described by the header's stage directory (format version 3).
        /// A key is in the filter if it is in any stage. `m` is the stages' total, every
        /// stage's a multiple of 64; `m / 8` bytes, the stages' payloads in order.
        Scalable = 8, "scalable";
    }
}

id_table! {
    /// How a key becomes the bytes that are hashed.
    KeyEncodingId: u16 {
        /// Raw bytes.
        Bytes = 1, "bytes";
        /// UTF-8 as given.
        Utf8 = 2, "utf8";
        /// Unicode NFC.
        Nfc = 3, "nfc";
        /// NFC, trimmed, lowercased, NFC again.
        NfcTrimLowercase = 4, "nfc-trim-lower";
        /// UTF-16 code units of the text, each as two little-endian bytes (Guava's
        /// `Funnels.unencodedCharsFunnel()`).
        Utf16Le = 5, "utf16le";
    }
}

impl PositionRuleId {
    /// Whether this is one of Guava's strategies, whose filters must stay exportable as a
    /// Guava stream: standard layout, no salt, `m` a multiple of 64 of at most
    /// [`GUAVA_MAX_BITS`](crate::GUAVA_MAX_BITS).
    #[must_use]
    pub const fn is_guava(self) -> bool {
        matches!(self, Self::GuavaMitz64 | Self::GuavaMitz32)
    }

    /// Whether the rule computes one 64-bit hash (`xxh64`, `xxh3-64`), which only the
    /// split-block layouts take.
    #[must_use]
    pub const fn is_64_bit(self) -> bool {
        matches!(self, Self::Xxh64 | Self::Xxh3_64)
    }
}

impl LayoutId {
    /// Whether a stage of a [`LayoutId::Scalable`] filter may have this layout: a plain bit
    /// layout (standard, blocked-512, split-block-256, split-block-512).
    #[must_use]
    pub const fn is_stage_layout(self) -> bool {
        matches!(
            self,
            Self::Standard | Self::Blocked512 | Self::SplitBlock256 | Self::SplitBlock512
        )
    }

    /// The block size in bits of a split-block layout (256 or 512), or `None`.
    #[must_use]
    pub const fn split_block_bits(self) -> Option<u64> {
        match self {
            Self::SplitBlock256 => Some(256),
            Self::SplitBlock512 => Some(512),
            _ => None,
        }
    }
}

impl FormatVersion {
    /// The version this build writes.
    pub const CURRENT: Self = Self::V3;
    /// The oldest version this build reads.
    pub const OLDEST: Self = Self::V1;
}

impl KeyEncodingId {
    /// The newest version of this encoding that this build knows. Versions `1..=latest` are
    /// valid.
    #[must_use]
    pub const fn latest_version(self) -> u16 {
        match self {
            Self::Bytes | Self::Utf8 | Self::Nfc | Self::NfcTrimLowercase | Self::Utf16Le => 1,
        }
    }

    /// Whether the encoding uses Unicode normalization tables, and so records their
    /// Unicode version.
    #[must_use]
    pub const fn uses_normalization_tables(self) -> bool {
        matches!(self, Self::Nfc | Self::NfcTrimLowercase)
    }

    /// Whether the encoding uses Unicode case-mapping and `White_Space` tables, and so
    /// records their Unicode version (format version 2 and later).
    #[must_use]
    pub const fn uses_casing_tables(self) -> bool {
        matches!(self, Self::NfcTrimLowercase)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table<T: Copy + Into<u16> + fmt::Display>(all: &[T]) -> Vec<(u16, String)> {
        all.iter().map(|&id| (id.into(), id.to_string())).collect()
    }

    fn pairs(expected: &[(u16, &str)]) -> Vec<(u16, String)> {
        expected.iter().map(|&(v, n)| (v, n.to_owned())).collect()
    }

    /// Every assigned value, pinned. Appending is fine; changing a line is a format break.
    #[test]
    fn assigned_identifiers_never_change() {
        assert_eq!(
            table(FormatVersion::ALL),
            pairs(&[(1, "1"), (2, "2"), (3, "3")])
        );
        assert_eq!(
            table(PositionRuleId::ALL),
            pairs(&[
                (1, "sha256-split4"),
                (2, "sha256-double"),
                (3, "xxh3-128"),
                (4, "guava-mitz64"),
                (5, "guava-mitz32"),
                (6, "xxh64"),
                (7, "xxh3-64")
            ])
        );
        assert_eq!(
            table(LayoutId::ALL),
            pairs(&[
                (1, "standard"),
                (2, "blocked-512"),
                (3, "sharded"),
                (4, "counting-4bit"),
                (5, "sharded-v2"),
                (6, "split-block-256"),
                (7, "split-block-512"),
                (8, "scalable")
            ])
        );
        assert_eq!(
            table(KeyEncodingId::ALL),
            pairs(&[
                (1, "bytes"),
                (2, "utf8"),
                (3, "nfc"),
                (4, "nfc-trim-lower"),
                (5, "utf16le")
            ])
        );
        for e in KeyEncodingId::ALL {
            assert_eq!(e.latest_version(), 1, "{e}");
        }
    }

    #[test]
    fn unknown_values_are_returned() {
        assert_eq!(PositionRuleId::try_from(0), Err(0));
        assert_eq!(PositionRuleId::try_from(8), Err(8));
        assert_eq!(LayoutId::try_from(9), Err(9));
        assert_eq!(KeyEncodingId::try_from(6), Err(6));
        assert_eq!(FormatVersion::try_from(4), Err(4));
        assert_eq!(FormatVersion::try_from(0), Err(0));
        for &id in PositionRuleId::ALL {
            assert_eq!(PositionRuleId::try_from(id.value()), Ok(id));
        }
    }
}
