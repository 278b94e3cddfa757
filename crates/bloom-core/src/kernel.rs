//! The one-key probe and insert of a plain filter, compiled once per configuration.

use crate::batch::{BitsMut, BitsRef, line, line_mut, set_bit, test_bit};
use crate::encoding::EncodedKey;
use crate::layout::Layout;
use crate::position::{KeyHash, PositionHasher, PositionRule, Split, split};

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
///
/// The functions are `unsafe fn` pointers only so that a function compiled for AVX2 can be
/// one of them without a wrapper: every one is a safe function, except the AVX2 ones, which
/// [`Kernel::split`] stores only after detecting AVX2 (the one `unsafe` of the crate, in
/// [`Kernel::contains`] and [`Kernel::insert`]).
///
/// Each also comes in a form that takes the key's hash ([`PositionHasher::hash`]) instead of
/// the key, compiled alike: the stages of a scalable filter share rule and salt, so a chain
/// hashes a key once and probes each stage with its own kernel.
#[derive(Clone, Copy)]
pub(crate) struct Kernel {
    // Keys as bytes: the compiled probes read no `EncodedKey` variant.
    contains: unsafe fn(&PositionHasher, &[u64], &[u8]) -> bool,
    insert: unsafe fn(&PositionHasher, &mut [u64], &[u8]) -> bool,
    contains_hash: unsafe fn(&PositionHasher, &[u64], &KeyHash) -> bool,
    insert_hash: unsafe fn(&PositionHasher, &mut [u64], &KeyHash) -> bool,
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
                contains_hash: |hasher, words, hash| BitsRef::Plain(words).contains(hasher, *hash),
                insert_hash: |hasher, words, hash| words.insert_key(hasher, *hash),
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
            contains_hash: |hasher, words, hash| {
                let block = hasher.blocked_at(*hash);
                let Some(line) = line(words, block) else {
                    return false;
                };
                let mut all = true;
                block.each_bit_unrolled::<K>(|word, bit| all &= test_bit(line, word, bit));
                all
            },
            insert_hash: |hasher, words, hash| {
                let block = hasher.blocked_at(*hash);
                let mut changed = false;
                if let Some(line) = line_mut(words, block) {
                    block.each_bit_unrolled::<K>(|word, bit| changed |= set_bit(line, word, bit));
                }
                changed
            },
        }
    }

    /// The split-block kernel for the unsalted hash `H`, 512-bit blocks when `WIDE`: compiled
    /// for AVX2 when the CPU has it (the eight lanes of a key's masks in one register), and
    /// for the baseline otherwise. Both are the same safe code, and give the same answers
    /// and bits (`tests::both_split_kernels_place_keys_alike`).
    fn split<H: SplitHash, const WIDE: bool>() -> Self {
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx2") {
            return Self {
                contains: avx2::contains::<H, WIDE>,
                insert: avx2::insert::<H, WIDE>,
                contains_hash: avx2::contains_hash::<WIDE>,
                insert_hash: avx2::insert_hash::<WIDE>,
            };
        }
        Self::portable_split::<H, WIDE>()
    }

    /// [`Kernel::split`] compiled for the baseline CPU.
    fn portable_split<H: SplitHash, const WIDE: bool>() -> Self {
        Self {
            contains: split_contains::<H, WIDE>,
            insert: split_insert::<H, WIDE>,
            contains_hash: split_contains_hash::<WIDE>,
            insert_hash: split_insert_hash::<WIDE>,
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
        // SAFETY: `contains` is a safe function, or one compiled for AVX2 that `Kernel::split`
        // stores only after `is_x86_feature_detected!("avx2")` returned true: this CPU has
        // AVX2. It has no other precondition.
        #[allow(unsafe_code)]
        unsafe {
            (self.contains)(hasher, words, key.as_bytes())
        }
    }

    /// Sets the bits of an encoded key; returns whether one was clear.
    #[inline]
    pub(crate) fn insert(
        self,
        hasher: &PositionHasher,
        words: &mut [u64],
        key: &EncodedKey<'_>,
    ) -> bool {
        // SAFETY: as in `contains`: a safe function, or an AVX2 one stored after detection.
        #[allow(unsafe_code)]
        unsafe {
            (self.insert)(hasher, words, key.as_bytes())
        }
    }

    /// Whether every bit of the key of hash `hash` is set in `words`: as
    /// [`Kernel::contains`] for the key.
    #[inline]
    pub(crate) fn contains_hash(
        self,
        hasher: &PositionHasher,
        words: &[u64],
        hash: KeyHash,
    ) -> bool {
        // SAFETY: as in `contains`: a safe function, or an AVX2 one stored after detection.
        #[allow(unsafe_code)]
        unsafe {
            (self.contains_hash)(hasher, words, &hash)
        }
    }

    /// Sets the bits of the key of hash `hash`; returns whether one was clear: as
    /// [`Kernel::insert`] for the key.
    #[inline]
    pub(crate) fn insert_hash(
        self,
        hasher: &PositionHasher,
        words: &mut [u64],
        hash: KeyHash,
    ) -> bool {
        // SAFETY: as in `contains`: a safe function, or an AVX2 one stored after detection.
        #[allow(unsafe_code)]
        unsafe {
            (self.insert_hash)(hasher, words, &hash)
        }
    }
}

