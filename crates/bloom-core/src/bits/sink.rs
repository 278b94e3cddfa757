//! Assembling a word array from its byte image delivered in chunks of any size.

use super::{AlignedWords, AllocError, BitsError, Word, check_padding, word_len};

/// Assembles the words of a `bits`-bit array from its byte image delivered in chunks of any
/// size: one fallible allocation of the final size, filled as bytes arrive.
pub(crate) struct WordSink<W> {
    bits: u64,
    words: Vec<W>,
    /// Leading padding words (for the 64-byte alignment), then the array's words.
    offset: usize,
    /// The array's length in words.
    len: usize,
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
        let mut words = Vec::new();
        words
            .try_reserve_exact(len.saturating_add(super::aligned::ALIGN_SPARE))
            .map_err(|_| {
                BitsError::from(AllocError {
                    bytes: bits.div_ceil(8),
                })
            })?;
        let offset = super::aligned::align_offset(words.as_ptr());
        words.extend((0..offset).map(|_| W::from_bits(0)));
        let mut sink = Self {
            bits,
            words,
            offset,
            len,
            partial: [0; 8],
            partial_len: 0,
            excess: 0,
            last_byte: 0,
        };
        fill(&mut |chunk| sink.push(chunk))?;
        Ok(sink.finish()?)
    }

    /// Words of the array received so far.
    fn received_words(&self) -> usize {
        self.words.len() - self.offset
    }

    fn push(&mut self, mut chunk: &[u8]) {
        if let Some(&last) = chunk.last() {
            self.last_byte = last;
        }
        while !chunk.is_empty() {
            if self.received_words() == self.len {
                self.excess += chunk.len() as u64;
                return;
            }
            if self.partial_len == 0 && chunk.len() >= 8 {
                // Whole words straight from the chunk.
                let (whole, rest) = chunk.as_chunks::<8>();
                let room = self.len - self.received_words();
                let take = whole.len().min(room);
                self.words.extend(
                    whole
                        .iter()
                        .take(take)
                        .map(|b| W::from_bits(u64::from_le_bytes(*b))),
                );
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
                self.words
                    .push(W::from_bits(u64::from_le_bytes(self.partial)));
                self.partial = [0; 8];
                self.partial_len = 0;
            }
        }
    }

    fn finish(mut self) -> Result<AlignedWords<W>, BitsError> {
        let expected = self.bits.div_ceil(8);
        let received = self.received_words() as u64 * 8 + self.partial_len as u64 + self.excess;
        let complete = received == expected;
        if complete && self.partial_len > 0 {
            self.words
                .push(W::from_bits(u64::from_le_bytes(self.partial)));
        }
        if !complete || self.received_words() != self.len {
            return Err(BitsError::Length {
                bits: self.bits,
                expected,
                found: received,
            });
        }
        check_padding(self.bits, self.last_byte)?;
        Ok(AlignedWords::from_buf(self.words, self.offset))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bits::{bytes_to_words, for_each_byte_chunk};

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

    /// `bytes` cut in three at every first point `step` apart and every second point
    /// `step2` apart after it, with the two points.
    fn three_pieces(
        bytes: &[u8],
        step: usize,
        step2: usize,
    ) -> impl Iterator<Item = ([&[u8]; 3], usize, usize)> {
        (0..=bytes.len()).step_by(step).flat_map(move |split| {
            (split..=bytes.len()).step_by(step2).map(move |split2| {
                let (a, rest) = bytes.split_at(split);
                let (b, c) = rest.split_at(split2 - split);
                ([a, b, c], split, split2)
            })
        })
    }

    #[test]
    fn the_word_sink_assembles_any_chunking_and_checks_length_and_padding() {
        let bytes: Vec<u8> = (0..21u8).map(|b| b.wrapping_mul(37)).collect();
        let bits = 21 * 8 - 3;
        let mut last_ok = bytes.clone();
        last_ok[20] &= 0b0001_1111;
        let expected = bytes_to_words(&last_ok, bits).unwrap().to_vec();
        for (pieces, split, split2) in three_pieces(&last_ok, 1, 1) {
            assert_eq!(
                sink(bits, &pieces),
                Ok(expected.clone()),
                "{split} {split2}"
            );
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

    /// Arrays of several cache lines, in two-point splits and in runs of fixed sizes, against
    /// words read directly from the bytes.
    #[test]
    fn the_word_sink_assembles_arrays_of_many_words_from_any_chunking() {
        for len in [64usize, 128, 136, 205, 256] {
            let mut bytes: Vec<u8> = (0..len).map(|i| (i * 151 + 7) as u8).collect();
            let bits = len as u64 * 8 - 3;
            if let Some(last) = bytes.last_mut() {
                *last &= 0b0001_1111;
            }
            let expected: Vec<u64> = bytes
                .chunks(8)
                .map(|c| {
                    let mut word = [0u8; 8];
                    word[..c.len()].copy_from_slice(c);
                    u64::from_le_bytes(word)
                })
                .collect();
            for (pieces, split, split2) in three_pieces(&bytes, 3, 5) {
                assert_eq!(
                    sink(bits, &pieces),
                    Ok(expected.clone()),
                    "{len}: {split} {split2}"
                );
            }
            for run in [1, 7, 8, 9, 63, 64, 65, 100] {
                let chunks: Vec<&[u8]> = bytes.chunks(run).collect();
                assert_eq!(
                    sink(bits, &chunks),
                    Ok(expected.clone()),
                    "{len}: runs of {run}"
                );
            }
            assert!(matches!(
                sink(bits, &[&bytes[..len - 1]]),
                Err(BitsError::Length { .. })
            ));
            let mut longer = bytes.clone();
            longer.push(0);
            assert!(matches!(
                sink(bits, &[&longer]),
                Err(BitsError::Length { .. })
            ));
            let atomic = WordSink::<std::sync::atomic::AtomicU64>::fill(bits, |push| {
                push(&bytes);
                Ok::<(), BitsError>(())
            })
            .unwrap();
            assert_eq!(atomic.as_ptr().addr() % 64, 0);
            let words: Vec<u64> = atomic
                .iter()
                .map(|w| w.load(std::sync::atomic::Ordering::Relaxed))
                .collect();
            assert_eq!(words, expected);
        }
    }
}
