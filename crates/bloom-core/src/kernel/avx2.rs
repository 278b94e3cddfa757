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

/// [`compiled::split_insert_hash`] compiled for AVX2; a 512-bit block is written only when
/// a bit of the key was clear ([`insert_512`]). Inlined into loops compiled for AVX2
/// ([`run_avx2`]); called from the others.
#[target_feature(enable = "avx2")]
#[inline]
pub(super) fn split_insert_hash<H: SplitHash, const WIDE: bool>(words: &mut [u64], h: u64) -> bool {
    if WIDE {
        return match split::block_mut::<8>(words, h) {
            Some(block) => insert_512(block, h as u32),
            None => false,
        };
    }
    compiled::split_insert_hash::<H, WIDE>(words, h)
}

/// Sets the bits of the lower hash bits `x` in the 512-bit block `block` ([`split::set_all`]
/// of [`split::masks_512`]), storing the block only if one of them was clear, and returns
/// whether one was.
///
/// A key inserted again leaves its block's line unwritten: no store to wait on or to write
/// back, and a page that only such inserts reach stays clean (measured on a filter of 10^5
/// keys taking its keys again: 1.14x sbbf-rs-safe's time where the store made it 1.20x; no
/// slower on new keys or on a mix of both). Written with the intrinsics, as the compiler
/// made a horizontal sum of the test the portable code's branch reads, where `vptest` sets
/// the flag the branch needs.
#[target_feature(enable = "avx2")]
#[inline]
fn insert_512(block: &mut [u64; 8], x: u32) -> bool {
    use std::arch::x86_64::{__m256i, _mm256_andnot_si256, _mm256_or_si256, _mm256_testz_si256};
    let [mask_lo, mask_hi]: [__m256i; 2] = bytemuck::cast(split::masks_512(x));
    let [lo, hi]: [__m256i; 2] = bytemuck::cast(*block);
    let clear = _mm256_or_si256(
        _mm256_andnot_si256(lo, mask_lo),
        _mm256_andnot_si256(hi, mask_hi),
    );
    if _mm256_testz_si256(clear, clear) == 1 {
        return false;
    }
    *block = bytemuck::cast([_mm256_or_si256(lo, mask_lo), _mm256_or_si256(hi, mask_hi)]);
    true
}

/// [`compiled::split_insert_hashes`] compiled for AVX2, each key through
/// [`split_insert_hash`] (a 512-bit block stored only when it changes).
#[target_feature(enable = "avx2")]
pub(super) fn split_insert_hashes<H: SplitHash, const WIDE: bool>(
    words: &mut [u64],
    hashes: &[KeyHash],
) -> u64 {
    compiled::insert_hashes_with(words, hashes, |words, h| {
        split_insert_hash::<H, WIDE>(words, h)
    })
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
/// ([`DefaultKernel::AVX2_INLINE`](super::DefaultKernel), made here, so that the compiler
/// knows it), compiled for AVX2: the kernel's code and the code around it (a loop over many keys
/// and their hashing) become one function, with no call per key.
#[target_feature(enable = "avx2")]
pub(super) fn run_avx2<W: super::Compiled>(work: W, kernel: super::Kernel) -> W::Output {
    work.run(kernel.inlined())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The 512-bit insert sets what the portable code sets and answers as it does, a key
    /// whose bits are all set again included.
    #[test]
    fn insert_512_sets_and_answers_as_the_portable_code() {
        if !std::is_x86_feature_detected!("avx2") {
            return;
        }
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for round in 0..2000 {
            // An empty block, then ever denser ones.
            let density = round % 4;
            let mut block = [0u64; 8];
            for word in &mut block {
                *word = (0..density).fold(0, |w, _| w | next());
            }
            let x = next() as u32;
            let mut expected = block;
            let expected_changed = split::set_all(&mut expected, &split::masks_512(x));
            for again in [false, true] {
                let mut got = if again { expected } else { block };
                // SAFETY: the CPU was found to have AVX2 above.
                #[allow(unsafe_code)]
                let changed = unsafe { insert_512(&mut got, x) };
                assert_eq!(got, expected, "round {round}, again {again}");
                assert_eq!(
                    changed,
                    expected_changed && !again,
                    "round {round}, again {again}"
                );
            }
        }
    }
}
