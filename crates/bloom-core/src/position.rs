//! Position rules: how an encoded key becomes `k` bit positions in `[0, m)`.
//!
//! Positions come only from SHA-256 over the encoded key (optionally behind a secret salt),
//! never from `std::hash` or any per-process random state, so every process, machine and
//! release computes the same positions.

use std::fmt;
use std::str::FromStr;

use bloom_format::PositionRuleId;
use sha2::{Digest, Sha256};

use crate::encoding::{EncodedKey, UnknownNameError};
use crate::params::MAX_HASHES;

/// How the SHA-256 digest of a key is turned into bit positions.
///
/// The numeric ids are part of the snapshot format and never change or get reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum PositionRule {
    /// The teaching rule of the reference article (id 1). The digest is split into four 8-byte
    /// big-endian words `w0..w3`; position `i` is `w_i mod m`. At most 4 positions.
    Sha256Split4,
    /// The default rule (id 2), for any `k` up to [`MAX_HASHES`]: enhanced double hashing
    /// (Kirsch–Mitzenmacher, Dillinger–Manolios) over two 64-bit words of the digest.
    ///
    /// With `h1` = bytes `0..8` and `h2` = bytes `8..16` of the digest, each read as a
    /// little-endian `u64`, and all additions wrapping modulo 2^64:
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
    #[default]
    Sha256Double,
}

impl PositionRule {
    /// Every rule, in id order.
    pub const ALL: [Self; 2] = [Self::Sha256Split4, Self::Sha256Double];

    /// The names accepted by [`PositionRule::from_str`].
    pub const NAMES: &'static str = "sha256-split4, sha256-double";

    /// The stable identifier written into snapshots (its number is in `bloom-format`'s
    /// append-only table).
    #[must_use]
    pub const fn id(self) -> PositionRuleId {
        match self {
            Self::Sha256Split4 => PositionRuleId::Sha256Split4,
            Self::Sha256Double => PositionRuleId::Sha256Double,
        }
    }

    /// The rule with this identifier, if this build implements it.
    #[must_use]
    pub const fn from_id(id: PositionRuleId) -> Option<Self> {
        match id {
            PositionRuleId::Sha256Split4 => Some(Self::Sha256Split4),
            PositionRuleId::Sha256Double => Some(Self::Sha256Double),
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
    pub const fn max_hashes(self) -> u32 {
        match self {
            Self::Sha256Split4 => 4,
            Self::Sha256Double => MAX_HASHES,
        }
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

/// A per-filter secret mixed into every digest (keyed hashing).
///
/// Without a salt, anyone can compute where a key lands and craft keys that fill the filter
/// or that collide with a chosen key ("The Power of Evil Choices in Bloom Filters", Gerbet,
/// Cunche and Lauradoux, 2015). With a secret salt of 16 bytes or more they cannot.
///
/// The salted digest is `SHA-256(block || key)`, where `block` is 64 bytes: the salt length
/// as one byte, the salt, then zeros. Because the block fills exactly one SHA-256 block, its
/// compression is computed once per filter and a salted lookup costs the same as an unsalted
/// one. This is a secret-prefix construction rather than HMAC: it is sound here because no
/// digest is ever revealed, only bits of the filter. The salt is stored in the snapshot, so
/// a snapshot must be kept as private as the salt.
///
/// The empty salt means "no salt": the digest is then plain `SHA-256(key)`. Salting is off by
/// default.
#[derive(Clone, PartialEq, Eq, Hash, Default)]
pub struct Salt(Vec<u8>);

/// Shows the length only: a salt is a secret and must not end up in logs.
impl fmt::Debug for Salt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            f.write_str("Salt(none)")
        } else {
            write!(f, "Salt(<{} secret bytes>)", self.0.len())
        }
    }
}

/// A salt longer than [`Salt::MAX_LEN`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("salt is {found} bytes long; at most {max} bytes are allowed", max = Salt::MAX_LEN)]
pub struct SaltTooLong {
    /// The length that was given.
    pub found: usize,
}

/// The random source failed while making a salt.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the operating system's random source failed: {0}")]
pub struct RandomSaltError(pub String);

impl Salt {
    /// The longest salt accepted, in bytes.
    pub const MAX_LEN: usize = 32;