/// Names the kernel, never the hasher's state.
impl std::fmt::Debug for Kernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Kernel(..)")
    }
}

/// Whether every bit of key `key` is set: the split-block probe of one key, hash included.
#[inline(always)]
fn split_contains<H: SplitHash, const WIDE: bool>(
    hasher: &PositionHasher,
    words: &[u64],
    key: &[u8],
) -> bool {
    split::contains(words, WIDE, Split::of(H::hash(key), hasher.blocks(), WIDE))
}

/// Sets the bits of `key`; returns whether one was clear.
#[inline(always)]
fn split_insert<H: SplitHash, const WIDE: bool>(
    hasher: &PositionHasher,
    words: &mut [u64],
    key: &[u8],
) -> bool {
    split::insert(words, WIDE, Split::of(H::hash(key), hasher.blocks(), WIDE))
}

/// [`split_contains`] for a key already hashed: its hash's first word is the 64-bit hash the
/// unsalted split-block rules place it with.
#[inline(always)]
fn split_contains_hash<const WIDE: bool>(
    hasher: &PositionHasher,
    words: &[u64],
    hash: &KeyHash,
) -> bool {
    split::contains(words, WIDE, Split::of(hash.first(), hasher.blocks(), WIDE))
}

/// [`split_insert`] for a key already hashed.
#[inline(always)]
fn split_insert_hash<const WIDE: bool>(
    hasher: &PositionHasher,
    words: &mut [u64],
    hash: &KeyHash,
) -> bool {
    split::insert(words, WIDE, Split::of(hash.first(), hasher.blocks(), WIDE))
}

