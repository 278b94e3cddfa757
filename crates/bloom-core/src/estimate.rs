//! Estimates computed from the number of set bits `X` of an `m`-bit filter with `k` positions
//! per key: fill ratio, item count and current false-positive rate. Both filter types use
//! them; they are public for tools that count the bits of a snapshot without loading it
//! ([`FillCounter`] counts a payload streamed in chunks).

use crate::layout::Layout;

/// `X / m`.
#[must_use]
pub fn fill_ratio(ones: u64, bits: u64) -> f64 {
    ones as f64 / bits as f64
}

/// Swamidass and Baldi (2007): `n* = -(m / k) ln(1 - X / m)`.
///
/// A saturated filter (`X = m`) would give infinity; it is estimated at `X = m - 1/2`
/// instead, a finite lower bound, so callers never see NaN or infinity.
#[must_use]
pub fn estimated_items(ones: u64, bits: u64, hashes: u32) -> f64 {
    let m = bits as f64;
    let x = if ones >= bits { m - 0.5 } else { ones as f64 };
    -(m / f64::from(hashes)) * (-x / m).ln_1p()
}

/// The chance that a key never inserted hits only set bits, given the current fill:
/// `(X / m)^k`.
#[must_use]
pub fn current_false_positive_rate(ones: u64, bits: u64, hashes: u32) -> f64 {
    fill_ratio(ones, bits).powf(f64::from(hashes))
}

/// The false-positive rate of a blocked filter at its current fill. A key's probes all land
/// in one block, so the rate is the mean over blocks of `(X_b / 512)^k`, where `X_b` is the
/// block's set bits: blocks fill unevenly, and `(X / m)^k` over the whole filter would
/// understate the rate (by a third at 0.1%, and by orders of magnitude when nearly empty).
#[must_use]
#[cfg(test)]
fn blocked_false_positive_rate(block_ones: impl IntoIterator<Item = u32>, hashes: u32) -> f64 {
    partitioned_false_positive_rate(
        block_ones.into_iter().map(u64::from),
        crate::layout::BLOCK_BITS,
        hashes,
    )
}

/// The false-positive rate of a filter whose keys each fall in one part of `part_bits` bits
/// (a block, a shard): the mean over parts of `(X_p / part_bits)^k`.
#[must_use]
pub fn partitioned_false_positive_rate(
    part_ones: impl IntoIterator<Item = u64>,
    part_bits: u64,
    hashes: u32,
) -> f64 {
    let (mut sum, mut parts) = (0.0, 0u64);
    for ones in part_ones {
        sum += (ones as f64 / part_bits as f64).powf(f64::from(hashes));
        parts += 1;
    }
    if parts == 0 { 0.0 } else { sum / parts as f64 }
}

/// The false-positive rate of a filter of `config` from its words (`load` reads one):
/// [`partitioned_false_positive_rate`] for layouts whose keys fall in one part,
/// [`current_false_positive_rate`] otherwise.
pub(crate) fn rate_of_words<W>(
    config: &crate::FilterConfig,
    words: &[W],
    load: impl Fn(&W) -> u64,
) -> f64 {
    let (bits, hashes) = (config.bits(), config.hashes());
    let ones = |part: &[W]| {
        part.iter()
            .map(|w| u64::from(load(w).count_ones()))
            .sum::<u64>()
    };
    if let Some(block_bits) = config.layout().split_block_bits() {
        let block_words = usize::try_from(block_bits / 64).unwrap_or(usize::MAX);
        let (mut sum, mut blocks) = (0.0, 0u64);
        for block in words.chunks(block_words) {
            // A block is at most 64 bytes: its payload image on the stack.
            let mut image = [0u8; 64];
            for (bytes, w) in image.chunks_exact_mut(8).zip(block) {
                bytes.copy_from_slice(&load(w).to_le_bytes());
            }
            sum += split_block_rate(image.get(..block.len() * 8).unwrap_or_default(), block_bits);
            blocks += 1;
        }
        return if blocks == 0 {
            0.0
        } else {
            sum / blocks as f64
        };
    }
    match config.layout().part_bits(bits) {
        Some(part_bits) => {
            let part_words = usize::try_from(part_bits / 64).unwrap_or(usize::MAX);
            partitioned_false_positive_rate(words.chunks(part_words).map(ones), part_bits, hashes)
        }
        None => current_false_positive_rate(ones(words), bits, hashes),
    }
}

/// The rate of one split block (its payload bytes): a query tests one bit in each of its
/// eight words, so it is the product over words of `X_w / W`.
fn split_block_rate(block: &[u8], block_bits: u64) -> f64 {
    let word_bytes = usize::try_from(block_bits / 64).unwrap_or(1).max(1);
    let word_bits = (word_bytes * 8) as f64;
    block
        .chunks(word_bytes)
        .map(|word| count_ones(word) as f64 / word_bits)
        .product()
}

/// Counts the set bits of a payload streamed in chunks of any size, and for a layout whose
/// keys each fall in one part (a block, a shard) the fill of each part, so that the
/// false-positive rate can be estimated without holding the payload.
#[derive(Clone, Debug)]
pub struct FillCounter {
    bits: u64,
    hashes: u32,
    ones: u64,
    /// The bytes of one part, if keys fall in parts.
    part_bytes: Option<usize>,
    /// The sum over finished parts of `(X_p / part bits)^k`, their number, and the bytes
    /// and set bits of the part being fed.
    rate_sum: f64,
    parts: u64,
    fed: usize,
    part_ones: u64,
    /// For a split-block layout, its block bits and the bytes of the block being fed: the
    /// rate of a block is the product over its eight words.
    split: Option<(u64, [u8; 64])>,
}

