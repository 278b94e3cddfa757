//! [`AtomicBloomFilter`]: inserts through `&self` from many threads, with no lost bits.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::batch::{BitsMut, BitsRef, ContainsEach, Inserted, KeyHashing};
use crate::bits::{self, AlignedWords, AllocError, BitsError};
use crate::config::FilterConfig;
use crate::encoding::UnicodeTables;
use crate::estimate;
use crate::filter::BloomFilter;
use crate::key::{self, Key};
use crate::position::PositionHasher;

/// A Bloom filter that many threads can insert into and query at once.
///
/// Each bit is set with an atomic `fetch_or`, so concurrent inserts never lose each other's
/// bits (a plain read-modify-write of a shared byte array does). Bits only ever go from 0 to
/// 1, so a copy taken while inserts run ([`AtomicBloomFilter::to_filter`]) holds every bit set
/// by inserts that finished before the copy started; that is the consistency a snapshot needs.
pub struct AtomicBloomFilter {
    config: FilterConfig,
    hasher: PositionHasher,
    /// `config.has_foreign_tables()`.
    foreign_tables: bool,
    /// Set when a key outside ASCII went into a filter with foreign tables: copies then
    /// record no table version (see `BloomFilter`).
    tables_mixed: AtomicBool,
    words: AlignedWords<AtomicU64>,
    items: AtomicU64,
}

/// Shows the configuration and a summary of the bits, never the bits themselves nor anything
/// derived from the salt.
impl std::fmt::Debug for AtomicBloomFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AtomicBloomFilter")
            .field("config", &self.config)
            .field("ones", &self.count_ones())
            .field("items", &self.items_inserted())
            .finish_non_exhaustive()
    }
}

impl AtomicBloomFilter {
    /// An empty filter.
    ///
    /// # Errors
    /// [`AllocError`] when the bit array cannot be allocated.
    pub fn new(config: FilterConfig) -> Result<Self, AllocError> {
        let len = bits::word_len(config.bits())?;
        let words = AlignedWords::zeroed(len, config.params().byte_len())?;
        Ok(Self::from_parts(config, words, 0))
    }

    fn from_parts(config: FilterConfig, words: AlignedWords<AtomicU64>, items: u64) -> Self {
        Self {
            hasher: config.hasher(),
            foreign_tables: config.has_foreign_tables(),
            tables_mixed: AtomicBool::new(false),
            config,
            words,
            items: AtomicU64::new(items),
        }
    }

    /// A filter from its snapshot payload delivered in chunks; see
    /// [`BloomFilter::from_payload`]. The atomic words are allocated once and filled as the
    /// chunks arrive: loading holds one copy of the payload.
    ///
    /// # Errors
    /// As [`BloomFilter::from_payload`].
    pub fn from_payload<E: From<BitsError>>(
        config: FilterConfig,
        items: u64,
        fill: impl FnOnce(&mut dyn FnMut(&[u8])) -> Result<(), E>,
    ) -> Result<Self, E> {
        let words = bits::WordSink::<AtomicU64>::fill(config.bits(), fill)?;
        Ok(Self::from_parts(config, words, items))
    }

