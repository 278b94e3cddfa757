//! The floor the benches measure the filters against: a rule's positions in the blocked
//! layout written inline, with nothing around them (no key encoding, no configuration, no rule
//! or layout dispatch, k fixed when the filter is made). No implementation of the same hash
//! and layout can do much less per key.

// Each bench uses the part it needs.
#![allow(dead_code)]

use bloom_core::{BloomFilter, FilterConfig, FilterParams, KeyEncoding, Layout, PositionRule};
use sha2::{Digest, Sha256};

/// One cache line: a block of the blocked-512 layout.
#[derive(Clone, Copy, Default)]
#[repr(align(64))]
struct Line([u64; 8]);

/// A blocked-512 filter reduced to its arithmetic: the hash's two words pick the block (by a
/// 64-bit range reduction) and the in-block bits (the top 9 bits of `h2 * C^i`), as the
/// specified layout does.
pub(crate) struct Skeleton<H> {
    pub(crate) name: &'static str,
    hash: H,
    lines: Vec<Line>,
    k: u32,
}

impl<H: Fn(&[u8]) -> (u64, u64)> Skeleton<H> {
    /// Sized as the planner sizes a blocked-512 filter for `n` keys at `fpr`.
    pub(crate) fn new(name: &'static str, hash: H, n: usize, fpr: f64) -> Self {
        let params = FilterParams::planned(Layout::Blocked512, n as u64, fpr).unwrap();
        Self {
            name,
            hash,
            lines: vec![Line::default(); (params.bits() / 512) as usize],
            k: params.hashes(),
        }
    }

    pub(crate) fn clear(&mut self) {
        self.lines.fill(Line::default());
    }

    /// Inserts each key; returns how many set a bit.
    pub(crate) fn insert_each(&mut self, keys: &[String]) -> u64 {
        keys.iter().map(|k| u64::from(self.probe::<true>(k))).sum()
    }

    /// Returns how many keys read "maybe".
    pub(crate) fn contains_each(&self, keys: &[String]) -> u64 {
        keys.iter()
            .map(|k| u64::from(self.lookup(k.as_bytes())))
            .sum()
    }

    /// [`Skeleton::contains_each`] 16 keys at a time: their hashes, then one read of each
    /// key's line (so that the batch's misses overlap), then the probes.
    pub(crate) fn contains_batched(&self, keys: &[String]) -> u64 {
        let mut sum = 0;
        for batch in keys.chunks(16) {
            let mut hashes = [(0, 0); 16];
            for (h, key) in hashes.iter_mut().zip(batch) {
                *h = (self.hash)(key.as_bytes());
            }
            let hashes = &hashes[..batch.len()];
            let touched = hashes
                .iter()
                .fold(0, |acc, &(h1, _)| acc ^ self.lines[self.block(h1)].0[0]);
            std::hint::black_box(touched);
            sum += hashes
                .iter()
                .map(|&h| u64::from(self.probe_hashed(h)))
                .sum::<u64>();
        }
        sum
    }

    fn lookup(&self, key: &[u8]) -> bool {
        self.probe_hashed((self.hash)(key))
    }

    fn probe_hashed(&self, (h1, mut x): (u64, u64)) -> bool {
        let line = &self.lines[self.block(h1)].0;
        let mut all = true;
        for _ in 0..self.k {
            let bit = x >> 55;
            all &= line[(bit >> 6) as usize] & (1 << (bit & 63)) != 0;
            x = x.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
        all
    }

    /// Sets the key's bits when `SET`; returns whether one was clear.
    fn probe<const SET: bool>(&mut self, key: &str) -> bool {
        let (h1, mut x) = (self.hash)(key.as_bytes());
        let block = self.block(h1);
        let line = &mut self.lines[block].0;
        let mut changed = false;
        for _ in 0..self.k {
            let bit = x >> 55;
            let word = &mut line[(bit >> 6) as usize];
            changed |= *word & (1 << (bit & 63)) == 0;
            if SET {
                *word |= 1 << (bit & 63);
            }
            x = x.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
        changed
    }

    fn block(&self, h1: u64) -> usize {
        ((u128::from(h1) * self.lines.len() as u128) >> 64) as usize
    }
}

/// The two words of `xxh3-128`: the low and high halves of XXH3-128.
pub(crate) fn xxh3_words(key: &[u8]) -> (u64, u64) {
    let h = xxhash_rust::xxh3::xxh3_128(key);
    (h as u64, (h >> 64) as u64)
}

/// The two words of `sha256-double`: the digest's first 16 bytes, little-endian.
pub(crate) fn sha256_words(key: &[u8]) -> (u64, u64) {
    let d = Sha256::digest(key);
    let word = |i: usize| u64::from_le_bytes(d[i..i + 8].try_into().unwrap());
    (word(0), word(8))
}

/// `n` keys of exactly 24 bytes: `prefix` (7 bytes) and 17 digits.
pub(crate) fn keys24(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i:017}")).collect()
}

/// An empty filter of `rule`, `layout` and `encoding` planned for `n` keys at `fpr`.
pub(crate) fn planned_filter(
    rule: PositionRule,
    layout: Layout,
    encoding: KeyEncoding,
    n: usize,
    fpr: f64,
) -> BloomFilter {
    let params = FilterParams::planned_for(rule, layout, n as u64, fpr).unwrap();
    let config = FilterConfig::new(params)
        .with_rule(rule)
        .unwrap()
        .with_encoding(encoding);
    BloomFilter::new(config).unwrap()
}
