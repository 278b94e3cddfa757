//! The probes and inserts a [`Kernel`](super::Kernel) runs, written once as generic code for
//! each configuration it compiles: the portable kernels are these functions, and the AVX2
//! ones (`avx2.rs`) are the same functions compiled for AVX2.

use crate::encoding::EncodedKey;
use crate::position::{Block, KeyHash, PositionHasher, split};
use crate::probe::{self, BitsRef, line, line_mut, set_bit, test_bit};

/// An unsalted 64-bit hash a split-block kernel is compiled for.
pub(super) trait SplitHash {
    /// The 64-bit hash whose upper half picks the block and lower half the bits.
    fn hash(key: &[u8]) -> u64;
}

/// `xxh64`, seed 0.
pub(super) struct Xxh64;

impl SplitHash for Xxh64 {
    #[inline(always)]
    fn hash(key: &[u8]) -> u64 {
        xxhash_rust::xxh64::xxh64(key, 0)
    }
}

/// `xxh3-64`, seed 0 (the default secret).
pub(super) struct Xxh3_64;

impl SplitHash for Xxh3_64 {
    #[inline(always)]
    fn hash(key: &[u8]) -> u64 {
        super::xxh3_ascii::xxh3_64(key)
    }
}

/// `xxh3-128`, seed 0: its low 64 bits (`h1`).
pub(super) struct Xxh3_128Low;

impl SplitHash for Xxh3_128Low {
    #[inline(always)]
    fn hash(key: &[u8]) -> u64 {
        xxhash_rust::xxh3::xxh3_128(key) as u64
    }
}

// The split-block kernels take no hasher: an unsalted split-block rule places a key by its
// hash and the number of blocks alone, and the blocks are those of the words they are given
// (`split::contains_hash`), all of a filter's.

/// Whether every bit of the encoded key `key` is set: the split-block probe, hash included.
#[inline(always)]
pub(super) fn split_contains<H: SplitHash, const WIDE: bool>(words: &[u64], key: &[u8]) -> bool {
    split_contains_hash::<H, WIDE>(words, H::hash(key))
}

/// Sets the bits of `key`; returns whether one was clear.
#[inline(always)]
pub(super) fn split_insert<H: SplitHash, const WIDE: bool>(words: &mut [u64], key: &[u8]) -> bool {
    split_insert_hash::<H, WIDE>(words, H::hash(key))
}

/// [`split_contains`] for a key already hashed: `h` is the 64-bit hash the unsalted
/// split-block rules place it with, its [`KeyHash`]'s first word (`H` is the kernel's, unused
/// here).
#[inline(always)]
pub(super) fn split_contains_hash<H: SplitHash, const WIDE: bool>(words: &[u64], h: u64) -> bool {
    split::contains_hash(words, WIDE, h)
}

/// [`split_insert`] for a key already hashed.
#[inline(always)]
pub(super) fn split_insert_hash<H: SplitHash, const WIDE: bool>(words: &mut [u64], h: u64) -> bool {
    split::insert_hash(words, WIDE, h)
}

/// [`split_insert_hash`] of each of a batch of hashed keys, in order; returns how many
/// changed a bit.
#[inline(always)]
pub(super) fn split_insert_hashes<H: SplitHash, const WIDE: bool>(
    words: &mut [u64],
    hashes: &[KeyHash],
) -> u64 {
    insert_hashes_with(words, hashes, split_insert_hash::<H, WIDE>)
}

/// Inserts each of a batch of hashed keys with `insert` (a split-block kernel's one-key
/// insert of a 64-bit hash), in order; returns how many changed a bit.
#[inline(always)]
pub(super) fn insert_hashes_with(
    words: &mut [u64],
    hashes: &[KeyHash],
    insert: impl Fn(&mut [u64], u64) -> bool,
) -> u64 {
    let mut changed = 0;
    for &hash in hashes {
        changed += u64::from(insert(words, hash.first()));
    }
    changed
}

/// [`split_contains_hash`] of each of a batch of hashed keys, answered in order into
/// `answers` (as many as there are hashes).
#[inline(always)]
pub(super) fn split_contains_hashes<H: SplitHash, const WIDE: bool>(
    words: &[u64],
    hashes: &[KeyHash],
    answers: &mut [bool],
) {
    for (answer, &hash) in answers.iter_mut().zip(hashes) {
        *answer = split_contains_hash::<H, WIDE>(words, hash.first());
    }
}

