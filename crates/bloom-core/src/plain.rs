//! [`BloomFilter`]: the single-owner filter.

use bloom_format::{DatasetGeneration, Header};

use crate::batch::{self, Inserted, KeyHashing};
use crate::bits::{self, AlignedWords, AllocError, BitsError};
use crate::config::{FilterConfig, IncompatibleFilters};
use crate::encoding::EncodedKey;
#[cfg(doc)]
use crate::encoding::KeyError;
use crate::estimate;
use crate::filter::Filter;
use crate::kernel::{FirstTakes, Kernel, KernelProbe};
use crate::key::{self, Key, Takes};
use crate::position::{KeyHash, PositionHasher};
use crate::snapshot::SnapshotError;

/// A Bloom filter whose answers are the same in every process, on every machine and in every
/// release: positions come from SHA-256 over the key's encoded bytes.
///
/// `contains` returning `false` means the key was definitely never inserted. `true` means
/// *maybe*: confirm it in the primary store before treating the key as seen.
///
/// For inserts from several threads at once, use [`AtomicBloomFilter`](crate::AtomicBloomFilter).
#[derive(Clone)]
pub struct BloomFilter {
    config: FilterConfig,
    hasher: PositionHasher,
    /// The one-key probe and insert compiled for this configuration, if it has them.
    kernel: Kernel,
    /// `config.has_foreign_tables()`, kept at hand for every lookup.
    foreign_tables: bool,
    /// What a key of each form takes before it is hashed, for the encoding and
    /// `foreign_tables`: kept at hand for every lookup.
    takes: Takes,
    /// `takes` if `kernel` is the one a one-key insert tries first, all `Encode` otherwise.
    first: FirstTakes,
    words: AlignedWords<u64>,
    items: ItemCount,
}

/// A plain filter's item count: the count it started from (a snapshot's, `0`, or the
/// estimate after [`BloomFilter::union`] or [`BloomFilter::intersect`]) and the inserts since
/// then that changed a bit.
///
/// Every such insert sets a bit that was clear, and no bit is cleared without the count
/// starting again, so `added` never exceeds the filter's number of bits and cannot wrap.
/// An insert adds to it with one `add`; the count saturates at `2^64 - 1` when it is read
/// (a snapshot may record any count), not on every insert.
#[derive(Clone, Copy, Debug, Default)]
struct ItemCount {
    base: u64,
    added: u64,
}

impl ItemCount {
    const fn starting_at(base: u64) -> Self {
        Self { base, added: 0 }
    }

    /// Counts `changed` more inserts that changed a bit.
    #[inline(always)]
    const fn add(&mut self, changed: u64) {
        // Never wraps (at most one per bit of the filter; see the type's comment).
        self.added = self.added.wrapping_add(changed);
    }

    const fn get(self) -> u64 {
        self.base.saturating_add(self.added)
    }
}

/// Equal when they count the same, however they got there.
impl PartialEq for ItemCount {
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get()
    }
}

impl From<ItemCount> for u64 {
    fn from(count: ItemCount) -> Self {
        count.get()
    }
}

crate::filter::eq_by_contents!(BloomFilter);

impl BloomFilter {
    /// An empty filter.
    ///
    /// The bit array comes zeroed from the allocator. A large one is fresh pages that the
    /// system zeroes when they are first written, so the filter's memory grows as it fills.
    /// On a system that overcommits memory (Linux by default), running short of it therefore
    /// shows up when pages are first written, handled as the system handles it, not here.
    ///
    /// # Errors
    /// [`AllocError`] when the bit array cannot be allocated; allocation failure is reported,
    /// never an abort.
    pub fn new(config: FilterConfig) -> Result<Self, AllocError> {
        let len = bits::word_len(config.bits())?;
        let words = AlignedWords::zeroed(len, config.params().byte_len())?;
        Ok(Self::from_words_unchecked(config, words, 0))
    }

