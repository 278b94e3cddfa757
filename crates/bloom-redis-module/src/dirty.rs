//! Which parts of a shard's value a command changed, in blocks, and the ranges of them that
//! are replicated as `SETRANGE`s.

/// Bytes of a block: what a replicated `SETRANGE` covers at least. An isolated change then
/// costs about 75 bytes of replication stream (the command, the key, the offset and 16
/// bytes), about twice a plain `BITFIELD`'s 40 per bit.
pub(crate) const BLOCK: usize = 16;
/// Clean blocks between two changed runs that one `SETRANGE` still covers (written with the
/// values they have): fewer, longer commands where changes are dense.
pub(crate) const MERGE_BLOCKS: usize = 8;

/// The blocks of a value changed by a command: one bit per [`BLOCK`] bytes.
pub(crate) struct Dirty(Vec<u64>);

impl Dirty {
    /// No block of a value of `len` bytes changed yet.
    pub(crate) fn new(len: usize) -> Self {
        Self(vec![0; len.div_ceil(BLOCK).div_ceil(64)])
    }

    pub(crate) fn mark(&mut self, byte: usize) {
        let block = byte / BLOCK;
        if let Some(word) = self.0.get_mut(block / 64) {
            *word |= 1 << (block % 64);
        }
    }

    /// The changed parts of a value of `len` bytes as ranges `[start, end)` of whole blocks
    /// (the last one cut at `len`), in order; runs of changed blocks at most
    /// [`MERGE_BLOCKS`] clean blocks apart are one range.
    pub(crate) fn ranges(&self, len: usize) -> Vec<(usize, usize)> {
        let mut ranges: Vec<(usize, usize)> = Vec::new();
        for (w, &word) in self.0.iter().enumerate() {
            let mut bits = word;
            while bits != 0 {
                let block = w * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let (start, end) = (block * BLOCK, ((block + 1) * BLOCK).min(len));
                match ranges.last_mut() {
                    Some((_, last)) if start <= *last + MERGE_BLOCKS * BLOCK => *last = end,
                    _ => ranges.push((start, end)),
                }
            }
        }
        ranges
    }
}
