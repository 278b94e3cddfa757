//! [`AtomicBloomFilter`]: inserts through `&self` from many threads, with no lost bits.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::batch::{BitsMut, BitsRef, ContainsEach};
use crate::bits::{self, AllocError};
use crate::config::FilterConfig;
use crate::encoding::{EncodedKey, KeyError};
use crate::estimate;
use crate::filter::BloomFilter;
use crate::position::PositionHasher;

/// A Bloom filter that many threads can insert into and query at once.
///
/// Each bit is set with an atomic `fetch_or`, so concurrent inserts never lose each other's
/// bits (a plain read-modify-write of a shared byte array does). Bits only ever go from 0 to
/// 1, so a copy taken while inserts run ([`AtomicBloomFilter::to_filter`]) holds every bit set
/// by inserts that finished before the copy started; that is the consistency a snapshot needs.
#[derive(Debug)]
pub struct AtomicBloomFilter {
    config: FilterConfig,
    hasher: PositionHasher,
    words: Box<[AtomicU64]>,
    items: AtomicU64,
}

impl AtomicBloomFilter {
    /// An empty filter.
    ///
    /// # Errors
    /// [`AllocError`] when the bit array cannot be allocated.
    pub fn new(config: FilterConfig) -> Result<Self, AllocError> {
        let len = bits::word_len(config.bits())?;
        let mut words = Vec::new();
        words.try_reserve_exact(len).map_err(|_| AllocError {
            bytes: config.params().byte_len(),
        })?;
        words.extend((0..len).map(|_| AtomicU64::new(0)));
        Ok(Self {
            hasher: config.hasher(),
            config,
            words: words.into_boxed_slice(),
            items: AtomicU64::new(0),
        })
    }

    /// The configuration.
    #[must_use]
    pub fn config(&self) -> &FilterConfig {
        &self.config
    }

    /// Inserts a text key; returns whether this call set any bit.
    pub fn insert(&self, key: &str) -> bool {
        self.insert_encoded(&self.config.encode_str(key))
    }

    /// Inserts a byte key.
    ///
    /// # Errors
    /// [`KeyError::InvalidUtf8`] for non-UTF-8 bytes under a text encoding.
    pub fn insert_bytes(&self, key: &[u8]) -> Result<bool, KeyError> {
        Ok(self.insert_encoded(&self.config.encode_bytes(key)?))
    }

    /// Inserts an already-encoded key; returns whether this call set any bit.
    pub fn insert_encoded(&self, key: &EncodedKey<'_>) -> bool {
        let changed = (&*self.words).insert_key(&self.hasher, self.hasher.hash(key));
        if changed {
            self.items.fetch_add(1, Ordering::Relaxed);
        }
        changed
    }

    /// Inserts every text key; returns how many of them this call changed a bit for.
    ///
    /// Faster per key than `insert` in a loop, as [`BloomFilter::insert_all`] is.
    pub fn insert_all<I>(&self, keys: I) -> u64
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        let changed =
            (&*self.words).insert_each(&self.hasher, self.config.encoding(), keys.into_iter());
        self.items.fetch_add(changed, Ordering::Relaxed);
        changed
    }

    /// Whether a text key may have been inserted. `false` is definite for every insert that
    /// finished before this call started.
    #[must_use]
    pub fn contains(&self, key: &str) -> bool {
        self.contains_encoded(&self.config.encode_str(key))
    }

    /// Whether a byte key may have been inserted.
    ///
    /// # Errors
    /// [`KeyError::InvalidUtf8`] for non-UTF-8 bytes under a text encoding.
    pub fn contains_bytes(&self, key: &[u8]) -> Result<bool, KeyError> {
        Ok(self.contains_encoded(&self.config.encode_bytes(key)?))
    }

    /// Whether an already-encoded key may have been inserted.
    #[must_use]
    pub fn contains_encoded(&self, key: &EncodedKey<'_>) -> bool {
        BitsRef::Atomic(&self.words).contains(&self.hasher, self.hasher.hash(key))
    }

    /// Whether each text key may have been inserted: one answer per key, in order, exactly
    /// those of `contains`, computed a batch of keys at a time as in
    /// [`BloomFilter::contains_each`].
    pub fn contains_each<I>(&self, keys: I) -> ContainsEach<'_, I::IntoIter>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        ContainsEach::new(
            BitsRef::Atomic(&self.words),
            &self.hasher,
            self.config.encoding(),
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
        let mut words = Vec::new();
        words
            .try_reserve_exact(self.words.len())
            .map_err(|_| AllocError {
                bytes: self.config.params().byte_len(),
            })?;
        words.extend(self.words.iter().map(|w| w.load(Ordering::Acquire)));
        Ok(BloomFilter::from_words_unchecked(
            self.config.clone(),
            words,
            self.items_inserted(),
        ))
    }

    /// The number of inserts that set at least one bit.
    #[must_use]
    pub fn items_inserted(&self) -> u64 {
        self.items.load(Ordering::Relaxed)
    }

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

    /// The false-positive rate at the current fill: `(X / m)^k`.
    #[must_use]
    pub fn estimated_false_positive_rate(&self) -> f64 {
        estimate::current_false_positive_rate(
            self.count_ones(),
            self.config.bits(),
            self.config.hashes(),
        )
    }
}

impl From<BloomFilter> for AtomicBloomFilter {
    fn from(filter: BloomFilter) -> Self {
        let items = filter.items_inserted();
        let config = filter.config().clone();
        let words: Box<[AtomicU64]> = filter
            .as_words()
            .iter()
            .map(|&w| AtomicU64::new(w))
            .collect();
        Self {
            hasher: config.hasher(),
            config,
            words,
            items: AtomicU64::new(items),
        }
    }
}
