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

mod aligned;
mod sink;

pub(crate) use self::aligned::AlignedWords;
pub(crate) use self::sink::WordSink;

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

    /// The words' bytes as they lie in memory, for a payload read straight into them.
    fn bytes_mut(words: &mut [Self]) -> &mut [u8];

    /// The word's value read as little-endian bytes: swapped on a big-endian machine.
    fn swap_from_le(&mut self);
}

impl Word for u64 {
    fn from_bits(bits: u64) -> Self {
        bits
    }

    fn bytes_mut(words: &mut [Self]) -> &mut [u8] {
        bytemuck::cast_slice_mut(words)
    }

    fn swap_from_le(&mut self) {
        *self = u64::from_le(*self);
    }
}

impl Word for std::sync::atomic::AtomicU64 {
    fn from_bits(bits: u64) -> Self {
        Self::new(bits)
    }

    fn bytes_mut(words: &mut [Self]) -> &mut [u8] {
        let len = std::mem::size_of_val(words);
        // SAFETY: `AtomicU64` has the size and bit validity of `u64` (its documentation's
        // guarantee), so the words are `len` initialised bytes, and every byte pattern
        // written through the slice is a valid `AtomicU64`. The exclusive borrow of `words`
        // covers the slice's, so nothing reads or writes them atomically meanwhile: what
        // `AtomicU64::get_mut` rests on, for a slice.
        #[allow(unsafe_code)]
        unsafe {
            std::slice::from_raw_parts_mut(words.as_mut_ptr().cast::<u8>(), len)
        }
    }

    fn swap_from_le(&mut self) {
        let word = self.get_mut();
        *word = u64::from_le(*word);
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
pub(crate) fn fill_words_in_place<W: Word, L: From<BitsError>, E: From<L>>(
    bits: u64,
    fill: impl FnOnce(&mut [u8]) -> Result<(), E>,
) -> Result<AlignedWords<W>, E> {
    AlignedWords::filled_in_place(bits, |image| fill(image).map_err(Fail::Fill))
        .map_err(Fail::into_load::<L>)
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
