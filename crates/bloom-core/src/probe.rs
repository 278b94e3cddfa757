//! How a filter's bits are read and set for one hashed key: the probe of every lookup path,
//! plain or atomic, and the writes of an insert, by layout (split block, blocked, standard).

use std::sync::atomic::{AtomicU64, Ordering};

use crate::bits;
use crate::encoding::EncodedKey;
use crate::key::{Probe, Take};
use crate::position::{Block, KeyHash, PositionHasher, Split, split};

/// The cache line of a block in `words` (plain or atomic); `None` only for the hash of
/// another configuration.
#[inline(always)]
pub(crate) fn line<W>(words: &[W], block: Block) -> Option<&[W; 8]> {
    words
        .get(block.first_word..block.first_word + 8)
        .and_then(|w| w.try_into().ok())
}

/// [`line()`], to write.
#[inline(always)]
pub(crate) fn line_mut(words: &mut [u64], block: Block) -> Option<&mut [u64; 8]> {
    words
        .get_mut(block.first_word..block.first_word + 8)
        .and_then(|w| w.try_into().ok())
}

/// The `N` words of a split block in `words`; `None` only for the hash of another
/// configuration.
#[inline(always)]
pub(crate) fn split_line<W, const N: usize>(words: &[W], place: Split) -> Option<&[W; N]> {
    words
        .get(place.first_word..place.first_word + N)
        .and_then(|w| w.try_into().ok())
}

/// Whether one bit of a line is set.
#[inline(always)]
pub(crate) fn test_bit(line: &[u64; 8], word: usize, bit: u32) -> bool {
    (line[word & 7] >> bit) & 1 != 0
}

/// Sets one bit of a line; returns whether it was clear.
#[inline(always)]
pub(crate) fn set_bit(line: &mut [u64; 8], word: usize, bit: u32) -> bool {
    let w = &mut line[word & 7];
    let was_clear = (*w >> bit) & 1 == 0;
    *w |= 1 << bit;
    was_clear
}

/// Read access to a bit array, plain or atomic: the probe shared by every lookup path.
#[derive(Clone, Copy, Debug)]
pub(crate) enum BitsRef<'a> {
    /// A [`BloomFilter`](crate::BloomFilter)'s words.
    Plain(&'a [u64]),
    /// An [`AtomicBloomFilter`](crate::AtomicBloomFilter)'s words.
    Atomic(&'a [AtomicU64]),
}

/// The general one-key probe of any filter's bits ([`Probe`]): the rule's hash, then the
/// layout's probe.
#[derive(Clone, Copy)]
pub(crate) struct BitsProbe<'a> {
    bits: BitsRef<'a>,
    hasher: &'a PositionHasher,
}

impl<'a> BitsProbe<'a> {
    /// The probe of `bits`, whose keys are placed with `hasher`.
    pub(crate) fn new(bits: BitsRef<'a>, hasher: &'a PositionHasher) -> Self {
        Self { bits, hasher }
    }
}

impl Probe for BitsProbe<'_> {
    #[inline(always)]
    fn taken(self, bytes: &[u8], take: Take) -> Option<bool> {
        take.admits_bytes(bytes).then(|| self.encoded(bytes))
    }

    #[inline(always)]
    fn encoded(self, encoded: &[u8]) -> bool {
        let hash = self.hasher.hash(&EncodedKey::from_encoded(encoded));
        self.bits.contains(self.hasher, hash)
    }
}