    /// No salt.
    #[must_use]
    pub const fn none() -> Self {
        Self(Vec::new())
    }

    /// A salt of the given bytes; empty means no salt.
    ///
    /// # Errors
    /// [`SaltTooLong`] for more than [`Salt::MAX_LEN`] bytes.
    pub fn new(bytes: &[u8]) -> Result<Self, SaltTooLong> {
        if bytes.len() > Self::MAX_LEN {
            return Err(SaltTooLong { found: bytes.len() });
        }
        Ok(Self(bytes.to_vec()))
    }

    /// A fresh 32-byte salt from the operating system's random source.
    ///
    /// # Errors
    /// [`RandomSaltError`] when the random source fails.
    pub fn random() -> Result<Self, RandomSaltError> {
        let mut bytes = vec![0; Self::MAX_LEN];
        getrandom::fill(&mut bytes).map_err(|e| RandomSaltError(e.to_string()))?;
        Ok(Self(bytes))
    }

    /// The salt bytes; empty when there is no salt.
    #[must_use]
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// Whether there is no salt.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn prefix_block(&self) -> [u8; 64] {
        let mut block = [0u8; 64];
        // Salt::new caps the length at 32, so it fits in one byte and in the block.
        let len = u8::try_from(self.0.len()).unwrap_or(u8::MAX);
        block[0] = len;
        for (dst, src) in block[1..].iter_mut().zip(&self.0) {
            *dst = *src;
        }
        block
    }
}

/// Computes positions for one filter configuration; the salted SHA-256 state is prepared once.
#[derive(Clone, Debug)]
pub(crate) struct PositionHasher {
    rule: PositionRule,
    bits: u64,
    hashes: u32,
    salted: Option<Sha256>,
}

impl PositionHasher {
    pub(crate) fn new(rule: PositionRule, bits: u64, hashes: u32, salt: &Salt) -> Self {
        let salted = (!salt.is_empty()).then(|| {
            let mut state = Sha256::new();
            state.update(salt.prefix_block());
            state
        });
        Self {
            rule,
            bits,
            hashes,
            salted,
        }
    }

    #[inline]
    fn digest(&self, key: &[u8]) -> [u8; 32] {
        match &self.salted {
            Some(state) => {
                let mut state = state.clone();
                state.update(key);
                state.finalize().into()
            }
            None => Sha256::digest(key).into(),
        }
    }

    #[inline]
    pub(crate) fn positions(&self, key: &EncodedKey<'_>) -> Positions {
        let digest = self.digest(key.as_bytes());
        let mut words = [0u64; 4];
        for (word, chunk) in words.iter_mut().zip(digest.chunks_exact(8)) {
            let mut bytes = [0u8; 8];
            bytes.copy_from_slice(chunk);
            *word = match self.rule {
                #[expect(
                    clippy::big_endian_bytes,
                    reason = "the reference article's rule reads big-endian words"
                )]
                PositionRule::Sha256Split4 => u64::from_be_bytes(bytes),
                PositionRule::Sha256Double => u64::from_le_bytes(bytes),
            };
        }
        Positions {
            words,
            split4: self.rule == PositionRule::Sha256Split4,
            bits: self.bits,
            next: 0,
            len: self.hashes,
        }
    }
}

/// The `k` bit positions of one key, in rule order. Created by
/// [`FilterConfig::positions`](crate::FilterConfig::positions).
#[derive(Clone, Debug)]
pub struct Positions {
    /// The digest as four words: big-endian for split4, little-endian for double hashing,
    /// where words 0 and 1 are the running `a` and `b`.
    words: [u64; 4],
    split4: bool,
    bits: u64,
    next: u32,
    len: u32,
}

impl Iterator for Positions {
    type Item = u64;

