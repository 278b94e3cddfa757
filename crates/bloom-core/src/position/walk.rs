//! The positions of a hashed key under every rule and layout, in rule order: the one walk
//! of the rules that the general probes, the counting filter and the key placer take.

use super::{BLOCK_STEP, KeyHash, PositionHasher, PositionRule, reduce, split};
use crate::layout::{BLOCK_BITS, Layout};

impl PositionHasher {
    /// Calls `visit` with each position of a hashed key, in rule order. This is the one
    /// implementation of every rule and layout. Positions cost a multiply each, so callers
    /// that need them twice (probe, then set) walk them twice rather than storing them.
    #[inline]
    pub(crate) fn each_position(&self, hash: KeyHash, mut visit: impl FnMut(u64)) {
        self.each_position_while(hash, |p| {
            visit(p);
            true
        });
    }

    /// The first position of a hashed key in rule order. There is one: `FilterParams`
    /// refuses `k = 0`, and a hasher takes its `k` from checked parameters.
    #[inline]
    pub(crate) fn first_position(&self, hash: KeyHash) -> u64 {
        debug_assert!(self.hashes > 0, "a hasher with no positions");
        let mut first = 0;
        self.each_position_while(hash, |p| {
            first = p;
            false
        });
        first
    }

    /// [`PositionHasher::each_position`] until `visit` returns `false`: the one
    /// implementation of every rule and layout.
    #[inline]
    pub(crate) fn each_position_while(&self, hash: KeyHash, mut visit: impl FnMut(u64) -> bool) {
        let m = self.bits;
        let [h1, h2, ..] = hash.0;
        match (self.rule, self.layout) {
            (_, Layout::SplitBlock256 | Layout::SplitBlock512) => {
                // The block from h1's upper 32 bits, a bit of each word from its lower 32.
                let block_bits = m / self.blocks;
                let block = split::block_index(h1, self.blocks);
                split::each_position(block, h1 as u32, block_bits, visit);
            }
            (PositionRule::Sha256Split4, _) => {
                for w in hash.0.iter().take(self.hashes as usize) {
                    if !visit(w % m) {
                        return;
                    }
                }
            }
            (PositionRule::GuavaMitz64, _) => {
                let mut combined = h1;
                for _ in 0..self.hashes {
                    if !visit((combined & i64::MAX as u64) % m) {
                        return;
                    }
                    combined = combined.wrapping_add(h2);
                }
            }
            (PositionRule::GuavaMitz32, _) => {
                // Java `int` arithmetic: wrapping, and `~c` for a negative `c`.
                let (a, b) = (h1 as i32, (h1 >> 32) as i32);
                for i in 1..=self.hashes as i32 {
                    let c = a.wrapping_add(i.wrapping_mul(b));
                    let c = if c < 0 { !c } else { c };
                    if !visit(u64::from(c.unsigned_abs()) % m) {
                        return;
                    }
                }
            }
            (_, Layout::Standard) | (PositionRule::Xxh64 | PositionRule::Xxh3_64, _) => {
                let (mut a, mut b) = (h1, h2);
                for i in 0..u64::from(self.hashes) {
                    if !visit(reduce(a, m)) {
                        return;
                    }
                    a = a.wrapping_add(b);
                    b = b.wrapping_add(i + 1);
                }
            }
            (_, Layout::Sharded { .. } | Layout::ShardedV2 { .. }) => {
                // The shard from h1; inside it, enhanced double hashing from h2 and a step
                // from h1. Under `sharded` the step is h1 (its top bits are the shard's: see
                // `Layout::Sharded`); under `sharded-v2`, h1 rotated by 32 bits, whose top
                // bits are h1's low ones: a step independent of the shard choice (for up to
                // 2^32 shards).
                let shard_bits = m / self.blocks;
                let base = reduce(h1, self.blocks) * shard_bits;
                let step = match self.layout {
                    Layout::ShardedV2 { .. } => h1.rotate_left(32),
                    _ => h1,
                };
                let (mut a, mut b) = (h2, step);
                for i in 0..u64::from(self.hashes) {
                    if !visit(base + reduce(a, shard_bits)) {
                        return;
                    }
                    a = a.wrapping_add(b);
                    b = b.wrapping_add(i + 1);
                }
            }
            (_, Layout::Blocked512) => {
                // The block from h1; inside it, the top 9 bits of h2, h2 * C, h2 * C^2, ...
                let base = reduce(h1, self.blocks) * BLOCK_BITS;
                let mut x = h2;
                for _ in 0..self.hashes {
                    if !visit(base + (x >> 55)) {
                        return;
                    }
                    x = x.wrapping_mul(BLOCK_STEP);
                }
            }
        }
    }
}
