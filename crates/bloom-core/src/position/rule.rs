//! [`PositionRule`]: the hash a rule computes over a key, its name and its limits.

use std::fmt;
use std::str::FromStr;

use bloom_format::PositionRuleId;

use crate::encoding::UnknownNameError;
use crate::layout::Layout;
use crate::params::MAX_HASHES;

/// How a key's encoded bytes become a hash, and the hash bit positions.
///
/// A rule computes a hash of the key; the filter's [`Layout`] says how the hash becomes
/// positions (see [`Layout`]). The numeric ids are part of the snapshot format and never
/// change or get reused.
///
/// **Chosen keys.** Without a salt, anyone can compute where a key lands under any rule and
/// pick keys that fill the filter (raising its false-positive rate; never causing a wrong
/// "absent"). Against keys an adversary picks, use [`PositionRule::Sha256Double`] with a
/// secret [`Salt`](super::Salt). `xxh3-128` is fast and stable, but xxHash documents
/// seed-independent collisions, so a salt does not protect it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum PositionRule {
    /// The teaching rule of the reference article (id 1). The SHA-256 digest is split into
    /// four 8-byte big-endian words `w0..w3`; position `i` is `w_i mod m`. At most 4
    /// positions, standard layout only.
    Sha256Split4,
    /// SHA-256 (id 2), for any `k` up to [`MAX_HASHES`]: `h1` = bytes `0..8` and `h2` =
    /// bytes `8..16` of the digest, each read as a little-endian `u64`, then the layout's
    /// mapping. In the standard layout that is enhanced double hashing (Kirsch–Mitzenmacher,
    /// Dillinger–Manolios), with all additions wrapping modulo 2^64:
    ///
    /// ```text
    /// a = h1; b = h2
    /// for i in 0..k:
    ///     position[i] = (a as u128 * m as u128) >> 64     // in [0, m), from all 64 bits
    ///     a = a + b
    ///     b = b + (i + 1)
    /// ```
    ///
    /// so `a_i = h1 + i*h2 + (i^3 - i)/6`. The range reduction is a 128-bit multiply-shift
    /// (Lemire), which uses the full 64-bit value and never overflows for any `m` below 2^64.
    /// With a secret salt this is the rule for keys an adversary picks.
    Sha256Double,
    /// XXH3-128 of xxHash 0.8 (id 3), for any `k` up to [`MAX_HASHES`]: `h1` and `h2` are
    /// the low and high 64 bits of the 128-bit hash (seed 0; with a salt, the seed is the
    /// first 8 bytes, little-endian, of the salted SHA-256 of the empty key), then the
    /// layout's mapping. The xxHash 0.8 output is specified and the same on every platform
    /// and release; it is several times faster than SHA-256, and not a defence against chosen
    /// keys.
    #[default]
    Xxh3_128,
    /// Guava's `MURMUR128_MITZ_64` strategy (id 4), the default of `BloomFilter.create` since
    /// Guava 17: `h1`, `h2` = the two little-endian 64-bit halves of murmur3 x64 128-bit
    /// (seed 0), then
    ///
    /// ```text
    /// c = h1
    /// for i in 0..k:
    ///     position[i] = (c & 0x7fff_ffff_ffff_ffff) % m
    ///     c = c + h2                                       // wrapping
    /// ```
    ///
    /// Standard layout, no salt, `m` a multiple of 64 (Guava's `64 N`), `k` up to
    /// [`MAX_HASHES`]. With the key encoding of the JVM side's funnel, a filter answers as
    /// Guava's `mightContain` does.
    GuavaMitz64,
    /// Guava's `MURMUR128_MITZ_32` strategy (id 5), Guava before 17: `a`, `b` = the low and
    /// high 32 bits (as signed `int`s) of `h1` above, then, in 32-bit wrapping arithmetic,
    ///
    /// ```text
    /// for i in 1..=k:
    ///     c = a + i * b
    ///     if c < 0: c = !c
    ///     position[i - 1] = c % m
    /// ```
    ///
    /// Same restrictions as [`PositionRule::GuavaMitz64`].
    GuavaMitz32,
    /// XXH64 (id 6), Apache Parquet's hash: one 64-bit hash `h` of the key (seed 0; with a
    /// salt, the seed of [`PositionRule::Xxh3_128`]), for the split-block layouts only. With
    /// [`Layout::SplitBlock256`] and the key encoding of a column's type, a filter is a
    /// Parquet split-block Bloom filter bit for bit.
    Xxh64,
    /// XXH3-64 of xxHash 0.8 (id 7): one 64-bit hash of the key (seed 0; with a salt, as
    /// [`PositionRule::Xxh3_128`]), for the split-block layouts only. The fastest rule:
    /// XXH3's short-key path, with no second 64-bit half to compute. Not a defence against
    /// chosen keys.
    Xxh3_64,
}

