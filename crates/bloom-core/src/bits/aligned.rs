//! The word array's storage: boxed 64-byte-aligned cache lines, seen as the words.

use super::{AllocError, BitsError, Word, check_padding, word_len};

/// Words in a cache line: the unit a word array is allocated in.
pub(super) const LINE_WORDS: usize = 8;

/// One 64-byte cache line of words, aligned to its size: an array of lines starts on a
/// 64-byte boundary, so that each 512-bit block of the blocked and split-block layouts is
/// exactly one cache line (a plain `Vec` of words is only 16-byte aligned: a block would
/// straddle two lines).
#[repr(C, align(64))]
pub(super) struct Line<W>(pub(super) [W; LINE_WORDS]);

// SAFETY: `Line` is `repr(C)` with one field, an array of `Zeroable` words, so the all-zero
// bit pattern is a valid `Line` (any padding the alignment adds is bytes, zero or not).
#[allow(unsafe_code)]
unsafe impl<W: bytemuck::Zeroable> bytemuck::Zeroable for Line<W> {}

/// A word array whose first word sits on a 64-byte boundary. It dereferences to the words:
/// a pointer and a length, read and used as they are on every probe (an offset into a
/// larger buffer, computed on each access, cost six instructions of a one-key insert).
pub(crate) struct AlignedWords<W> {
    /// The words, then zero words up to the end of the last line.
    lines: Box<[Line<W>]>,
    /// The array's length in words: at most `LINE_WORDS * lines.len()`.
    len: usize,
}

impl<W: Word> AlignedWords<W> {
    /// `len` zero words, reporting allocation failure instead of aborting.
    ///
    /// The memory comes zeroed from the allocator, not written here: a large array is fresh
    /// pages that the system zeroes on first touch, so a filter costs memory as it fills and
    /// a snapshot load writes each page once (with the payload), not twice.
    pub(crate) fn zeroed(len: usize, bytes: u64) -> Result<Self, AllocError> {
        let lines = bytemuck::allocation::try_zeroed_slice_box::<Line<W>>(len.div_ceil(LINE_WORDS))
            .map_err(|_| AllocError { bytes })?;
        Ok(Self::from_lines(lines, len))
    }

    /// [`AlignedWords::zeroed`], a failed allocation handled as the global allocator handles
    /// it (as `Vec::clone` does): for copies of an array that exists.
    pub(crate) fn zeroed_or_abort(len: usize) -> Self {
        Self::zeroed(len, len as u64 * 8).unwrap_or_else(|_| {
            let layout = std::alloc::Layout::array::<Line<W>>(len.div_ceil(LINE_WORDS))
                .unwrap_or(std::alloc::Layout::new::<Line<W>>());
            std::alloc::handle_alloc_error(layout)
        })
    }

    /// The first `len` words of `lines` (all of them if there are fewer): the one maker of
    /// an `AlignedWords`, which `Deref` rests on.
    pub(super) fn from_lines(lines: Box<[Line<W>]>, len: usize) -> Self {
        // A line is its words and nothing else: true of 8-byte words.
        const { assert!(size_of::<Line<W>>() == LINE_WORDS * size_of::<W>()) };
        let whole = lines.len().saturating_mul(LINE_WORDS);
        debug_assert!(len <= whole, "{len} words in {} lines", lines.len());
        Self {
            lines,
            len: len.min(whole),
        }
    }
}

impl AlignedWords<u64> {
    /// A `bits`-bit array filled in place by `fill`, which receives the array's little-endian
    /// byte image (`ceil(bits / 8)` bytes) to write: one copy, straight into the words.
    pub(crate) fn filled_in_place<E: From<BitsError>>(
        bits: u64,
        fill: impl FnOnce(&mut [u8]) -> Result<(), E>,
    ) -> Result<Self, E> {
        let byte_len = bits.div_ceil(8);
        let mut words = Self::zeroed(word_len(bits).map_err(BitsError::from)?, byte_len)
            .map_err(BitsError::from)?;
        let image: &mut [u8] = bytemuck::cast_slice_mut(&mut words[..]);
        let used = usize::try_from(byte_len)
            .map_err(|_| BitsError::from(AllocError { bytes: byte_len }))?;
        let image = image.get_mut(..used).ok_or(BitsError::Length {
            bits,
            expected: byte_len,
            found: 0,
        })?;
        fill(image)?;
        check_padding(bits, image.last().copied().unwrap_or(0))?;
        // The image is little-endian; on a big-endian machine the words are swapped once.
        for word in words.iter_mut() {
            *word = u64::from_le(*word);
        }
        Ok(words)
    }
}

impl<W: Word> std::ops::Deref for AlignedWords<W> {
    type Target = [W];

    #[inline(always)]
    fn deref(&self) -> &[W] {
        // SAFETY: each `Line<W>` is `repr(C)` with its one field, `[W; LINE_WORDS]`, at
        // offset 0, and is exactly that array's size (asserted in `from_lines`, the one maker
        // of an `AlignedWords`), so `lines` is `LINE_WORDS * lines.len()` contiguous,
        // initialised `W`s, of which `len` is at most (`from_lines` again). The borrow of
        // `self` covers the slice's.
        #[allow(unsafe_code)]
        unsafe {
            std::slice::from_raw_parts(self.lines.as_ptr().cast::<W>(), self.len)
        }
    }
}

impl<W: Word> std::ops::DerefMut for AlignedWords<W> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut [W] {
        // SAFETY: as in `deref`; the exclusive borrow of `self` covers the slice's.
        #[allow(unsafe_code)]
        unsafe {
            std::slice::from_raw_parts_mut(self.lines.as_mut_ptr().cast::<W>(), self.len)
        }
    }
}

/// Like `Vec::clone`, a failed allocation is handled as the global allocator handles it.
impl Clone for AlignedWords<u64> {
    fn clone(&self) -> Self {
        let mut copy = Self::zeroed_or_abort(self.len());
        copy.copy_from_slice(self);
        copy
    }
}

impl PartialEq for AlignedWords<u64> {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl std::fmt::Debug for AlignedWords<u64> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AlignedWords({} words)", self.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn word_arrays_are_aligned_zeroed_and_exactly_their_length() {
        for len in [0usize, 1, 7, 8, 9, 15, 16, 17, 1000] {
            let mut words = AlignedWords::<u64>::zeroed(len, len as u64 * 8).unwrap();
            assert_eq!(words.len(), len);
            assert_eq!(words.as_ptr().addr() % 64, 0, "len {len}");
            assert!(words.iter().all(|&w| w == 0), "len {len}");
            for (i, w) in words.iter_mut().enumerate() {
                *w = i as u64 + 1;
            }
            let copy = words.clone();
            assert_eq!(copy.len(), len);
            assert_eq!(copy.as_ptr().addr() % 64, 0, "len {len}");
            assert!(copy.iter().enumerate().all(|(i, &w)| w == i as u64 + 1));
            assert!(copy == words);

            let atomic =
                AlignedWords::<std::sync::atomic::AtomicU64>::zeroed(len, len as u64 * 8).unwrap();
            assert_eq!(atomic.len(), len);
            assert_eq!(atomic.as_ptr().addr() % 64, 0, "len {len}");
        }
    }
}