impl BitsRef<'_> {
    /// The number of words.
    pub(crate) fn len(self) -> usize {
        match self {
            Self::Plain(words) => words.len(),
            Self::Atomic(words) => words.len(),
        }
    }

    /// Whether every position of a hashed key is set. Out-of-range positions (impossible for
    /// a hash of the same configuration) read as unset.
    ///
    /// Every position is probed, with no early exit: the probes are independent loads that
    /// overlap, and a data-dependent exit would be mispredicted on about every absent key.
    #[inline(always)]
    pub(crate) fn contains(self, hasher: &PositionHasher, hash: KeyHash) -> bool {
        if hasher.is_split() {
            return self.contains_split(hasher, hash);
        }
        if let Some(block) = hasher.block_of(hash) {
            let mut all = true;
            // One bounds check for the block; inside it, `word < 8` needs none.
            match self {
                Self::Plain(words) => {
                    let Some(line) = line(words, block) else {
                        return false;
                    };
                    block.each_bit(|word, bit| all &= test_bit(line, word, bit));
                }
                Self::Atomic(words) => {
                    let Some(line) = line(words, block) else {
                        return false;
                    };
                    // Acquire pairs with the Release of `fetch_or` in inserts.
                    block.each_bit(|word, bit| {
                        all &= (line[word & 7].load(Ordering::Acquire) >> bit) & 1 != 0;
                    });
                }
            }
            return all;
        }
        self.contains_scattered(hasher, hash)
    }

    /// Reads one word of every cache line the keys of a batch will probe, a few instructions
    /// per line, so that all of the batch's cache misses are in flight together before the
    /// probes need them. (A probe is too long for the CPU to run ahead across a whole batch
    /// of them: without this, only the misses of a few keys overlap.) Ordinary reads, whose
    /// values are folded together and kept.
    #[inline(never)]
    pub(crate) fn touch(self, hasher: &PositionHasher, hashes: &[KeyHash]) {
        fn fold<W>(
            words: &[W],
            hasher: &PositionHasher,
            hashes: &[KeyHash],
            read: impl Fn(&W) -> u64,
        ) -> u64 {
            let mut folded = 0;
            let mut word = |i: usize| folded ^= words.get(i).map_or(0, &read);
            for &hash in hashes {
                if let Some(place) = hasher.split_of(hash) {
                    word(place.first_word);
                    continue;
                }
                match hasher.block_of(hash) {
                    Some(block) => word(block.first_word),
                    None => hasher.each_position(hash, |position| word(bits::locate(position).0)),
                }
            }
            folded
        }
        let folded = match self {
            Self::Plain(words) => fold(words, hasher, hashes, |w| *w),
            Self::Atomic(words) => fold(words, hasher, hashes, |w| w.load(Ordering::Relaxed)),
        };
        std::hint::black_box(folded);
    }

    /// [`BitsRef::contains`] for a split-block layout: the block's words against the key's
    /// masks, one bit per word. Plain words, all of a filter's, are probed as the kernels
    /// probe them ([`split::contains_hash`]); atomic ones at the key's place.
    #[inline(always)]
    fn contains_split(self, hasher: &PositionHasher, hash: KeyHash) -> bool {
        let (wide, h) = (hasher.wide_split(), hash.first());
        let words = match self {
            Self::Plain(words) => return split::contains_hash(words, wide, h),
            Self::Atomic(words) => words,
        };
        let place = hasher.split_at(h);
        // Acquire pairs with the Release of `fetch_or` in inserts.
        if wide {
            split_line::<_, 8>(words, place).is_some_and(|l| {
                split::all_set(
                    &l.each_ref().map(|w| w.load(Ordering::Acquire)),
                    &split::masks_512(place.x),
                )
            })
        } else {
            split_line::<_, 4>(words, place).is_some_and(|l| {
                split::all_set(
                    &l.each_ref().map(|w| w.load(Ordering::Acquire)),
                    &split::masks_256(place.x),
                )
            })
        }
    }

    /// [`BitsRef::contains`] for the standard layout: `k` scattered probes.
    #[inline(never)]
    fn contains_scattered(self, hasher: &PositionHasher, hash: KeyHash) -> bool {
        let mut all = true;
        // One match per key, outside the loop over positions.
        match self {
            Self::Plain(words) => hasher.each_position(hash, |position| {
                let (word, mask) = bits::locate(position);
                all &= words.get(word).is_some_and(|w| w & mask != 0);
            }),
            Self::Atomic(words) => hasher.each_position(hash, |position| {
                let (word, mask) = bits::locate(position);
                // Acquire pairs with the Release of `fetch_or` in inserts.
                all &= words
                    .get(word)
                    .is_some_and(|w| w.load(Ordering::Acquire) & mask != 0);
            }),
        }
        all
    }
}

/// Sets every position of a hashed key in a plain filter's words; returns whether any of
/// them was unset. A single owner's words are written without a lock: setting the bits and
/// noting which were clear is one pass.
#[inline]
pub(crate) fn set_plain(words: &mut [u64], hasher: &PositionHasher, hash: KeyHash) -> bool {
    if hasher.is_split() {
        return split::insert_hash(words, hasher.wide_split(), hash.first());
    }
    let mut changed = false;
    if let Some(block) = hasher.block_of(hash) {
        if let Some(line) = line_mut(words, block) {
            block.each_bit(|word, bit| changed |= set_bit(line, word, bit));
        }
        return changed;
    }
    hasher.each_position(hash, |position| {
        let (word, mask) = bits::locate(position);
        if let Some(w) = words.get_mut(word) {
            changed |= *w & mask == 0;
            *w |= mask;
        }
    });
    changed
}

/// Sets every position of a hashed key in an atomic filter's words with `fetch_or`; returns
/// whether any of them was unset.
#[inline]
pub(crate) fn set_atomic(words: &[AtomicU64], hasher: &PositionHasher, hash: KeyHash) -> bool {
    if let Some(place) = hasher.split_of(hash) {
        let fetch_or = |words: &[AtomicU64], masks: &[u64]| {
            let mut changed = false;
            for (w, &mask) in words.iter().zip(masks) {
                // Release pairs with the Acquire loads of readers and snapshots.
                changed |= w.fetch_or(mask, Ordering::Release) & mask != mask;
            }
            changed
        };
        return match hasher.wide_split() {
            false => split_line::<_, 4>(words, place)
                .is_some_and(|l| fetch_or(l, &split::masks_256(place.x))),
            true => split_line::<_, 8>(words, place)
                .is_some_and(|l| fetch_or(l, &split::masks_512(place.x))),
        };
    }
    let mut changed = false;
    if let Some(block) = hasher.block_of(hash) {
        if let Some(line) = line(words, block) {
            block.each_bit(|word, bit| {
                let mask = 1 << bit;
                // Release pairs with the Acquire loads of readers and snapshots.
                changed |= line[word & 7].fetch_or(mask, Ordering::Release) & mask == 0;
            });
        }
        return changed;
    }
    hasher.each_position(hash, |position| {
        let (word, mask) = bits::locate(position);
        if let Some(w) = words.get(word) {
            // Release pairs with the Acquire loads of readers and snapshots.
            changed |= w.fetch_or(mask, Ordering::Release) & mask == 0;
        }
    });
    changed
}
