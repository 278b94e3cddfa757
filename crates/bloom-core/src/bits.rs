//! The bit array: `u64` words whose little-endian bytes are the snapshot payload.
//!
//! Bit `i` is bit `i % 64` of word `i / 64`. Written out as little-endian bytes, that is byte
//! `i / 8` under mask `1 << (i % 8)`, the layout of the reference article, so a snapshot is a
//! plain byte copy. Bits at positions `m` and above are always zero.

/// The bit array could not be allocated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("cannot allocate a bit array of {bytes} bytes on this machine")]
pub struct AllocError {
    /// The size that was requested.
    pub bytes: u64,
}

/// Number of `u64` words for `bits` bits, as a `usize` this platform can index.
pub(crate) fn word_len(bits: u64) -> Result<usize, AllocError> {
    usize::try_from(bits.div_ceil(64)).map_err(|_| AllocError {
        bytes: bits.div_ceil(8),
    })
}

/// Refuses set padding bits: a `bits`-bit array's bits past `bits` live in its last byte
/// `last` (bytes past `ceil(bits / 8)` do not exist).
pub(crate) fn check_padding(bits: u64, last: u8) -> Result<(), BitsError> {
    let used = bits % 8;
    if used != 0 && last >> used != 0 {
        return Err(BitsError::Padding { bits });
    }
    Ok(())
}

/// Words in a cache line: the unit a word array is allocated in.
const LINE_WORDS: usize = 8;

/// One 64-byte cache line of words, aligned to its size: an array of lines starts on a
/// 64-byte boundary, so that each 512-bit block of the blocked and split-block layouts is
/// exactly one cache line (a plain `Vec` of words is only 16-byte aligned: a block would
/// straddle two lines).
#[repr(C, align(64))]
struct Line<W>([W; LINE_WORDS]);

// SAFETY: `Line` is `repr(C)` with one field, an array of `Zeroable` words, so the all-zero
// bit pattern is a valid `Line` (its alignment adds no padding for the 8-byte words of
// `Word`, and zeroed padding would be valid too).
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
        // A line is its words and no padding, which `Deref` rests on: true of 8-byte words.
        const { assert!(size_of::<Line<W>>() == LINE_WORDS * size_of::<W>()) };
        let lines = bytemuck::allocation::try_zeroed_slice_box::<Line<W>>(len.div_ceil(LINE_WORDS))
            .map_err(|_| AllocError { bytes })?;
        Ok(Self { lines, len })
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
        // offset 0, and is exactly that array's size (asserted in `zeroed`, the only maker of
        // an `AlignedWords`), so `lines`
        // is `LINE_WORDS * lines.len()` contiguous, initialised `W`s, of which `len` is at
        // most. The borrow of `self` covers the slice's.
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
        let len = self.len();
        let Ok(mut copy) = Self::zeroed(len, len as u64 * 8) else {
            let layout = std::alloc::Layout::array::<Line<u64>>(len.div_ceil(LINE_WORDS))
                .unwrap_or(std::alloc::Layout::new::<Line<u64>>());
            std::alloc::handle_alloc_error(layout);
        };
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

/// Splits a bit position into (word index, mask).
#[inline]
pub(crate) fn locate(position: u64) -> (usize, u64) {
    // A position is below m, and a filter only exists when its word count fits in usize.
    let word = (position >> 6) as usize;
    (word, 1u64 << (position & 63))
}

/// The little-endian byte image of `words`, cut to `byte_len` bytes.
pub(crate) fn words_to_bytes(words: impl Iterator<Item = u64>, byte_len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(byte_len);
    for w in words {
        out.extend_from_slice(&w.to_le_bytes());
    }
    out.truncate(byte_len);
    out
}