/// The split-block kernels compiled for AVX2: the same code as the portable ones, in
/// functions the compiler may vectorize with AVX2 (`vpmulld`, `vpsllvd`: the eight lanes of a
/// key's masks at once). Only [`Kernel::split`] names them, after detecting AVX2.
#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{KeyHash, PositionHasher, SplitHash};

    /// [`super::split_contains`] compiled for AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) fn contains<H: SplitHash, const WIDE: bool>(
        hasher: &PositionHasher,
        words: &[u64],
        key: &[u8],
    ) -> bool {
        super::split_contains::<H, WIDE>(hasher, words, key)
    }

    /// [`super::split_insert`] compiled for AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) fn insert<H: SplitHash, const WIDE: bool>(
        hasher: &PositionHasher,
        words: &mut [u64],
        key: &[u8],
    ) -> bool {
        super::split_insert::<H, WIDE>(hasher, words, key)
    }

    /// [`super::split_contains_hash`] compiled for AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) fn contains_hash<const WIDE: bool>(
        hasher: &PositionHasher,
        words: &[u64],
        hash: &KeyHash,
    ) -> bool {
        super::split_contains_hash::<WIDE>(hasher, words, hash)
    }

    /// [`super::split_insert_hash`] compiled for AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) fn insert_hash<const WIDE: bool>(
        hasher: &PositionHasher,
        words: &mut [u64],
        hash: &KeyHash,
    ) -> bool {
        super::split_insert_hash::<WIDE>(hasher, words, hash)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{FilterParams, Salt};

    #[test]
    fn the_hash_forms_place_keys_as_the_key_forms_do() {
        let configs = [
            (PositionRule::Xxh3_128, Layout::Blocked512, 7),
            (PositionRule::Xxh3_128, Layout::Blocked512, 9),
            (PositionRule::Xxh3_128, Layout::Standard, 7),
            (PositionRule::Xxh3_128, Layout::SplitBlock512, 8),
            (PositionRule::Xxh3_128, Layout::SplitBlock256, 8),
            (PositionRule::Xxh3_64, Layout::SplitBlock512, 8),
            (PositionRule::Xxh64, Layout::SplitBlock256, 8),
            (PositionRule::Sha256Double, Layout::Blocked512, 6),
            (PositionRule::Sha256Split4, Layout::Standard, 4),
        ];
        for (rule, layout, k) in configs {
            for salt in [Salt::default(), Salt::new(b"s").unwrap()] {
                if !salt.is_empty()
                    && !matches!(rule, PositionRule::Xxh3_128 | PositionRule::Sha256Double)
                {
                    continue;
                }
                let params = FilterParams::with_layout(layout, 512 * 13, k).unwrap();
                let hasher = PositionHasher::new(rule, layout, params.bits(), k, &salt);
                let kernel = Kernel::new(&hasher);
                let words = (params.bits() / 64) as usize;
                let (mut by_key, mut by_hash) = (vec![0u64; words], vec![0u64; words]);
                for i in 0..3000u32 {
                    let bytes = i.to_le_bytes();
                    let key = EncodedKey::from_encoded(&bytes);
                    let hash = hasher.hash(&key);
                    assert_eq!(
                        kernel.contains(&hasher, &by_key, &key),
                        kernel.contains_hash(&hasher, &by_hash, hash),
                        "{rule} {layout} k {k}"
                    );
                    assert_eq!(
                        kernel.insert(&hasher, &mut by_key, &key),
                        kernel.insert_hash(&hasher, &mut by_hash, hash)
                    );
                    assert_eq!(by_key, by_hash, "{rule} {layout} k {k}, key {i}");
                }
            }
        }
    }

    #[test]
    fn both_split_kernels_place_keys_alike() {
        for layout in [Layout::SplitBlock256, Layout::SplitBlock512] {
            let params = FilterParams::with_layout(layout, 512 * 61, 8).unwrap();
            let hasher = PositionHasher::new(
                PositionRule::Xxh3_64,
                layout,
                params.bits(),
                8,
                &Salt::default(),
            );
            let portable = Kernel::portable_split::<Xxh3_64, true>();
            let portable = if layout == Layout::SplitBlock256 {
                Kernel::portable_split::<Xxh3_64, false>()
            } else {
                portable
            };
            let selected = Kernel::new(&hasher);
            let words = (params.bits() / 64) as usize;
            let (mut a, mut b) = (vec![0u64; words], vec![0u64; words]);
            for i in 0..5000u32 {
                let key = i.to_le_bytes();
                let key = EncodedKey::from_encoded(&key);
                assert_eq!(
                    portable.contains(&hasher, &a, &key),
                    selected.contains(&hasher, &b, &key)
                );
                assert_eq!(
                    portable.insert(&hasher, &mut a, &key),
                    selected.insert(&hasher, &mut b, &key)
                );
                assert_eq!(a, b, "{layout}, key {i}");
            }
            assert!(a.iter().any(|&w| w != 0));
            #[cfg(target_arch = "x86_64")]
            println!("{layout}: AVX2 {}", std::is_x86_feature_detected!("avx2"));
        }
    }
}
