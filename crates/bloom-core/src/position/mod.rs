//! Position rules: how an encoded key becomes `k` bit positions in `[0, m)`.
//!
//! Positions come only from a hash defined byte for byte (SHA-256, XXH3-128, or Guava's
//! murmur3 x64 128-bit) over the encoded key (optionally behind a secret salt), never from
//! `std::hash` or any per-process random state, so every process, machine and release
//! computes the same positions.

mod rule;
mod salt;
mod sha256;
pub(crate) mod split;
mod walk;

use std::fmt;

use crate::encoding::EncodedKey;
use crate::layout::{BLOCK_BITS, Layout};
use crate::params::MAX_HASHES;

pub use rule::PositionRule;
pub use salt::{RandomSaltError, Salt, SaltTooLong};
use sha256::{SHA256_H0, sha256_state};
pub(crate) use split::Split;

/// Computes positions for one filter configuration; the salted SHA-256 state (or the XXH3
/// seed) is prepared once.
#[derive(Clone)]
pub(crate) struct PositionHasher {
    rule: PositionRule,
    layout: Layout,
    bits: u64,
    hashes: u32,
    /// Blocks of the blocked layout (`m / 512`), or shards of the sharded one.
    blocks: u64,
    /// The SHA-256 state after the salt block, or the initial state without a salt.
    start: [u32; 8],
    /// Bytes absorbed into `start`: 64 with a salt, 0 without.
    absorbed: u64,
    /// The XXH3 seed: 0 without a salt.
    seed: u64,
}

/// The SHA-256 state after the salt block (and the XXH3 seed made from it) are as secret as
/// the salt: with them, anyone can compute where any key lands. They are never shown.
impl fmt::Debug for PositionHasher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PositionHasher")
            .field("rule", &self.rule)
            .field("layout", &self.layout)
            .field("bits", &self.bits)
            .field("hashes", &self.hashes)
            .field("salted", &(self.absorbed != 0))
            .finish_non_exhaustive()
    }
}

/// The odd multiplier that steps from one in-block position to the next (the 64-bit golden
/// ratio, as in RocksDB's cache-local Bloom filter).
const BLOCK_STEP: u64 = 0x9E37_79B9_7F4A_7C15;

impl PositionHasher {
    pub(crate) fn new(
        rule: PositionRule,
        layout: Layout,
        bits: u64,
        hashes: u32,
        salt: &Salt,
    ) -> Self {
        let (start, absorbed) = if salt.is_empty() {
            (SHA256_H0, 0)
        } else {
            let mut state = SHA256_H0;
            sha2::block_api::compress256(&mut state, &[salt.prefix_block()]);
            (state, 64)
        };
        let seed = if salt.is_empty() {
            0
        } else {
            // The salted SHA-256 of the empty key: its first 8 bytes, little-endian.
            let digest = sha256_state(start, absorbed, &[]);
            u64::from(digest[0].swap_bytes()) | (u64::from(digest[1].swap_bytes()) << 32)
        };
        Self {
            rule,
            layout,
            bits,
            hashes,
            // Blocks of the blocked layout; shards of the sharded one.
            blocks: match layout {
                Layout::Sharded { shards } | Layout::ShardedV2 { shards } => u64::from(shards),
                Layout::SplitBlock256 => bits / 256,
                Layout::Standard | Layout::Blocked512 | Layout::SplitBlock512 => bits / BLOCK_BITS,
            },
            start,
            absorbed,
            seed,
        }
    }

    /// The SHA-256 state words of the (salted) key: the digest is their big-endian bytes.
    #[inline]
    fn digest_words(&self, key: &[u8]) -> [u32; 8] {
        sha256_state(self.start, self.absorbed, key)
    }

    /// Hashes a key: the one hash computation behind all of its positions.
    #[inline(always)]
    pub(crate) fn hash(&self, key: &EncodedKey<'_>) -> KeyHash {
        let key = key.as_bytes();
        match self.rule {
            PositionRule::Xxh3_128 => {
                let h = xxhash_rust::xxh3::xxh3_128_with_seed(key, self.seed);
                KeyHash([h as u64, (h >> 64) as u64, 0, 0])
            }
            PositionRule::Sha256Split4 => self.sha256_hash(key, true),
            PositionRule::Sha256Double => self.sha256_hash(key, false),
            PositionRule::GuavaMitz64 | PositionRule::GuavaMitz32 => murmur3_hash(key),
            PositionRule::Xxh64 => KeyHash::of_u64(xxhash_rust::xxh64::xxh64(key, self.seed)),
            PositionRule::Xxh3_64 => {
                KeyHash::of_u64(xxhash_rust::xxh3::xxh3_64_with_seed(key, self.seed))
            }
        }
    }