/// Errors from turning bytes into a bit array.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BitsError {
    /// The byte length is not `ceil(m / 8)`.
    #[error("bit array of {bits} bits needs {expected} bytes, got {found}")]
    Length {
        /// The bit count.
        bits: u64,
        /// `ceil(m / 8)`.
        expected: u64,
        /// The length given.
        found: u64,
    },
    /// Bits past `m` were set.
    #[error("bits past position {bits} are set; a valid bit array has them zero")]
    Padding {
        /// The bit count.
        bits: u64,
    },
    /// The array could not be allocated.
    #[error(transparent)]
    Alloc(#[from] AllocError),
}

/// Parses the little-endian byte image of a `bits`-bit array into words.
pub(crate) fn bytes_to_words(bytes: &[u8], bits: u64) -> Result<AlignedWords<u64>, BitsError> {
    WordSink::<u64>::fill(bits, |push| {
        push(bytes);
        Ok::<(), BitsError>(())
    })
}

/// Bytes of the image converted at a time by [`for_each_byte_chunk`]: small enough for any
/// stack, large enough that the callback's overhead does not matter.
const CHUNK_BYTES: usize = 16 << 10;

/// Hands the little-endian byte image of `words`, cut to `byte_len` bytes, to `each` in
/// chunks of up to [`CHUNK_BYTES`].
pub(crate) fn for_each_byte_chunk<E>(
    words: impl Iterator<Item = u64>,
    byte_len: u64,
    mut each: impl FnMut(&[u8]) -> Result<(), E>,
) -> Result<(), E> {
    let mut buf = [0u8; CHUNK_BYTES];
    let mut filled = 0;
    let mut left = byte_len;
    for word in words {
        if left == 0 {
            break;
        }
        let bytes = word.to_le_bytes();
        let take = usize::try_from(left.min(8)).unwrap_or(8);
        if let (Some(dst), Some(src)) = (buf.get_mut(filled..filled + take), bytes.get(..take)) {
            dst.copy_from_slice(src);
        }
        filled += take;
        left -= take as u64;
        if filled == CHUNK_BYTES {
            each(&buf)?;
            filled = 0;
        }
    }
    if filled > 0 {
        each(buf.get(..filled).unwrap_or_default())?;
    }
    Ok(())
}

/// A word a bit array can be made of: `u64` for the plain filter, `AtomicU64` for the atomic
/// one.
pub(crate) trait Word: Sized + bytemuck::Zeroable {
    fn from_bits(bits: u64) -> Self;
}

impl Word for u64 {
    fn from_bits(bits: u64) -> Self {
        bits
    }
}

impl Word for std::sync::atomic::AtomicU64 {
    fn from_bits(bits: u64) -> Self {
        Self::new(bits)
    }
}

/// The caller's error, or the array's, while a loader fills a bit array.
enum Fail<E> {
    Fill(E),
    Bits(BitsError),
}

impl<E> From<BitsError> for Fail<E> {
    fn from(e: BitsError) -> Self {
        Self::Bits(e)
    }
}

impl<E> Fail<E> {
    /// The caller's error, or the array's as the filter type's load error `L`.
    fn into_load<L: From<BitsError>>(self) -> E
    where
        E: From<L>,
    {
        match self {
            Self::Fill(e) => e,
            Self::Bits(e) => E::from(L::from(e)),
        }
    }
}

/// [`WordSink::fill`] for a loader whose errors are `E`, which the filter type's own load
/// error `L` converts into: a bit array that cannot be made is reported as an `L`.
pub(crate) fn fill_words<W: Word, L: From<BitsError>, E: From<L>>(
    bits: u64,
    fill: impl FnOnce(&mut dyn FnMut(&[u8])) -> Result<(), E>,
) -> Result<AlignedWords<W>, E> {
    WordSink::fill(bits, |sink| fill(sink).map_err(Fail::Fill)).map_err(Fail::into_load::<L>)
}

/// [`AlignedWords::filled_in_place`] for a loader whose errors are `E`, as [`fill_words`].
pub(crate) fn fill_words_in_place<L: From<BitsError>, E: From<L>>(
    bits: u64,
    fill: impl FnOnce(&mut [u8]) -> Result<(), E>,
) -> Result<AlignedWords<u64>, E> {
    AlignedWords::filled_in_place(bits, |image| fill(image).map_err(Fail::Fill))
        .map_err(Fail::into_load::<L>)
}

