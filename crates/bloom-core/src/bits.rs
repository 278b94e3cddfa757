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

/// A zeroed vector of `len` items, reporting allocation failure instead of aborting.
pub(crate) fn try_zeroed<T: Clone>(len: usize, zero: T, bytes: u64) -> Result<Vec<T>, AllocError> {
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| AllocError { bytes })?;
    v.resize(len, zero);
    Ok(v)
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

/// Mask of the valid bits in the last word for `bits` bits.
pub(crate) fn last_word_mask(bits: u64) -> u64 {
    match bits % 64 {
        0 => u64::MAX,
        r => (1u64 << r) - 1,
    }
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
pub(crate) fn bytes_to_words(bytes: &[u8], bits: u64) -> Result<Vec<u64>, BitsError> {
    let expected = bits.div_ceil(8);
    if bytes.len() as u64 != expected {
        return Err(BitsError::Length {
            bits,
            expected,
            found: bytes.len() as u64,
        });
    }
    let len = word_len(bits)?;
    let mut words = try_zeroed(len, 0u64, expected)?;
    for (word, chunk) in words.iter_mut().zip(bytes.chunks(8)) {
        let mut buf = [0u8; 8];
        buf[..chunk.len()].copy_from_slice(chunk);
        *word = u64::from_le_bytes(buf);
    }
    if let Some(last) = words.last()
        && last & !last_word_mask(bits) != 0
    {
        return Err(BitsError::Padding { bits });
    }
    Ok(words)
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
        }
    }

    #[test]
    fn padding_and_length_are_checked() {
        assert_eq!(bytes_to_words(&[0; 2], 9), Ok(vec![0]));
        assert_eq!(
            bytes_to_words(&[0, 0b10], 9),
            Err(BitsError::Padding { bits: 9 })
        );
        assert_eq!(bytes_to_words(&[0, 0b1], 9), Ok(vec![1 << 8]));
        assert_eq!(
            bytes_to_words(&[0; 3], 9),
            Err(BitsError::Length {
                bits: 9,
                expected: 2,
                found: 3
            })
        );
        assert_eq!(last_word_mask(64), u64::MAX);
        assert_eq!(last_word_mask(65), 1);
    }
}
