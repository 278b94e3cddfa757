//! [`AtomicBloomFilter`]: inserts through `&self` from many threads, with no lost bits.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use bloom_format::{DatasetGeneration, Header};

use crate::batch::{BitsMut, Inserted, KeyHashing};
use crate::bits::{self, AlignedWords, AllocError};
use crate::config::FilterConfig;
use crate::encoding::EncodedKey;
use crate::encoding::UnicodeTables;
use crate::estimate;
use crate::filter::Filter;
use crate::key::{self, Key, Takes};
use crate::plain::BloomFilter;
use crate::position::PositionHasher;
use crate::probe::{BitsProbe, BitsRef};
use crate::snapshot::SnapshotError;

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
    /// What a key of each form takes before it is hashed, for the encoding and
    /// `foreign_tables`.
    takes: Takes,
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
        crate::filter::debug_summary(f, ("AtomicBloomFilter", "ones"), self, |_| {})
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
        let foreign_tables = config.has_foreign_tables();
        Self {
            hasher: config.hasher(),
            foreign_tables,
            takes: Takes::new(config.encoding(), foreign_tables),
            tables_mixed: AtomicBool::new(false),
            config,
            words,
            items: AtomicU64::new(items),
        }
    }

    fn hashing(&self) -> KeyHashing<'_> {
        KeyHashing {
            hasher: &self.hasher,
            encoding: self.config.encoding(),
            foreign_tables: self.foreign_tables,
            takes: self.takes,
            kernel: None,
        }
    }

    fn note_table_sensitive(&self, sensitive: bool) {
        if sensitive {
            self.tables_mixed.store(true, Ordering::Release);
        }
    }

    /// Inserts a key (text, bytes or already encoded: see [`Key`]); returns whether this call
    /// set any bit. A byte key is answered with a `Result`, as in [`BloomFilter::insert`].
    #[inline]
    pub fn insert<K: Key + ?Sized>(&self, key: &K) -> K::Answer<bool> {
        K::answer(key::with_bytes(
            key,
            self.config.encoding(),
            self.foreign_tables,
            |encoded, sensitive| {
                self.note_table_sensitive(sensitive);
                let hash = self.hasher.hash(&EncodedKey::from_encoded(encoded));
                let changed = (&*self.words).insert_key(&self.hasher, hash);
                if changed {
                    self.count_items(1);
                }
                changed
            },
        ))
    }

    // Each position of a batch is set with one locked write, without a probe first: the
    // fastest way for keys that are mostly new (a probe of a new key finds a bit missing and
    // is wasted), such as the keys a store commits.
    crate::shared_methods::batch_methods!(; Atomic);

    /// `insert_all`'s keys: each set with `fetch_or`, without a probe first (a key that is
    /// new gains nothing from one).
    fn insert_many<K: Key>(
        &self,
        keys: impl Iterator<Item = K>,
        inserted: &mut Inserted,
    ) -> Result<(), K::Error> {
        (&*self.words).set_each(self.hashing(), keys, inserted)
    }

    /// Records what a batch of inserts changed.
    fn took(&self, inserted: &Inserted) {
        self.note_table_sensitive(inserted.table_sensitive);
        self.count_items(inserted.changed);
    }

    /// The one-key probe of `contains`: the general probe of the rule's hash.
    #[inline(always)]
    fn probe(&self) -> BitsProbe<'_> {
        BitsProbe::new(BitsRef::Atomic(&self.words), &self.hasher)
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
            self.recorded_config(),
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

    /// The configuration a snapshot or copy records: the tables are "not recorded" once a
    /// key outside ASCII went in under foreign tables.
    fn recorded_config(&self) -> FilterConfig {
        if self.tables_mixed.load(Ordering::Acquire) {
            self.config.clone().with_tables(UnicodeTables::default())
        } else {
            self.config.clone()
        }
    }
}

impl Filter for AtomicBloomFilter {
    type LoadError = SnapshotError;

    fn config(&self) -> &FilterConfig {
        &self.config
    }

    fn items_inserted(&self) -> u64 {
        self.items.load(Ordering::Relaxed)
    }

    fn count_ones(&self) -> u64 {
        self.words
            .iter()
            .map(|w| u64::from(w.load(Ordering::Relaxed).count_ones()))
            .sum()
    }

    fn estimated_false_positive_rate(&self) -> f64 {
        estimate::rate_of_words(&self.config, &self.words, |w| w.load(Ordering::Relaxed))
    }

    /// The header, with the tables "not recorded" once a key outside ASCII went in under
    /// foreign tables.
    fn header(&self, dataset_generation: impl Into<DatasetGeneration>) -> Header {
        self.recorded_config()
            .to_header(dataset_generation.into(), self.items_inserted())
    }

    fn payload_len(&self) -> u64 {
        self.config.params().byte_len()
    }

    /// Reads the words as inserts continue: every bit set by an insert that returned before
    /// this call is in the image, as for [`AtomicBloomFilter::to_filter`], without a copy.
    fn for_each_payload_chunk<E>(&self, each: impl FnMut(&[u8]) -> Result<(), E>) -> Result<(), E> {
        bits::for_each_byte_chunk(
            self.words.iter().map(|w| w.load(Ordering::Acquire)),
            self.payload_len(),
            each,
        )
    }

    crate::filter::from_payload_into_words!(from_parts);
}

impl From<BloomFilter> for AtomicBloomFilter {
    fn from(filter: BloomFilter) -> Self {
        let items = filter.items_inserted();
        let config = filter.config().clone();
        let mut words: AlignedWords<AtomicU64> =
            AlignedWords::zeroed_or_abort(filter.as_words().len());
        for (atomic, &word) in words.iter_mut().zip(filter.as_words()) {
            *atomic.get_mut() = word;
        }
        Self::from_parts(config, words, items)
    }
}