impl PositionRule {
    /// Every rule, in id order.
    pub const ALL: [Self; 7] = [
        Self::Sha256Split4,
        Self::Sha256Double,
        Self::Xxh3_128,
        Self::GuavaMitz64,
        Self::GuavaMitz32,
        Self::Xxh64,
        Self::Xxh3_64,
    ];

    /// The names accepted by [`PositionRule::from_str`].
    pub const NAMES: &'static str =
        "sha256-split4, sha256-double, xxh3-128, guava-mitz64, guava-mitz32, xxh64, xxh3-64";

    /// The stable identifier written into snapshots (its number is in `bloom-format`'s
    /// append-only table).
    #[must_use]
    pub const fn id(self) -> PositionRuleId {
        match self {
            Self::Sha256Split4 => PositionRuleId::Sha256Split4,
            Self::Sha256Double => PositionRuleId::Sha256Double,
            Self::Xxh3_128 => PositionRuleId::Xxh3_128,
            Self::GuavaMitz64 => PositionRuleId::GuavaMitz64,
            Self::GuavaMitz32 => PositionRuleId::GuavaMitz32,
            Self::Xxh64 => PositionRuleId::Xxh64,
            Self::Xxh3_64 => PositionRuleId::Xxh3_64,
        }
    }

    /// The rule with this identifier, if this build implements it.
    #[must_use]
    pub const fn from_id(id: PositionRuleId) -> Option<Self> {
        match id {
            PositionRuleId::Sha256Split4 => Some(Self::Sha256Split4),
            PositionRuleId::Sha256Double => Some(Self::Sha256Double),
            PositionRuleId::Xxh3_128 => Some(Self::Xxh3_128),
            PositionRuleId::GuavaMitz64 => Some(Self::GuavaMitz64),
            PositionRuleId::GuavaMitz32 => Some(Self::GuavaMitz32),
            PositionRuleId::Xxh64 => Some(Self::Xxh64),
            PositionRuleId::Xxh3_64 => Some(Self::Xxh3_64),
            _ => None,
        }
    }

    /// The short name used by the CLI and in dumps.
    #[must_use]
    pub const fn name(self) -> &'static str {
        self.id().name()
    }

    /// The largest `k` the rule supports.
    #[must_use]
    pub(crate) const fn max_hashes(self) -> u32 {
        match self {
            Self::Sha256Split4 => 4,
            Self::Sha256Double | Self::Xxh3_128 | Self::GuavaMitz64 | Self::GuavaMitz32 => {
                MAX_HASHES
            }
            Self::Xxh64 | Self::Xxh3_64 => crate::layout::SPLIT_BLOCK_HASHES,
        }
    }

    /// Whether the rule works with `layout`: `sha256-split4` and Guava's rules only with the
    /// standard one; the 64-bit rules (`xxh64`, `xxh3-64`) only with the split-block ones,
    /// which also take `sha256-double` and `xxh3-128` (their `h1`).
    #[must_use]
    pub const fn supports(self, layout: Layout) -> bool {
        match (self, layout.split_block_bits()) {
            (Self::Xxh64 | Self::Xxh3_64, split) => split.is_some(),
            (Self::Sha256Double | Self::Xxh3_128, _) => true,
            (_, _) => matches!(layout, Layout::Standard),
        }
    }

    /// Whether the rule computes one 64-bit hash (`xxh64`, `xxh3-64`): split-block
    /// layouts only.
    #[must_use]
    pub const fn is_64_bit(self) -> bool {
        matches!(self, Self::Xxh64 | Self::Xxh3_64)
    }

    /// Whether this is one of Guava's strategies: standard layout, no salt, `m` a multiple
    /// of 64.
    #[must_use]
    pub const fn is_guava(self) -> bool {
        matches!(self, Self::GuavaMitz64 | Self::GuavaMitz32)
    }
}

impl fmt::Display for PositionRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for PositionRule {
    type Err = UnknownNameError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|r| r.name() == s)
            .ok_or_else(|| UnknownNameError {
                kind: "position rule",
                found: s.to_owned(),
                expected: Self::NAMES,
            })
    }
}