    /// Hands the byte image of the bit array to `each` in order, a few KiB at a time, reading
    /// the words as inserts continue: every bit set by an insert that returned before this
    /// call is in the image, as for [`AtomicBloomFilter::to_filter`], without a copy.
    ///
    /// # Errors
    /// The first error `each` returns.
    pub fn for_each_payload_chunk<E>(
        &self,
        each: impl FnMut(&[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        bits::for_each_byte_chunk(
            self.words.iter().map(|w| w.load(Ordering::Acquire)),
            self.config.params().byte_len(),
            each,
        )
    }

    /// The configuration a copy of this filter records: the tables are "not recorded" once a
    /// key outside ASCII went in under foreign tables.
    #[must_use]
    pub fn current_config(&self) -> FilterConfig {
        if self.tables_mixed.load(Ordering::Acquire) {
            self.config.clone().with_tables(UnicodeTables::default())
        } else {
            self.config.clone()
        }
    }

    fn hashing(&self) -> KeyHashing<'_> {
        KeyHashing {
            hasher: &self.hasher,
            encoding: self.config.encoding(),
            foreign_tables: self.foreign_tables,
        }
    }

    fn note_table_sensitive(&self, sensitive: bool) {
        if sensitive {
            self.tables_mixed.store(true, Ordering::Release);
        }
    }

    /// The configuration.
    #[must_use]
    pub fn config(&self) -> &FilterConfig {
        &self.config
    }

    /// Inserts a key (text, bytes or already encoded: see [`Key`]); returns whether this call
    /// set any bit. A byte key is answered with a `Result`, as in [`BloomFilter::insert`].
    #[inline]
    pub fn insert<K: Key + ?Sized>(&self, key: &K) -> K::Answer<bool> {
        K::answer(
            key::prepare(key, self.config.encoding(), self.foreign_tables).map(
                |(encoded, sensitive)| {
                    self.note_table_sensitive(sensitive);
                    let changed =
                        (&*self.words).insert_key(&self.hasher, self.hasher.hash(&encoded));
                    if changed {
                        self.count_items(1);
                    }
                    changed
                },
            ),
        )
    }

    /// Inserts every key; returns how many of them this call changed a bit for.
    ///
    /// Faster per key than `insert` in a loop, as [`BloomFilter::insert_all`] is, and stops
    /// at a refused byte key as it does.
    pub fn insert_all<I>(&self, keys: I) -> <I::Item as Key>::Answer<u64>
    where
        I: IntoIterator,
        I::Item: Key,
    {
        let mut inserted = Inserted::default();
        let outcome = (&*self.words).insert_each(self.hashing(), keys.into_iter(), &mut inserted);
        self.note_table_sensitive(inserted.table_sensitive);
        self.count_items(inserted.changed);
        <I::Item as Key>::answer(outcome.map(|()| inserted.changed))
    }

    /// Sets the bits of every key with one locked write per position, without probing them
    /// first; returns how many keys changed a bit. Faster than
    /// [`AtomicBloomFilter::insert_all`] for keys that are new, such as keys a lookup just
    /// found absent (a probe of a new key finds a bit missing and is wasted); for keys that
    /// may be in already, `insert_all` writes nothing for those and keeps their cache lines
    /// clean. Stops at a refused byte key as `insert_all` does.
    pub fn set_all<I>(&self, keys: I) -> <I::Item as Key>::Answer<u64>
    where
        I: IntoIterator,
        I::Item: Key,
    {
        let mut inserted = Inserted::default();
        let outcome = (&*self.words).set_each(self.hashing(), keys.into_iter(), &mut inserted);
        self.note_table_sensitive(inserted.table_sensitive);
        self.count_items(inserted.changed);
        <I::Item as Key>::answer(outcome.map(|()| inserted.changed))
    }

    /// Whether a key may have been inserted. `false` is definite for every insert that
    /// finished before this call started. Answers as [`BloomFilter::contains`] does.
    #[must_use]
    #[inline]
    pub fn contains<K: Key + ?Sized>(&self, key: &K) -> K::Answer<bool> {
        K::answer(
            key::prepare(key, self.config.encoding(), self.foreign_tables).map(
                |(encoded, sensitive)| {
                    sensitive
                        || BitsRef::Atomic(&self.words)
                            .contains(&self.hasher, self.hasher.hash(&encoded))
                },
            ),
        )
    }

    /// Whether each key may have been inserted: one answer per key, in order, exactly those
    /// of `contains`, computed a batch of keys at a time as in
    /// [`BloomFilter::contains_each`].
    pub fn contains_each<I>(&self, keys: I) -> ContainsEach<'_, I::IntoIter>
    where
        I: IntoIterator,
        I::Item: Key,
    {
        ContainsEach::new(
            BitsRef::Atomic(&self.words),
            self.hashing(),
            keys.into_iter(),
        )
    }

    /// A copy of the bits as a [`BloomFilter`], taken word by word while inserts may continue.
    ///
    /// Every bit set by an insert that returned before this call is in the copy.
    ///
    /// # Errors
    /// [`AllocError`] when the copy cannot be allocated.
    pub fn to_filter(&self) -> Result<BloomFilter, AllocError> {
        let mut words = AlignedWords::zeroed(self.words.len(), self.config.params().byte_len())?;
        for (copy, word) in words.iter_mut().zip(self.words.iter()) {
            *copy = word.load(Ordering::Acquire);
        }
        Ok(BloomFilter::from_words_unchecked(
            self.current_config(),
            words,
            self.items_inserted(),
        ))
    }

    /// Adds `changed` to the item count, saturating at `u64::MAX` as [`BloomFilter`]'s does
    /// (a count loaded from a snapshot may already be near it).
    fn count_items(&self, changed: u64) {
        if changed == 0 {
            return;
        }
        // `fetch_update` retries only when another thread changed the count meanwhile.
        let _ = self
            .items
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                Some(n.saturating_add(changed))
            });
    }

    /// The number of inserts that set at least one bit.
    #[must_use]
    pub fn items_inserted(&self) -> u64 {
        self.items.load(Ordering::Relaxed)
    }

    crate::capacity::capacity_methods!();

    /// The number of set bits.
    #[must_use]
    pub fn count_ones(&self) -> u64 {
        self.words
            .iter()
            .map(|w| u64::from(w.load(Ordering::Relaxed).count_ones()))
            .sum()
    }

    /// `X / m`.
    #[must_use]
    pub fn fill_ratio(&self) -> f64 {
        estimate::fill_ratio(self.count_ones(), self.config.bits())
    }

    /// The estimated number of distinct keys inserted; see
    /// [`BloomFilter::estimated_items`].
    #[must_use]
    pub fn estimated_items(&self) -> f64 {
        estimate::estimated_items(self.count_ones(), self.config.bits(), self.config.hashes())
    }

    /// The false-positive rate at the current fill: `(X / m)^k` in the standard layout, and
    /// the mean over blocks (or shards) of `(X_p / part bits)^k` where a key's bits all fall
    /// in one part (see [`estimate::partitioned_false_positive_rate`]).
    #[must_use]
    pub fn estimated_false_positive_rate(&self) -> f64 {
        estimate::rate_of_words(&self.config, &self.words, |w| w.load(Ordering::Relaxed))
    }
}

impl From<BloomFilter> for AtomicBloomFilter {
    fn from(filter: BloomFilter) -> Self {
        let items = filter.items_inserted();
        let config = filter.config().clone();
        let mut words: AlignedWords<AtomicU64> =
            AlignedWords::zeroed(filter.as_words().len(), config.params().byte_len())
                .unwrap_or_else(|_| {
                    let layout = std::alloc::Layout::array::<u64>(filter.as_words().len())
                        .unwrap_or(std::alloc::Layout::new::<u64>());
                    std::alloc::handle_alloc_error(layout)
                });
        for (atomic, &word) in words.iter_mut().zip(filter.as_words()) {
            *atomic.get_mut() = word;
        }
        Self::from_parts(config, words, items)
    }
}
