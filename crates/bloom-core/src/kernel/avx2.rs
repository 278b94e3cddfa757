//! The split-block kernels compiled for AVX2: the same code as the portable ones
//! (`compiled.rs`), in functions the compiler may vectorize with AVX2 (`vpmuludq`,
//! `vpsllvq`: the eight lanes of a key's masks at once). Only a [`Kernel`](super::Kernel)
//! made after detecting AVX2 calls them.

use super::compiled::{self, SplitHash};
use crate::position::{KeyHash, split};

/// [`compiled::split_contains`] compiled for AVX2.
#[target_feature(enable = "avx2")]
pub(super) fn split_contains<H: SplitHash, const WIDE: bool>(words: &[u64], key: &[u8]) -> bool {
    compiled::split_contains::<H, WIDE>(words, key)
}

/// [`compiled::split_insert`] compiled for AVX2.
#[target_feature(enable = "avx2")]
pub(super) fn split_insert<H: SplitHash, const WIDE: bool>(words: &mut [u64], key: &[u8]) -> bool {
    compiled::split_insert::<H, WIDE>(words, key)
}

/// [`compiled::split_contains_hash`] compiled for AVX2.
#[target_feature(enable = "avx2")]
pub(super) fn split_contains_hash<H: SplitHash, const WIDE: bool>(words: &[u64], h: u64) -> bool {
    compiled::split_contains_hash::<H, WIDE>(words, h)
}

/// [`compiled::split_insert_hash`] compiled for AVX2.
#[target_feature(enable = "avx2")]
pub(super) fn split_insert_hash<H: SplitHash, const WIDE: bool>(words: &mut [u64], h: u64) -> bool {
    compiled::split_insert_hash::<H, WIDE>(words, h)
}

/// [`compiled::split_insert_hashes`] compiled for AVX2.
#[target_feature(enable = "avx2")]
pub(super) fn split_insert_hashes<H: SplitHash, const WIDE: bool>(
    words: &mut [u64],
    hashes: &[KeyHash],
) -> u64 {
    compiled::split_insert_hashes::<H, WIDE>(words, hashes)
}

/// [`compiled::split_prefetch_hashes`] with a prefetch instruction for each key's line
/// (`prefetcht0`): unlike a load, it does not hold up the instructions after it until the
/// line arrives, so the work on the batch before overlaps the misses of this one.
#[target_feature(enable = "avx2")]
pub(super) fn split_prefetch_hashes<H: SplitHash, const WIDE: bool>(
    words: &[u64],
    hashes: &[KeyHash],
) {
    use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
    for &hash in hashes {
        if let Some(first) = split::first_word(words.len(), WIDE, hash.first()) {
            _mm_prefetch::<_MM_HINT_T0>(words.as_ptr().wrapping_add(first).cast::<i8>());
        }
    }
}

/// [`compiled::split_contains_hashes`] compiled for AVX2.
#[target_feature(enable = "avx2")]
pub(super) fn split_contains_hashes<H: SplitHash, const WIDE: bool>(
    words: &[u64],
    hashes: &[KeyHash],
    answers: &mut [bool],
) {
    compiled::split_contains_hashes::<H, WIDE>(words, hashes, answers);
}

/// Runs `work` through `kernel`'s kind with its default configuration's kernel inlined
/// ([`DefaultKernel::INLINE`](super::DefaultKernel), made here, so that the compiler knows
/// it), compiled for AVX2: the kernel's code and the code around it (a loop over many keys
/// and their hashing) become one function, with no call per key.
#[target_feature(enable = "avx2")]
pub(super) fn run_avx2<W: super::Compiled>(work: W, kernel: super::Kernel) -> W::Output {
    work.run(kernel.inlined())
}
