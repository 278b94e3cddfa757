//! The split-block layouts: Apache Parquet's split-block Bloom filter (256-bit blocks of
//! eight 32-bit words) and its 512-bit widening (eight 64-bit words).
//!
//! A key's 64-bit hash `h` picks a block from its upper 32 bits and, from its lower 32 bits
//! `x`, one bit in each of the block's eight words: the top bits of `x * SALT[j]` (wrapping
//! in 32 bits). The eight products are independent, so the masks of a key are computed in
//! parallel (eight lanes of one multiply, shift and OR), and a probe is one compare of the
//! block against them.

/// The eight odd salts of Apache Parquet's split-block Bloom filter specification
/// (`parquet-format`, `BloomFilter.md`).
pub(crate) const SALT: [u32; 8] = [
    0x47b6_137b,
    0x4497_4d91,
    0x8824_ad5b,
    0xa2b7_289d,
    0x7054_95c7,
    0x2df1_424b,
    0x9efc_4947,
    0x5c6b_fb31,
];

/// A key's place in a split-block layout: the first 64-bit word of its block and the lower
/// 32 bits of its hash, which name a bit in each of the block's words.
#[derive(Clone, Copy)]
pub(crate) struct Split {
    pub(crate) first_word: usize,
    pub(crate) x: u32,
}

impl Split {
    /// The place of the 64-bit hash `h` among `blocks` blocks of four 64-bit words, or of
    /// eight when `wide`.
    #[inline(always)]
    pub(crate) fn of(h: u64, blocks: u64, wide: bool) -> Self {
        // A block index is below m / 256, and a filter exists only when m / 64 fits usize.
        Self {
            first_word: block_index(h, blocks) as usize * if wide { 8 } else { 4 },
            x: h as u32,
        }
    }
}

/// A 256-bit block's probe. On a little-endian machine the block is viewed as eight `u32`s,
/// the words of the layout, so that each lane's mask is one 32-bit shift.
#[inline(always)]
fn contains_256(line: &[u64; 4], x: u32) -> bool {
    #[cfg(target_endian = "little")]
    {
        all_set_lanes(bytemuck::cast_ref(line), &lanes_256(x))
    }
    #[cfg(not(target_endian = "little"))]
    {
        all_set(line, &masks_256(x))
    }
}

/// [`contains_256`], setting the bits.
#[inline(always)]
fn insert_256(line: &mut [u64; 4], x: u32) -> bool {
    #[cfg(target_endian = "little")]
    {
        set_all_lanes(bytemuck::cast_mut(line), &lanes_256(x))
    }
    #[cfg(not(target_endian = "little"))]
    {
        set_all(line, &masks_256(x))
    }
}

/// Whether every bit of the 64-bit hash `h` is set in `words`, all the blocks of a
/// split-block filter (512-bit when `wide`): the block is found among the blocks `words`
/// holds, which are the filter's, where [`Split::of`] puts it (`None` of a block, for no
/// blocks, reads as unset).
#[inline(always)]
pub(crate) fn contains_hash(words: &[u64], wide: bool, h: u64) -> bool {
    if wide {
        block::<8>(words, h).is_some_and(|line| all_set(line, &masks_512(h as u32)))
    } else {
        block::<4>(words, h).is_some_and(|line| contains_256(line, h as u32))
    }
}

/// [`contains_hash`], setting the bits; returns whether one was clear.
#[inline(always)]
pub(crate) fn insert_hash(words: &mut [u64], wide: bool, h: u64) -> bool {
    if wide {
        block_mut::<8>(words, h).is_some_and(|line| set_all(line, &masks_512(h as u32)))
    } else {
        block_mut::<4>(words, h).is_some_and(|line| insert_256(line, h as u32))
    }
}

/// The first word of the block of `h` among the blocks (512-bit when `wide`) of `len`
/// words, as [`contains_hash`] finds it (`None` for no blocks).
#[inline(always)]
pub(crate) fn first_word(len: usize, wide: bool, h: u64) -> Option<usize> {
    let block_words = if wide { 8 } else { 4 };
    Some(index_in(h, len / block_words)? * block_words)
}

/// The block of `h` among the blocks of `N` words in `words` (`None` for no blocks).
#[inline(always)]
fn block<const N: usize>(words: &[u64], h: u64) -> Option<&[u64; N]> {
    let (blocks, _) = words.as_chunks::<N>();
    let i = index_in(h, blocks.len())?;
    // SAFETY: `index_in` is below its bound, `blocks.len()`. (Safe indexing compiles to a
    // second comparison the compiler cannot drop: measured 3 instructions of a one-key
    // insert's 97.)
    #[allow(unsafe_code)]
    Some(unsafe { blocks.get_unchecked(i) })
}

/// [`block`], mutable (the AVX2 kernels' 512-bit insert finds its block with it too).
#[inline(always)]
pub(crate) fn block_mut<const N: usize>(words: &mut [u64], h: u64) -> Option<&mut [u64; N]> {
    let (blocks, _) = words.as_chunks_mut::<N>();
    let i = index_in(h, blocks.len())?;
    // SAFETY: as in `block`.
    #[allow(unsafe_code)]
    Some(unsafe { blocks.get_unchecked_mut(i) })
}