    /// The SHA-256 rules' hash, out of line: the digest dwarfs a call, and keeping it apart
    /// lets the XXH3 path inline into every probe.
    #[inline(never)]
    fn sha256_hash(&self, key: &[u8], split4: bool) -> KeyHash {
        let s = self.digest_words(key);
        if split4 {
            // Four big-endian 8-byte words: pairs of state words.
            let word = |hi: u32, lo: u32| (u64::from(hi) << 32) | u64::from(lo);
            KeyHash([
                word(s[0], s[1]),
                word(s[2], s[3]),
                word(s[4], s[5]),
                word(s[6], s[7]),
            ])
        } else {
            // Little-endian 8-byte words: the pairs of state words byte-swapped.
            let word =
                |hi: u32, lo: u32| u64::from(hi.swap_bytes()) | (u64::from(lo.swap_bytes()) << 32);
            KeyHash([word(s[0], s[1]), word(s[2], s[3]), 0, 0])
        }
    }

    /// For the blocked layout, a hashed key's block (the index of its first word) and its
    /// bits inside the block, `(word, bit)` with `word < 8` and `bit < 64`, passed to `visit`:
    /// the same positions as [`PositionHasher::each_position`], addressed within the one
    /// cache line so that no probe needs a bounds check. `None` for the standard layout.
    #[inline(always)]
    pub(crate) fn block_of(&self, hash: KeyHash) -> Option<Block> {
        if self.layout != Layout::Blocked512 {
            return None;
        }
        let [h1, h2, ..] = hash.0;
        Some(self.block_at(h1, h2))
    }

    /// [`PositionHasher::block_of`] for a filter known to have the blocked layout (a compiled
    /// kernel's).
    #[inline(always)]
    pub(crate) fn blocked_at(&self, hash: KeyHash) -> Block {
        let [h1, h2, ..] = hash.0;
        self.block_at(h1, h2)
    }

    /// The blocked layout's block for the hash words `h1` (which block) and `h2` (its bits).
    #[inline(always)]
    fn block_at(&self, h1: u64, h2: u64) -> Block {
        // A block index is below m / 512, and a filter exists only when m / 64 fits usize.
        Block {
            first_word: (reduce(h1, self.blocks) as usize) * 8,
            bits: h2,
            hashes: self.hashes,
        }
    }

    /// For the split-block layouts, a hashed key's block and the hash bits that name its bit
    /// in each word; `None` for the other layouts.
    #[inline(always)]
    pub(crate) fn split_of(&self, hash: KeyHash) -> Option<Split> {
        self.is_split().then(|| self.split_at(hash.0[0]))
    }

    /// The number of bits `m` keys are placed among.
    #[inline(always)]
    pub(crate) fn bits(&self) -> u64 {
        self.bits
    }

    /// Whether the layout is a split-block one.
    #[inline(always)]
    pub(crate) fn is_split(&self) -> bool {
        self.layout.split_block_bits().is_some()
    }

    /// Whether the split-block layout has 512-bit blocks.
    #[inline(always)]
    pub(crate) fn wide_split(&self) -> bool {
        self.layout == Layout::SplitBlock512
    }

    /// The split-block place of the 64-bit hash `h`.
    #[inline(always)]
    pub(crate) fn split_at(&self, h: u64) -> Split {
        Split::of(h, self.blocks, self.wide_split())
    }

    /// The split-block layout and unsalted rule of a filter whose keys can be placed by a
    /// compiled kernel (`xxh64`, `xxh3-64` or `xxh3-128` with seed 0), or `None`.
    pub(crate) fn unsalted_split(&self) -> Option<(PositionRule, Layout)> {
        (self.seed == 0
            && self.absorbed == 0
            && self.layout.split_block_bits().is_some()
            && matches!(
                self.rule,
                PositionRule::Xxh64 | PositionRule::Xxh3_64 | PositionRule::Xxh3_128
            ))
        .then_some((self.rule, self.layout))
    }

    /// The `k` of an unsalted `xxh3-128` filter with the blocked layout, whose keys can be
    /// placed by [`PositionHasher::unsalted_xxh3_block`]; `None` for any other configuration.
    pub(crate) fn unsalted_xxh3_blocked_k(&self) -> Option<u32> {
        (self.rule == PositionRule::Xxh3_128 && self.layout == Layout::Blocked512 && self.seed == 0)
            .then_some(self.hashes)
    }