/// Assembles the words of a `bits`-bit array from its byte image delivered in chunks of any
/// size: one fallible allocation of the final size, filled as bytes arrive.
pub(crate) struct WordSink<W> {
    bits: u64,
    words: AlignedWords<W>,
    /// Words of the array received so far.
    filled: usize,
    /// Bytes of the word being assembled.
    partial: [u8; 8],
    partial_len: usize,
    /// Bytes received beyond the expected length (an error at the end).
    excess: u64,
    last_byte: u8,
}

impl<W: Word> WordSink<W> {
    /// Fills a bit array from `fill`; see [`Filter::from_payload`](crate::Filter::from_payload).
    pub(crate) fn fill<E: From<BitsError>>(
        bits: u64,
        fill: impl FnOnce(&mut dyn FnMut(&[u8])) -> Result<(), E>,
    ) -> Result<AlignedWords<W>, E> {
        let len = word_len(bits).map_err(BitsError::from)?;
        let words = AlignedWords::zeroed(len, bits.div_ceil(8)).map_err(BitsError::from)?;
        let mut sink = Self {
            bits,
            words,
            filled: 0,
            partial: [0; 8],
            partial_len: 0,
            excess: 0,
            last_byte: 0,
        };
        fill(&mut |chunk| sink.push(chunk))?;
        Ok(sink.finish()?)
    }

    /// Appends a word to those received (a word past the array's length is never made:
    /// `push` counts the bytes of one as excess).
    fn push_word(&mut self, bytes: [u8; 8]) {
        if let Some(word) = self.words.get_mut(self.filled) {
            *word = W::from_bits(u64::from_le_bytes(bytes));
            self.filled += 1;
        }
    }

    fn push(&mut self, mut chunk: &[u8]) {
        if let Some(&last) = chunk.last() {
            self.last_byte = last;
        }
        while !chunk.is_empty() {
            if self.filled == self.words.len() {
                self.excess += chunk.len() as u64;
                return;
            }
            if self.partial_len == 0 && chunk.len() >= 8 {
                // Whole words straight from the chunk.
                let (whole, rest) = chunk.as_chunks::<8>();
                let room = self.words.get_mut(self.filled..).unwrap_or_default();
                let take = whole.len().min(room.len());
                for (word, bytes) in room.iter_mut().zip(whole) {
                    *word = W::from_bits(u64::from_le_bytes(*bytes));
                }
                self.filled += take;
                let used = take * 8;
                chunk = if take < whole.len() {
                    chunk.get(used..).unwrap_or_default()
                } else {
                    rest
                };
                continue;
            }
            let take = (8 - self.partial_len).min(chunk.len());
            if let (Some(dst), Some(src)) = (
                self.partial
                    .get_mut(self.partial_len..self.partial_len + take),
                chunk.get(..take),
            ) {
                dst.copy_from_slice(src);
            }
            self.partial_len += take;
            chunk = chunk.get(take..).unwrap_or_default();
            if self.partial_len == 8 {
                self.push_word(self.partial);
                self.partial = [0; 8];
                self.partial_len = 0;
            }
        }
    }