/// [`block_index`] of `h` among `blocks` blocks as a `usize` always below `blocks` (`None`
/// for none): `(h >> 32) * blocks` is below `2^32 * blocks`, so the product shifted right by
/// 32 is below `blocks` when it does not overflow (`blocks` up to 2^32, every filter, where
/// this is exactly [`block_index`]), and below `2^32 <= blocks` when it wraps.
#[inline(always)]
fn index_in(h: u64, blocks: usize) -> Option<usize> {
    (blocks != 0).then(|| ((h >> 32).wrapping_mul(blocks as u64) >> 32) as usize)
}

/// The block index of a hash among `blocks` blocks (at most 2^32): Parquet's
/// `((h >> 32) * blocks) >> 32`.
#[inline(always)]
pub(crate) fn block_index(h: u64, blocks: u64) -> u64 {
    ((h >> 32) * blocks) >> 32
}

/// The bit of word `j` for the lower hash bits `x`, in a word of `2^shift_bits` bits.
#[inline(always)]
fn bit(x: u32, j: usize, word_bits_log2: u32) -> u32 {
    x.wrapping_mul(SALT[j]) >> (32 - word_bits_log2)
}

/// The masks of a 256-bit block as its four 64-bit words: 32-bit word `j` is the low half
/// (`j` even) or the high half (`j` odd) of 64-bit word `j / 2`.
#[inline(always)]
pub(crate) fn masks_256(x: u32) -> [u64; 4] {
    let mut words = [0u32; 8];
    for (j, word) in words.iter_mut().enumerate() {
        *word = 1 << bit(x, j, 5);
    }
    let mut masks = [0u64; 4];
    for (i, mask) in masks.iter_mut().enumerate() {
        *mask = u64::from(words[2 * i]) | (u64::from(words[2 * i + 1]) << 32);
    }
    masks
}

/// The masks of a 512-bit block: one bit in each of its eight 64-bit words.
#[inline(always)]
pub(crate) fn masks_512(x: u32) -> [u64; 8] {
    let mut masks = [0u64; 8];
    for (j, mask) in masks.iter_mut().enumerate() {
        *mask = 1 << bit(x, j, 6);
    }
    masks
}

/// The `k = 8` positions of a key in a split block of `block_bits` (256 or 512) bits: word
/// `j`'s bit, in word order, until `visit` returns `false`.
#[inline]
pub(crate) fn each_position(
    block: u64,
    x: u32,
    block_bits: u64,
    mut visit: impl FnMut(u64) -> bool,
) {
    let word_bits = block_bits / 8;
    let log2 = word_bits.trailing_zeros();
    for j in 0..8 {
        if !visit(block * block_bits + j as u64 * word_bits + u64::from(bit(x, j, log2))) {
            return;
        }
    }
}

/// The masks of a 256-bit block as its eight 32-bit words, for a block viewed as `[u32; 8]`
/// (on a little-endian machine, 32-bit word `j` of the payload is `u32` `j` of the block's
/// four `u64`s). Eight independent lanes: one broadcast, multiply, shift and variable shift.
#[inline(always)]
pub(crate) fn lanes_256(x: u32) -> [u32; 8] {
    let mut lanes = [0u32; 8];
    for (j, lane) in lanes.iter_mut().enumerate() {
        *lane = 1 << (x.wrapping_mul(SALT[j]) >> 27);
    }
    lanes
}

/// Whether every bit of `masks` is set in `line` (no early exit: the words are compared
/// together).
#[inline(always)]
pub(crate) fn all_set<const N: usize>(line: &[u64; N], masks: &[u64; N]) -> bool {
    let mut missing = 0;
    for i in 0..N {
        missing |= masks[i] & !line[i];
    }
    missing == 0
}

/// [`all_set`] for 32-bit lanes.
#[inline(always)]
pub(crate) fn all_set_lanes(line: &[u32; 8], masks: &[u32; 8]) -> bool {
    let mut missing = 0;
    for i in 0..8 {
        missing |= masks[i] & !line[i];
    }
    missing == 0
}

/// [`set_all`] for 32-bit lanes.
#[inline(always)]
pub(crate) fn set_all_lanes(line: &mut [u32; 8], masks: &[u32; 8]) -> bool {
    let mut missing = 0;
    for i in 0..8 {
        missing |= masks[i] & !line[i];
        line[i] |= masks[i];
    }
    missing != 0
}