impl FillCounter {
    /// A counter for an `m = bits` filter with `k = hashes` in `layout`.
    #[must_use]
    pub fn new(layout: Layout, bits: u64, hashes: u32) -> Self {
        Self {
            bits,
            hashes,
            ones: 0,
            part_bytes: layout
                .part_bits(bits)
                .and_then(|b| usize::try_from(b / 8).ok())
                .filter(|&b| b > 0),
            rate_sum: 0.0,
            parts: 0,
            fed: 0,
            part_ones: 0,
            split: layout.split_block_bits().map(|b| (b, [0; 64])),
        }
    }

    /// Counts the next bytes of the payload.
    pub fn feed(&mut self, mut bytes: &[u8]) {
        let Some(part_bytes) = self.part_bytes else {
            self.ones += count_ones(bytes);
            return;
        };
        while !bytes.is_empty() {
            let (part, rest) = bytes.split_at(bytes.len().min(part_bytes - self.fed));
            let ones = count_ones(part);
            self.ones += ones;
            self.part_ones += ones;
            if let Some((_, block)) = &mut self.split
                && let Some(slot) = block.get_mut(self.fed..self.fed + part.len())
            {
                slot.copy_from_slice(part);
            }
            self.fed += part.len();
            if self.fed == part_bytes {
                self.rate_sum += match &self.split {
                    Some((block_bits, block)) => {
                        split_block_rate(block.get(..part_bytes).unwrap_or_default(), *block_bits)
                    }
                    None => (self.part_ones as f64 / (part_bytes * 8) as f64)
                        .powf(f64::from(self.hashes)),
                };
                self.parts += 1;
                self.fed = 0;
                self.part_ones = 0;
            }
            bytes = rest;
        }
    }

    /// The set bits counted so far.
    #[must_use]
    pub fn ones(&self) -> u64 {
        self.ones
    }

    /// The false-positive rate at the fill counted: the layout's formula (see
    /// [`partitioned_false_positive_rate`] and [`current_false_positive_rate`]).
    #[must_use]
    pub fn false_positive_rate(&self) -> f64 {
        match self.part_bytes {
            Some(_) if self.parts > 0 => self.rate_sum / self.parts as f64,
            Some(_) => 0.0,
            None => current_false_positive_rate(self.ones, self.bits, self.hashes),
        }
    }
}

/// The set bits of a byte string, a word at a time.
fn count_ones(bytes: &[u8]) -> u64 {
    let (words, rest) = bytes.as_chunks::<8>();
    let whole: u64 = words
        .iter()
        .map(|w| u64::from(u64::from_le_bytes(*w).count_ones()))
        .sum();
    whole + rest.iter().map(|b| u64::from(b.count_ones())).sum::<u64>()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saturated_and_empty_filters_give_finite_estimates() {
        assert!(estimated_items(0, 1024, 4).abs() < f64::EPSILON);
        let saturated = estimated_items(1024, 1024, 4);
        assert!(saturated.is_finite() && saturated > 1000.0, "{saturated}");
        assert!(estimated_items(1, 1, 1).is_finite());
        assert!((current_false_positive_rate(1024, 1024, 4) - 1.0).abs() < f64::EPSILON);
    }

    #[test]
    fn estimate_inverts_the_expected_fill() {
        // After n items, E[X] = m (1 - e^(-kn/m)).
        let (m, k, n) = (1_000_000u64, 7u32, 50_000f64);
        let x = (m as f64 * -(-f64::from(k) * n / m as f64).exp_m1()).round() as u64;
        assert!((estimated_items(x, m, k) - n).abs() < 10.0);
    }

    #[test]
    fn the_fill_counter_agrees_with_whole_payload_counts_whatever_the_chunking() {
        // 4 blocks: empty, full, half, one bit.
        let mut payload = vec![0u8; 256];
        payload[64..128].fill(0xff);
        payload[128..160].fill(0xff);
        payload[200] = 1;
        let k = 3;
        let expected_rate = blocked_false_positive_rate([0, 512, 256, 1], k);
        assert!((expected_rate - (1.0 + 0.125 + (1.0f64 / 512.0).powi(3)) / 4.0).abs() < 1e-12);
        for chunk in [1, 7, 63, 64, 65, 256] {
            let mut counter = FillCounter::new(Layout::Blocked512, 2048, k);
            for part in payload.chunks(chunk) {
                counter.feed(part);
            }
            assert_eq!(counter.ones(), 512 + 256 + 1);
            assert!(
                (counter.false_positive_rate() - expected_rate).abs() < 1e-15,
                "{chunk}"
            );
            let mut standard = FillCounter::new(Layout::Standard, 2048, k);
            for part in payload.chunks(chunk) {
                standard.feed(part);
            }
            assert_eq!(
                standard.false_positive_rate(),
                current_false_positive_rate(769, 2048, k)
            );
            // Split blocks of 256 bits (32 bytes): 2, 3 and 4 full, 6 with one bit in one of
            // its words, the others empty. A block's rate is the product over its eight
            // 32-bit words, so only the full blocks count.
            let mut split = FillCounter::new(Layout::SplitBlock256, 2048, 8);
            for part in payload.chunks(chunk) {
                split.feed(part);
            }
            let expected_split = 3.0 / 8.0;
            assert!(
                (split.false_positive_rate() - expected_split).abs() < 1e-15,
                "{chunk}: {}",
                split.false_positive_rate()
            );
        }
    }
}