    fn finish(mut self) -> Result<AlignedWords<W>, BitsError> {
        let expected = self.bits.div_ceil(8);
        let received = self.filled as u64 * 8 + self.partial_len as u64 + self.excess;
        let complete = received == expected;
        if complete && self.partial_len > 0 {
            self.push_word(self.partial);
        }
        if !complete || self.filled != self.words.len() {
            return Err(BitsError::Length {
                bits: self.bits,
                expected,
                found: received,
            });
        }
        check_padding(self.bits, self.last_byte)?;
        Ok(self.words)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_image_matches_the_reference_layout() {
        // Bit b lives in byte b / 8 under mask 1 << (b % 8).
        for bit in [0u64, 1, 7, 8, 63, 64, 65, 127, 1000] {
            let bits = 1024;
            let mut words = vec![0u64; 16];
            let (w, mask) = locate(bit);
            words[w] |= mask;
            let bytes = words_to_bytes(words.into_iter(), 128);
            for (i, byte) in bytes.iter().enumerate() {
                let expected = if i as u64 == bit / 8 {
                    1u8 << (bit % 8)
                } else {
                    0
                };
                assert_eq!(*byte, expected, "bit {bit} byte {i}");
            }
            assert_eq!(bytes_to_words(&bytes, bits).unwrap()[w], mask);
            assert_eq!(
                bytes_to_words(&bytes, bits).unwrap().as_ptr().addr() % 64,
                0
            );
        }
    }

    #[test]
    fn padding_and_length_are_checked() {
        assert_eq!(*bytes_to_words(&[0; 2], 9).unwrap(), [0]);
        assert_eq!(
            bytes_to_words(&[0, 0b10], 9).map(|w| w.to_vec()),
            Err(BitsError::Padding { bits: 9 })
        );
        assert_eq!(*bytes_to_words(&[0, 0b1], 9).unwrap(), [1 << 8]);
        assert_eq!(
            bytes_to_words(&[0; 3], 9).map(|w| w.to_vec()),
            Err(BitsError::Length {
                bits: 9,
                expected: 2,
                found: 3
            })
        );
    }

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

    fn sink(bits: u64, chunks: &[&[u8]]) -> Result<Vec<u64>, BitsError> {
        WordSink::<u64>::fill(bits, |push| {
            for chunk in chunks {
                push(chunk);
            }
            Ok::<(), BitsError>(())
        })
        .map(|words| {
            assert_eq!(words.as_ptr().addr() % 64, 0, "aligned");
            words.to_vec()
        })
    }

    #[test]
    fn the_word_sink_assembles_any_chunking_and_checks_length_and_padding() {
        let bytes: Vec<u8> = (0..21u8).map(|b| b.wrapping_mul(37)).collect();
        let bits = 21 * 8 - 3;
        let mut last_ok = bytes.clone();
        last_ok[20] &= 0b0001_1111;
        let expected = bytes_to_words(&last_ok, bits).unwrap().to_vec();
        for split in 0..=last_ok.len() {
            for split2 in split..=last_ok.len() {
                let (a, rest) = last_ok.split_at(split);
                let (b, c) = rest.split_at(split2 - split);
                assert_eq!(
                    sink(bits, &[a, b, c]),
                    Ok(expected.clone()),
                    "{split} {split2}"
                );
            }
        }
        assert_eq!(sink(bits, &[&bytes]), Err(BitsError::Padding { bits }));
        assert!(matches!(
            sink(bits, &[&last_ok[..20]]),
            Err(BitsError::Length { found: 20, .. })
        ));
        let mut longer = last_ok.clone();
        longer.extend_from_slice(&[0; 9]);
        assert!(matches!(
            sink(bits, &[&longer]),
            Err(BitsError::Length { found: 30, .. })
        ));
        let mut out = Vec::new();
        for_each_byte_chunk(expected.iter().copied(), 21, |chunk| {
            out.extend_from_slice(chunk);
            Ok::<(), ()>(())
        })
        .unwrap();
        assert_eq!(out, last_ok);
    }

    #[test]
    fn byte_chunks_cover_large_arrays() {
        let words: Vec<u64> = (0..5000u64)
            .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15))
            .collect();
        let mut out = Vec::new();
        let mut calls = 0;
        for_each_byte_chunk(words.iter().copied(), 39_999, |chunk| {
            calls += 1;
            out.extend_from_slice(chunk);
            Ok::<(), ()>(())
        })
        .unwrap();
        assert_eq!(out, words_to_bytes(words.iter().copied(), 39_999));
        assert_eq!(calls, 39_999usize.div_ceil(CHUNK_BYTES));
    }
}