/// Sets `masks` in `line`; returns whether a bit was clear.
#[inline(always)]
pub(crate) fn set_all<const N: usize>(line: &mut [u64; N], masks: &[u64; N]) -> bool {
    let mut missing = 0;
    for i in 0..N {
        missing |= masks[i] & !line[i];
        line[i] |= masks[i];
    }
    missing != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_set_one_bit_per_word_at_the_specified_positions() {
        for x in [0u32, 1, 0x8000_0000, 0xdead_beef, u32::MAX] {
            let m256 = masks_256(x);
            let mut from_positions = [0u64; 4];
            each_position(0, x, 256, |p| {
                from_positions[(p / 64) as usize] |= 1 << (p % 64);
                true
            });
            assert_eq!(m256, from_positions, "x = {x:#x}");
            for (i, m) in m256.iter().enumerate() {
                assert_eq!(
                    (m & 0xffff_ffff).count_ones(),
                    1,
                    "x = {x:#x}, word {}",
                    2 * i
                );
                assert_eq!((m >> 32).count_ones(), 1, "x = {x:#x}, word {}", 2 * i + 1);
            }
            let m512 = masks_512(x);
            let mut from_positions = [0u64; 8];
            each_position(0, x, 512, |p| {
                from_positions[(p / 64) as usize] |= 1 << (p % 64);
                true
            });
            assert_eq!(m512, from_positions, "x = {x:#x}");
            assert!(m512.iter().all(|m| m.count_ones() == 1));
        }
        // x = 1: the bit of each word is the salt's top 5 (or 6) bits.
        let top5: Vec<u32> = SALT.iter().map(|s| s >> 27).collect();
        let mut expected = Vec::new();
        each_position(0, 1, 256, |p| {
            expected.push((p % 32) as u32);
            true
        });
        assert_eq!(expected, top5);
    }

    /// Sets the bits [`each_position`] names for the hash `h` among `blocks` blocks; returns
    /// whether one was clear.
    fn insert_at_positions(words: &mut [u64], wide: bool, h: u64, blocks: u64) -> bool {
        let mut changed = false;
        let block_bits = if wide { 512 } else { 256 };
        each_position(block_index(h, blocks), h as u32, block_bits, |p| {
            let (word, mask) = ((p / 64) as usize, 1u64 << (p % 64));
            changed |= words[word] & mask == 0;
            words[word] |= mask;
            true
        });
        changed
    }

    #[test]
    fn blocks_found_among_the_words_are_parquets_blocks() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for blocks in [1usize, 2, 3, 7, 64, 1000, 1 << 20, (1 << 32) - 1] {
            for _ in 0..1000 {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let i = index_in(state, blocks).unwrap();
                assert!(i < blocks);
                assert_eq!(i as u64, block_index(state, blocks as u64));
            }
            for h in [0, u64::MAX, 0xffff_ffff_0000_0000, 0x0000_0001_0000_0000] {
                assert!(index_in(h, blocks).unwrap() < blocks);
                assert_eq!(
                    index_in(h, blocks).unwrap() as u64,
                    block_index(h, blocks as u64)
                );
            }
        }
        // Past 2^32 blocks the product wraps, and the index still falls among the blocks.
        for blocks in [1usize << 32, (1 << 40) + 3, usize::MAX] {
            for h in [
                u64::MAX,
                0xffff_ffff_0000_0000,
                0x8000_0000_0000_0000,
                12345 << 32,
            ] {
                assert!(index_in(h, blocks).unwrap() < blocks);
            }
        }
        assert!(first_word(7, true, 1).is_none());
        assert!(first_word(16, true, u64::MAX) == Some(8));
        assert!(!contains_hash(&[u64::MAX; 7], true, 1));
        assert!(!insert_hash(&mut [0; 3], false, 1));
        // Keys set through the words' own blocks land at the positions Parquet's rule names.
        for (wide, blocks) in [(true, 3usize), (false, 5), (true, 1), (false, 1)] {
            let words_per_block = if wide { 8 } else { 4 };
            let (mut by_words, mut by_place) = (
                vec![0u64; blocks * words_per_block],
                vec![0u64; blocks * words_per_block],
            );
            for i in 0..200u64 {
                let h = i.wrapping_mul(0x9e37_79b9_7f4a_7c15);
                assert_eq!(
                    insert_hash(&mut by_words, wide, h),
                    insert_at_positions(&mut by_place, wide, h, blocks as u64)
                );
                assert_eq!(by_words, by_place);
                assert!(contains_hash(&by_words, wide, h));
            }
        }
    }

    #[test]
    fn lanes_are_the_masks_seen_as_32_bit_words() {
        for x in [0u32, 7, 0x1234_5678, u32::MAX] {
            let lanes = lanes_256(x);
            let masks = masks_256(x);
            for (i, m) in masks.iter().enumerate() {
                assert_eq!(
                    *m,
                    u64::from(lanes[2 * i]) | (u64::from(lanes[2 * i + 1]) << 32)
                );
            }
        }
    }

    #[test]
    fn block_index_covers_the_range() {
        assert_eq!(block_index(0, 7), 0);
        assert_eq!(block_index(u64::MAX, 7), 6);
        assert_eq!(block_index(u64::MAX, 1 << 32), (1 << 32) - 1);
        assert_eq!(
            block_index(0xffff_ffff, 1 << 32),
            0,
            "the lower bits do not pick the block"
        );
    }

    #[test]
    fn probes_agree_with_setting() {
        let mut line = [0u64; 8];
        let masks = masks_512(12345);
        assert!(!all_set(&line, &masks));
        assert!(set_all(&mut line, &masks));
        assert!(all_set(&line, &masks));
        assert!(!set_all(&mut line, &masks));
    }
}
