//! The one-key probe and insert of a plain filter, compiled once per configuration.

use crate::batch::{BitsMut, BitsRef, line, line_mut, set_bit, set_split, test_bit};
use crate::encoding::EncodedKey;
use crate::layout::Layout;
use crate::position::{PositionHasher, PositionRule};

/// An unsalted 64-bit hash a split-block kernel is compiled for.
trait SplitHash {
    /// The 64-bit hash whose upper half picks the block and lower half the bits.
    fn hash(key: &[u8]) -> u64;
}

/// `xxh64`, seed 0.
struct Xxh64;

impl SplitHash for Xxh64 {
    #[inline(always)]
    fn hash(key: &[u8]) -> u64 {
        xxhash_rust::xxh64::xxh64(key, 0)
    }
}

/// `xxh3-64`, seed 0 (the default secret).
struct Xxh3_64;

impl SplitHash for Xxh3_64 {
    #[inline(always)]
    fn hash(key: &[u8]) -> u64 {
        xxhash_rust::xxh3::xxh3_64(key)
    }
}

/// `xxh3-128`, seed 0: its low 64 bits (`h1`).
struct Xxh3_128Low;

impl SplitHash for Xxh3_128Low {
    #[inline(always)]
    fn hash(key: &[u8]) -> u64 {
        xxhash_rust::xxh3::xxh3_128(key) as u64
    }
}

/// A plain filter's one-key probe and insert, chosen once, when the filter is made.
///
/// For an unsalted `xxh3-128` filter with the blocked layout and one of the planner's usual
/// k, and for an unsalted split-block filter of `xxh64`, `xxh3-64` or `xxh3-128`, they are
/// compiled for that configuration: a call hashes with the seed folded in, finds
/// the block and tests or sets k bits in straight-line code, with no rule, layout or k to
/// dispatch on. Every other configuration takes the general code. Both place every key
/// exactly where [`PositionHasher::each_position`] does (`tests/insert_law.rs`,
/// `compiled_probes_test_and_set_exactly_the_specified_positions`).
#[derive(Clone, Copy)]
pub(crate) struct Kernel {
    // Keys as bytes: the compiled probes read no `EncodedKey` variant.
    contains: fn(&PositionHasher, &[u64], &[u8]) -> bool,
    insert: fn(&PositionHasher, &mut [u64], &[u8]) -> bool,
}

impl Kernel {
    pub(crate) fn new(hasher: &PositionHasher) -> Self {
        match hasher.unsalted_split() {
            Some((PositionRule::Xxh64, Layout::SplitBlock256)) => {
                return Self::split::<Xxh64, false>();
            }
            Some((PositionRule::Xxh64, _)) => return Self::split::<Xxh64, true>(),
            Some((PositionRule::Xxh3_64, Layout::SplitBlock256)) => {
                return Self::split::<Xxh3_64, false>();
            }
            Some((PositionRule::Xxh3_64, _)) => return Self::split::<Xxh3_64, true>(),
            Some((_, Layout::SplitBlock256)) => return Self::split::<Xxh3_128Low, false>(),
            Some(_) => return Self::split::<Xxh3_128Low, true>(),
            None => {}
        }
        match hasher.unsalted_xxh3_blocked_k() {
            Some(6) => Self::xxh3_blocked::<6>(),
            Some(7) => Self::xxh3_blocked::<7>(),
            Some(8) => Self::xxh3_blocked::<8>(),
            Some(10) => Self::xxh3_blocked::<10>(),
            _ => Self {
                contains: |hasher, words, key| {
                    let hash = hasher.hash(&EncodedKey::from_encoded(key));
                    BitsRef::Plain(words).contains(hasher, hash)
                },
                insert: |hasher, words, key| {
                    words.insert_key(hasher, hasher.hash(&EncodedKey::from_encoded(key)))
                },
            },
        }
    }

    fn xxh3_blocked<const K: usize>() -> Self {
        Self {
            contains: |hasher, words, key| {
                let block = hasher.unsalted_xxh3_block(key);
                let Some(line) = line(words, block) else {
                    return false;
                };
                let mut all = true;
                block.each_bit_unrolled::<K>(|word, bit| all &= test_bit(line, word, bit));
                all
            },
            insert: |hasher, words, key| {
                let block = hasher.unsalted_xxh3_block(key);
                let mut changed = false;
                if let Some(line) = line_mut(words, block) {
                    block.each_bit_unrolled::<K>(|word, bit| changed |= set_bit(line, word, bit));
                }
                changed
            },
        }
    }

    /// The split-block kernel for the unsalted hash `H`, 512-bit blocks when `WIDE`.
    fn split<H: SplitHash, const WIDE: bool>() -> Self {
        Self {
            contains: |hasher, words, key| {
                BitsRef::Plain(words).contains_split(WIDE, hasher.split_at(H::hash(key)))
            },
            insert: |hasher, words, key| set_split(words, WIDE, hasher.split_at(H::hash(key))),
        }
    }

    /// Whether every bit of an encoded key is set in `words`.
    #[inline]
    pub(crate) fn contains(
        self,
        hasher: &PositionHasher,
        words: &[u64],
        key: &EncodedKey<'_>,
    ) -> bool {
        (self.contains)(hasher, words, key.as_bytes())
    }

    /// Sets the bits of an encoded key; returns whether one was clear.
    #[inline]
    pub(crate) fn insert(
        self,
        hasher: &PositionHasher,
        words: &mut [u64],
        key: &EncodedKey<'_>,
    ) -> bool {
        (self.insert)(hasher, words, key.as_bytes())
    }
}

/// Names the kernel, never the hasher's state.
impl std::fmt::Debug for Kernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Kernel(..)")
    }
}