    /// A filter from the little-endian byte image of its bit array (the snapshot payload) and
    /// the recorded item count.
    ///
    /// # Errors
    /// [`BitsError::Length`] unless `bytes` is exactly `ceil(m / 8)` long,
    /// [`BitsError::Padding`] when bits past `m` are set, or [`BitsError::Alloc`].
    pub fn from_bytes(config: FilterConfig, bytes: &[u8], items: u64) -> Result<Self, BitsError> {
        let words = bits::bytes_to_words(bytes, config.bits())?;
        Ok(Self::from_words_unchecked(config, words, items))
    }

    pub(crate) fn from_words_unchecked(
        config: FilterConfig,
        words: AlignedWords<u64>,
        items: u64,
    ) -> Self {
        let hasher = config.hasher();
        let foreign_tables = config.has_foreign_tables();
        let kernel = Kernel::new(&hasher);
        let takes = Takes::new(config.encoding(), foreign_tables);
        Self {
            kernel,
            hasher,
            foreign_tables,
            takes,
            first: kernel.first_takes(takes),
            config,
            words,
            items: ItemCount::starting_at(items),
        }
    }

    fn hashing(&self) -> KeyHashing<'_> {
        KeyHashing {
            hasher: &self.hasher,
            encoding: self.config.encoding(),
            foreign_tables: self.foreign_tables,
            takes: self.takes,
            kernel: Some(self.kernel),
        }
    }

    /// A key outside ASCII went into a filter with foreign tables (see
    /// `FilterConfig::mark_tables_mixed`).
    fn mark_tables_mixed(&mut self) {
        self.foreign_tables = self.config.mark_tables_mixed();
        self.takes = Takes::new(self.config.encoding(), self.foreign_tables);
        self.first = self.kernel.first_takes(self.takes);
    }

    /// Inserts a key (text, bytes or already encoded: see [`Key`]). Returns whether any bit
    /// changed, so that before the call `insert(k) == !contains(k)`.
    ///
    /// A byte key is answered with a `Result`: [`KeyError::InvalidUtf8`] for bytes that are
    /// not UTF-8 under a text encoding, and then nothing is inserted.
    #[inline(always)]
    pub fn insert<K: Key + ?Sized>(&mut self, key: &K) -> K::Answer<bool> {
        K::answer(self.insert_key(key))
    }

    #[inline(always)]
    fn insert_key<K: Key + ?Sized>(&mut self, key: &K) -> Result<bool, K::Error> {
        debug_assert_eq!(
            self.first,
            self.kernel.first_takes(self.takes),
            "stale FirstTakes"
        );
        let (bytes, form) = key.raw();
        let changed =
            match Kernel::insert_first(self.first, &self.hasher, &mut self.words, bytes, form) {
                Some(changed) => changed,
                // Out of line with `self` alone, which keeps this path as short as `contains`
                // (`batch::insert_one`, the same steps for a many-key call, passes its parts:
                // measured 12 instructions more per key here).
                None => self.insert_other(key)?,
            };
        self.items.add(u64::from(changed));
        Ok(changed)
    }

    /// [`BloomFilter::insert_key`] for a key the first kernel did not take: through the
    /// filter's own kernel when it is another, else encoded first.
    #[inline(never)]
    fn insert_other<K: Key + ?Sized>(&mut self, key: &K) -> Result<bool, K::Error> {
        let (bytes, form) = key.raw();
        if !self.kernel.runs_first() {
            let take = self.takes.of(form);
            if let Some(changed) =
                self.kernel
                    .insert_taken(&self.hasher, &mut self.words, bytes, take)
            {
                return Ok(changed);
            }
        }
        self.insert_encoded(key)
    }

    /// [`BloomFilter::insert_key`] for a key that must be encoded first.
    #[inline(never)]
    fn insert_encoded<K: Key + ?Sized>(&mut self, key: &K) -> Result<bool, K::Error> {
        let (encoded, sensitive) = key::prepare(key, self.config.encoding(), self.foreign_tables)?;
        if sensitive {
            self.mark_tables_mixed();
        }
        let encoded = encoded.as_bytes();
        Ok(self.kernel.insert(&self.hasher, &mut self.words, encoded))
    }

    /// The key's hash under this filter's rule and salt. It depends on nothing else (not
    /// the size, not the layout), so the stages of a scalable filter, which share rule and
    /// salt, hash a key once for all of them.
    #[inline]
    pub(crate) fn key_hash(&self, encoded: &EncodedKey<'_>) -> KeyHash {
        self.hasher.hash(encoded)
    }

    /// Whether the bits of a key of hash `hash` ([`BloomFilter::key_hash`]) are all set,
    /// without the foreign-tables rule (a scalable filter applies it once for every stage).
    #[inline]
    pub(crate) fn probe_hash(&self, hash: KeyHash) -> bool {
        self.kernel.contains_hash(&self.hasher, &self.words, hash)
    }

    /// Sets the bits of a key of hash `hash`; `sensitive` says the key depends on Unicode
    /// tables this filter's bits were not built with (then the tables become "not
    /// recorded").
    #[inline]
    pub(crate) fn insert_hash(&mut self, hash: KeyHash, sensitive: bool) -> bool {
        if sensitive {
            self.mark_tables_mixed();
        }
        let changed = self.kernel.insert_hash(&self.hasher, &mut self.words, hash);
        self.items.add(u64::from(changed));
        changed
    }

    /// The bit array's words as bytes in memory order, for [`BloomFilter::words_from_le`]
    /// to finish: how a scalable filter's loader writes a stage's payload in place.
    pub(crate) fn image_mut(&mut self) -> &mut [u8] {
        bytemuck::cast_slice_mut(&mut self.words[..])
    }

    /// After [`BloomFilter::image_mut`] received a little-endian payload: the words in the
    /// machine's order (a no-op on little-endian machines), and the recorded item count.
    pub(crate) fn words_from_le(&mut self, items: u64) {
        for word in self.words.iter_mut() {
            *word = u64::from_le(*word);
        }
        self.items = ItemCount::starting_at(items);
    }

    /// Whether the filter's configuration has foreign Unicode tables (kept at hand).
    pub(crate) const fn foreign_tables(&self) -> bool {
        self.foreign_tables
    }

    crate::shared_methods::batch_methods!(mut; Plain);

    /// `insert_all`'s keys, set by the kernel ([`batch::insert_many`]).
    fn insert_many<K: Key>(
        &mut self,
        keys: impl Iterator<Item = K>,
        inserted: &mut Inserted,
    ) -> Result<(), K::Error> {
        let hashing = KeyHashing {
            hasher: &self.hasher,
            encoding: self.config.encoding(),
            foreign_tables: self.foreign_tables,
            takes: self.takes,
            kernel: Some(self.kernel),
        };
        batch::insert_many(&mut self.words, self.kernel, hashing, keys, inserted)
    }

    /// Records what a batch of inserts changed.
    fn took(&mut self, inserted: &Inserted) {
        if inserted.table_sensitive {
            self.mark_tables_mixed();
        }
        self.items.add(inserted.changed);
    }

    /// The one-key probe of `contains`: the kernel compiled for this configuration.
    #[inline(always)]
    fn probe(&self) -> KernelProbe<'_, AlignedWords<u64>> {
        self.kernel.probe(&self.hasher, &self.words)
    }

    /// Removes every key: all bits and the item count go back to zero, and the configuration
    /// (salt included) is kept.
    pub fn clear(&mut self) {
        self.words.fill(0);
        self.items = ItemCount::default();
    }

    /// Whether [`BloomFilter::union`] and [`BloomFilter::intersect`] accept `other`: the same
    /// configuration in every way (Guava's `isCompatible`).
    #[must_use]
    pub fn is_compatible(&self, other: &Self) -> bool {
        self.config.mismatch(&other.config).is_none()
    }

    /// Adds every key of `other` (bitwise OR).
    ///
    /// The recorded item count becomes the estimate of the union, since the two sets may
    /// overlap.
    ///
    /// # Errors
    /// [`IncompatibleFilters`] when the configurations differ in any way.
    pub fn union(&mut self, other: &Self) -> Result<(), IncompatibleFilters> {
        self.combine(other, |a, b| a | b)
    }

    /// Keeps only bits set in both filters (bitwise AND). The result contains every key that
    /// was in both; like any Bloom filter it may also say maybe for other keys.
    ///
    /// # Errors
    /// [`IncompatibleFilters`] when the configurations differ in any way.
    pub fn intersect(&mut self, other: &Self) -> Result<(), IncompatibleFilters> {
        self.combine(other, |a, b| a & b)
    }

    fn combine(
        &mut self,
        other: &Self,
        op: fn(u64, u64) -> u64,
    ) -> Result<(), IncompatibleFilters> {
        if let Some(mismatch) = self.config.mismatch(&other.config) {
            return Err(IncompatibleFilters { mismatch });
        }
        if self.config.tables() != other.config.tables() {
            self.mark_tables_mixed();
        }
        for (a, b) in self.words.iter_mut().zip(other.words.iter()) {
            *a = op(*a, *b);
        }
        let estimate = self.estimated_items().round() as u64;
        self.items = ItemCount::starting_at(estimate);
        Ok(())
    }

    /// The bit array as words; bit `i` is bit `i % 64` of word `i / 64`.
    #[must_use]
    pub fn as_words(&self) -> &[u64] {
        &self.words
    }

    /// The little-endian byte image of the bit array, `ceil(m / 8)` bytes: bit `i` is in byte
    /// `i / 8` under mask `1 << (i % 8)`. This is a copy; to write a snapshot without one, use
    /// [`BloomFilter::for_each_payload_chunk`].
    #[must_use]
    pub fn to_bytes(&self) -> Vec<u8> {
        let len = usize::try_from(self.config.params().byte_len()).unwrap_or(usize::MAX);
        bits::words_to_bytes(self.words.iter().copied(), len)
    }

    /// [`Filter::from_payload`] with the bit array written in place: `fill` receives the
    /// array's byte image, `ceil(m / 8)` bytes, to fill with the snapshot payload (typically
    /// `bloom_format::SnapshotReader::read_payload_into`). Loading makes one copy, from the
    /// source straight into the filter's words, with no buffer in between.
    ///
    /// # Errors
    /// As [`Filter::from_payload`]: the error `fill` returns, or [`SnapshotError`]
    /// (converted into `E`) when the header is not a plain filter's this build can use, the
    /// array cannot be allocated or its padding bits are set.
    pub fn from_payload_in_place<E: From<SnapshotError>>(
        header: &bloom_format::Header,
        fill: impl FnOnce(&mut [u8]) -> Result<(), E>,
    ) -> Result<Self, E> {
        let config = FilterConfig::from_header(header)?;
        let words = bits::fill_words_in_place::<u64, SnapshotError, E>(config.bits(), fill)?;
        Ok(Self::from_words_unchecked(config, words, header.item_count))
    }
}

impl Filter for BloomFilter {
    type LoadError = SnapshotError;

    crate::filter::owned_words_methods!();

    fn count_ones(&self) -> u64 {
        self.words.iter().map(|w| u64::from(w.count_ones())).sum()
    }

    fn estimated_false_positive_rate(&self) -> f64 {
        estimate::rate_of_words(&self.config, &self.words, |w| *w)
    }

    fn header(&self, dataset_generation: impl Into<DatasetGeneration>) -> Header {
        self.config
            .to_header(dataset_generation.into(), self.items.get())
    }

    fn payload_len(&self) -> u64 {
        self.config.params().byte_len()
    }

    crate::filter::from_payload_into_words!(from_words_unchecked);
}

/// Shows the configuration and a summary of the bits, never the bits themselves (gigabytes)
/// nor anything derived from the salt.
impl std::fmt::Debug for BloomFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        crate::filter::debug_summary(f, ("BloomFilter", "ones"), self, |_| {})
    }
}