/// Asks for the line of each of a batch of hashed keys, so that the probes or writes of the
/// batch find them in the cache. Portable code has no prefetch instruction: it reads one
/// word of each line (a load the CPU must finish before it retires, so less of the work
/// after it overlaps the misses than after a prefetch, which `avx2.rs` issues).
#[inline(always)]
pub(super) fn split_prefetch_hashes<H: SplitHash, const WIDE: bool>(
    words: &[u64],
    hashes: &[KeyHash],
) {
    let mut folded = 0;
    for &hash in hashes {
        let first = split::first_word(words.len(), WIDE, hash.first());
        folded ^= first.and_then(|i| words.get(i)).copied().unwrap_or(0);
    }
    std::hint::black_box(folded);
}

/// The blocked probe of an unsalted `xxh3-128` filter of `K` bits per key.
#[inline]
pub(super) fn blocked_contains<const K: usize>(
    hasher: &PositionHasher,
    words: &[u64],
    key: &[u8],
) -> bool {
    blocked_contains_at::<K>(words, hasher.unsalted_xxh3_block(key))
}

/// [`blocked_contains`], setting the bits; returns whether one was clear.
#[inline]
pub(super) fn blocked_insert<const K: usize>(
    hasher: &PositionHasher,
    words: &mut [u64],
    key: &[u8],
) -> bool {
    blocked_insert_at::<K>(words, hasher.unsalted_xxh3_block(key))
}

/// [`blocked_contains`] for a key already hashed.
#[inline]
pub(super) fn blocked_contains_hash<const K: usize>(
    hasher: &PositionHasher,
    words: &[u64],
    hash: KeyHash,
) -> bool {
    blocked_contains_at::<K>(words, hasher.blocked_at(hash))
}

/// [`blocked_insert`] for a key already hashed.
#[inline]
pub(super) fn blocked_insert_hash<const K: usize>(
    hasher: &PositionHasher,
    words: &mut [u64],
    hash: KeyHash,
) -> bool {
    blocked_insert_at::<K>(words, hasher.blocked_at(hash))
}

/// Whether the `K` bits of a key's place `block` are all set.
#[inline(always)]
fn blocked_contains_at<const K: usize>(words: &[u64], block: Block) -> bool {
    let Some(line) = line(words, block) else {
        return false;
    };
    let mut all = true;
    block.each_bit_unrolled::<K>(|word, bit| all &= test_bit(line, word, bit));
    all
}

/// Sets the `K` bits of a key's place `block`; returns whether one was clear.
#[inline(always)]
fn blocked_insert_at<const K: usize>(words: &mut [u64], block: Block) -> bool {
    let mut changed = false;
    if let Some(line) = line_mut(words, block) {
        block.each_bit_unrolled::<K>(|word, bit| changed |= set_bit(line, word, bit));
    }
    changed
}

/// Every other configuration: the rule's hash, then the layout's probe.
#[inline(never)]
pub(super) fn general_contains(hasher: &PositionHasher, words: &[u64], key: &[u8]) -> bool {
    BitsRef::Plain(words).contains(hasher, hasher.hash(&EncodedKey::from_encoded(key)))
}

/// [`general_contains`], setting the bits.
#[inline(never)]
pub(super) fn general_insert(hasher: &PositionHasher, words: &mut [u64], key: &[u8]) -> bool {
    probe::set_plain(words, hasher, hasher.hash(&EncodedKey::from_encoded(key)))
}

/// [`general_contains`] for a key already hashed.
#[inline(never)]
pub(super) fn general_contains_hash(hasher: &PositionHasher, words: &[u64], hash: KeyHash) -> bool {
    BitsRef::Plain(words).contains(hasher, hash)
}

/// [`general_insert`] for a key already hashed.
#[inline(never)]
pub(super) fn general_insert_hash(
    hasher: &PositionHasher,
    words: &mut [u64],
    hash: KeyHash,
) -> bool {
    probe::set_plain(words, hasher, hash)
}