    #[inline]
    fn next(&mut self) -> Option<u64> {
        if self.next >= self.len {
            return None;
        }
        let i = self.next;
        self.next += 1;
        let [a, b, ..] = &mut self.words;
        Some(if self.split4 {
            // k <= 4 is enforced by FilterConfig for this rule.
            self.words.get(i as usize).copied().unwrap_or(0) % self.bits
        } else {
            let position = reduce(*a, self.bits);
            *a = a.wrapping_add(*b);
            *b = b.wrapping_add(u64::from(i) + 1);
            position
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = (self.len - self.next) as usize;
        (left, Some(left))
    }
}

impl ExactSizeIterator for Positions {}

/// Maps `x` uniformly onto `[0, m)`: `floor(x * m / 2^64)`.
#[inline]
fn reduce(x: u64, m: u64) -> u64 {
    // x < 2^64, so x * m / 2^64 < m, which fits in u64.
    ((u128::from(x) * u128::from(m)) >> 64) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_pinned() {
        let ids: Vec<(u16, &str)> = PositionRule::ALL
            .iter()
            .map(|r| (r.id().value(), r.name()))
            .collect();
        assert_eq!(ids, [(1, "sha256-split4"), (2, "sha256-double")]);
        for r in PositionRule::ALL {
            assert_eq!(PositionRule::from_id(r.id()), Some(r));
            assert_eq!(r.name().parse::<PositionRule>(), Ok(r));
        }
        // Every rule the format knows is implemented here.
        for &id in PositionRuleId::ALL {
            assert_eq!(PositionRule::from_id(id).map(PositionRule::id), Some(id));
        }
        assert_eq!(PositionRule::default(), PositionRule::Sha256Double);
    }

    #[test]
    fn reduce_stays_in_range_at_the_extremes() {
        for m in [1, 2, 63, 1 << 32, (1 << 32) + 1, 1 << 43, u64::MAX] {
            assert!(reduce(u64::MAX, m) < m);
            assert_eq!(reduce(0, m), 0);
        }
        // Values above 2^32 are reachable: positions are not computed in 32 bits.
        assert_eq!(reduce(u64::MAX, 1 << 41), (1 << 41) - 1);
    }

    #[test]
    fn double_hashing_follows_the_documented_recurrence() {
        let hasher = PositionHasher::new(PositionRule::Sha256Double, 1 << 40, 8, &Salt::none());
        let key = EncodedKey::from_encoded(b"record-1");
        let digest: [u8; 32] = Sha256::digest(b"record-1").into();
        let h1 = u64::from_le_bytes(digest[0..8].try_into().unwrap());
        let h2 = u64::from_le_bytes(digest[8..16].try_into().unwrap());
        let expected: Vec<u64> = (0..8u64)
            .map(|i| {
                let tetra = (i * i * i - i) / 6;
                let a = h1.wrapping_add(i.wrapping_mul(h2)).wrapping_add(tetra);
                ((u128::from(a) * (1u128 << 40)) >> 64) as u64
            })
            .collect();
        assert_eq!(hasher.positions(&key).collect::<Vec<_>>(), expected);
    }

    #[test]
    fn salt_changes_positions_and_is_bounded() {
        let key = EncodedKey::from_encoded(b"record-1");
        let plain = PositionHasher::new(PositionRule::Sha256Double, 1 << 20, 7, &Salt::none());
        let salt = Salt::new(b"0123456789abcdef").unwrap();
        let salted = PositionHasher::new(PositionRule::Sha256Double, 1 << 20, 7, &salt);
        assert_ne!(
            plain.positions(&key).collect::<Vec<_>>(),
            salted.positions(&key).collect::<Vec<_>>()
        );
        // The salted digest is SHA-256 over the 64-byte prefix block and the key.
        let mut block = vec![16u8];
        block.extend_from_slice(b"0123456789abcdef");
        block.resize(64, 0);
        block.extend_from_slice(b"record-1");
        assert_eq!(
            salted.digest(b"record-1"),
            <[u8; 32]>::from(Sha256::digest(&block))
        );
        assert_eq!(Salt::new(&[0; 33]), Err(SaltTooLong { found: 33 }));
        assert_eq!(format!("{salt:?}"), "Salt(<16 secret bytes>)");
        assert!(
            !format!(
                "{:?}",
                crate::FilterConfig::new(crate::FilterParams::new(8, 1).unwrap())
                    .with_salt(salt.clone())
            )
            .contains("0123")
        );
        assert_eq!(format!("{:?}", Salt::none()), "Salt(none)");
        let a = Salt::random().unwrap();
        let b = Salt::random().unwrap();
        assert_eq!(a.as_bytes().len(), Salt::MAX_LEN);
        assert_ne!(a, b);
    }
}