    /// [`PositionHasher::block_of`] the hash of `key` when
    /// [`PositionHasher::unsalted_xxh3_blocked_k`] is `Some`: the same block and bits, with
    /// the seed (0) folded into the hash at compile time and no rule or layout to dispatch on.
    #[inline(always)]
    pub(crate) fn unsalted_xxh3_block(&self, key: &[u8]) -> Block {
        // XXH3-128 with seed 0 is XXH3-128 with the default secret (xxHash 0.8 specification).
        let h = xxhash_rust::xxh3::xxh3_128(key);
        self.block_at(h as u64, (h >> 64) as u64)
    }

    pub(crate) fn positions(&self, key: &EncodedKey<'_>) -> Positions {
        let mut positions = Positions {
            buffer: [0; MAX_HASHES as usize],
            len: 0,
            next: 0,
        };
        self.each_position(self.hash(key), |position| {
            if let Some(slot) = positions.buffer.get_mut(positions.len) {
                *slot = position;
                positions.len += 1;
            }
        });
        positions
    }
}

/// A key's place in the blocked layout: its block's first word, and the generator of its
/// in-block bits.
#[derive(Clone, Copy)]
pub(crate) struct Block {
    pub(crate) first_word: usize,
    bits: u64,
    hashes: u32,
}

impl Block {
    /// Calls `visit(word, bit)` for each of the key's `k` bits in the block, in rule order:
    /// the bit is the top 9 bits of `h2 * C^i`.
    #[inline(always)]
    pub(crate) fn each_bit(self, mut visit: impl FnMut(usize, u32)) {
        // The planner's usual k (6 at 1%, 9 to 11 at 0.1%) get a loop the compiler unrolls:
        // no loop counter, and the multiplies of the chain scheduled ahead of the loads.
        match self.hashes {
            6 => self.each_bit_unrolled::<6>(visit),
            7 => self.each_bit_unrolled::<7>(visit),
            8 => self.each_bit_unrolled::<8>(visit),
            10 => self.each_bit_unrolled::<10>(visit),
            _ => {
                let mut x = self.bits;
                for _ in 0..self.hashes {
                    let bit = x >> 55;
                    visit((bit >> 6) as usize, (bit & 63) as u32);
                    x = x.wrapping_mul(BLOCK_STEP);
                }
            }
        }
    }

    /// [`Block::each_bit`] for a `k` known at compile time.
    #[inline(always)]
    pub(crate) fn each_bit_unrolled<const K: usize>(self, mut visit: impl FnMut(usize, u32)) {
        let mut x = self.bits;
        for _ in 0..K {
            let bit = x >> 55;
            visit((bit >> 6) as usize, (bit & 63) as u32);
            x = x.wrapping_mul(BLOCK_STEP);
        }
    }
}

/// The 8-byte words of one key's hash, as the key's rule reads them (four for
/// `sha256-split4`, two for the others): everything its positions are computed from.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct KeyHash([u64; 4]);

impl KeyHash {
    /// The hash of a 64-bit rule (`xxh64`, `xxh3-64`), as [`PositionHasher::hash`] gives it.
    #[inline(always)]
    pub(crate) const fn of_u64(h: u64) -> Self {
        Self([h, 0, 0, 0])
    }

    /// The first 8-byte word: the whole hash of the 64-bit rules, the low half of
    /// `xxh3-128`'s.
    #[inline(always)]
    pub(crate) const fn first(self) -> u64 {
        self.0[0]
    }
}

/// A key's digest tells where it lands; like the salted state, it is never shown.
impl fmt::Debug for KeyHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("KeyHash(..)")
    }
}

/// The `k` bit positions of one key, in rule order. Created by
/// [`FilterConfig::positions`](crate::FilterConfig::positions).
#[derive(Clone, Debug)]
pub struct Positions {
    buffer: [u64; MAX_HASHES as usize],
    len: usize,
    next: usize,
}

impl Positions {
    /// The positions not yet returned by the iterator; all `k` of them before the first
    /// `next`.
    #[must_use]
    pub fn as_slice(&self) -> &[u64] {
        self.buffer.get(self.next..self.len).unwrap_or_default()
    }
}

impl Iterator for Positions {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        let position = self.as_slice().first().copied()?;
        self.next += 1;
        Some(position)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.len - self.next;
        (left, Some(left))
    }
}

impl ExactSizeIterator for Positions {}

/// Maps `x` uniformly onto `[0, m)`: `floor(x * m / 2^64)`.
/// murmur3 x64 128-bit of `key` with seed 0, as Guava's `Hashing.murmur3_128()`: its two
/// little-endian 64-bit halves, `h1` first.
#[inline(never)]
fn murmur3_hash(key: &[u8]) -> KeyHash {
    // Reading from a slice cannot fail; the fallback only keeps this total.
    let h = murmur3::murmur3_x64_128(&mut &key[..], 0).unwrap_or_default();
    KeyHash([h as u64, (h >> 64) as u64, 0, 0])
}

#[inline]
fn reduce(x: u64, m: u64) -> u64 {
    // x < 2^64, so x * m / 2^64 < m, which fits in u64.
    ((u128::from(x) * u128::from(m)) >> 64) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use bloom_format::PositionRuleId;
    use sha2::{Digest, Sha256};

    #[test]
    fn ids_are_pinned() {
        let ids: Vec<(u16, &str)> = PositionRule::ALL
            .iter()
            .map(|r| (r.id().value(), r.name()))
            .collect();
        assert_eq!(
            ids,
            [
                (1, "sha256-split4"),
                (2, "sha256-double"),
                (3, "xxh3-128"),
                (4, "guava-mitz64"),
                (5, "guava-mitz32"),
                (6, "xxh64"),
                (7, "xxh3-64")
            ]
        );
        for r in PositionRule::ALL {
            assert_eq!(PositionRule::from_id(r.id()), Some(r));
            assert_eq!(r.name().parse::<PositionRule>(), Ok(r));
        }
        // Every rule the format knows is implemented here.
        for &id in PositionRuleId::ALL {
            assert_eq!(PositionRule::from_id(id).map(PositionRule::id), Some(id));
        }
        assert_eq!(PositionRule::default(), PositionRule::Xxh3_128);
        assert!(!PositionRule::Sha256Split4.supports(Layout::Blocked512));
        assert!(PositionRule::Xxh3_128.supports(Layout::Blocked512));
    }

    #[expect(
        clippy::big_endian_bytes,
        reason = "a SHA-256 digest is its state words big-endian"
    )]
    fn digest_bytes(hasher: &PositionHasher, key: &[u8]) -> [u8; 32] {
        let mut out = [0u8; 32];
        for (chunk, word) in out.chunks_exact_mut(4).zip(hasher.digest_words(key)) {
            chunk.copy_from_slice(&word.to_be_bytes());
        }
        out
    }

    #[test]
    fn the_block_level_digest_equals_sha256_for_every_length() {
        let plain = PositionHasher::new(
            PositionRule::Sha256Double,
            Layout::Standard,
            64,
            1,
            &Salt::default(),
        );
        let salt = Salt::new(b"a salt").unwrap();
        let salted =
            PositionHasher::new(PositionRule::Sha256Double, Layout::Standard, 64, 1, &salt);
        let mut prefix = vec![6u8];
        prefix.extend_from_slice(b"a salt");
        prefix.resize(64, 0);
        let data: Vec<u8> = (0..=300u32).map(|i| (i * 7 + 3) as u8).collect();
        // Covers 0, the 55/56 and 63/64 padding boundaries, and several full blocks.
        for len in 0..=data.len() {
            let key = &data[..len];
            assert_eq!(
                digest_bytes(&plain, key),
                <[u8; 32]>::from(Sha256::digest(key)),
                "length {len}"
            );
            let mut with_prefix = prefix.clone();
            with_prefix.extend_from_slice(key);
            assert_eq!(
                digest_bytes(&salted, key),
                <[u8; 32]>::from(Sha256::digest(&with_prefix)),
                "salted, length {len}"
            );
        }
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
        let hasher = PositionHasher::new(
            PositionRule::Sha256Double,
            Layout::Standard,
            1 << 40,
            8,
            &Salt::default(),
        );
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
        let plain = PositionHasher::new(
            PositionRule::Sha256Double,
            Layout::Standard,
            1 << 20,
            7,
            &Salt::default(),
        );
        let salt = Salt::new(b"0123456789abcdef").unwrap();
        let salted = PositionHasher::new(
            PositionRule::Sha256Double,
            Layout::Standard,
            1 << 20,
            7,
            &salt,
        );
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
            digest_bytes(&salted, b"record-1"),
            <[u8; 32]>::from(Sha256::digest(&block))
        );
        assert_eq!(Salt::new(&[0; 33]), Err(SaltTooLong { found: 33 }));
        assert_eq!(format!("{salt:?}"), "Salt(<16 secret bytes>)");
        assert!(
            !format!(
                "{:?}",
                crate::FilterConfig::new(crate::FilterParams::new(8, 1).unwrap())
                    .with_salt(salt.clone())
                    .unwrap()
            )
            .contains("0123")
        );
        assert_eq!(format!("{:?}", Salt::default()), "Salt(none)");
        let a = Salt::random().unwrap();
        let b = Salt::random().unwrap();
        assert_eq!(a.as_bytes().len(), Salt::MAX_LEN);
        assert_ne!(a, b);
    }
}
