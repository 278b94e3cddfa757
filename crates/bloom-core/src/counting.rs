//! [`CountingBloomFilter`]: a filter of 4-bit counters, which can delete keys.

use bloom_format::{DatasetGeneration, Header, LayoutId, SnapshotReader};

use crate::bits::{self, AlignedWords, AllocError};
use crate::config::{CountingError, FilterConfig, IncompatibleFilters};
use crate::encoding::{EncodedKey, KeyError};
use crate::estimate;
use crate::filter::Filter;
use crate::key::{self, Key};
use crate::layout::Layout;
use crate::plain::BloomFilter;
use crate::position::PositionHasher;
use crate::snapshot::{ReadSnapshotError, SnapshotError};

/// The largest value of a counter; a counter that reaches it stays there.
pub const COUNTER_MAX: u8 = 15;

/// Counters per `u64` word.
const PER_WORD: u64 = 16;
/// The lowest bit of every counter of a word.
const LOW_BITS: u64 = 0x1111_1111_1111_1111;

/// Why a key was not removed. The filter is unchanged.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RemoveError {
    /// The filter says the key is absent (a counter of its positions is zero, or lower than
    /// the number of times the key's positions name it): it was never inserted, or was
    /// already removed as many times as it was inserted.
    #[error("the key is not in the filter (definitely absent); nothing was removed")]
    Absent,
    /// The filter's keys were encoded with Unicode tables other than this build's, and this
    /// key is outside ASCII: its positions under those tables are unknown.
    #[error(
        "the filter's Unicode tables differ from this build's, so this key's positions are unknown; nothing was removed"
    )]
    ForeignTables,
    /// The key is not valid for the filter's encoding.
    #[error(transparent)]
    Key(#[from] KeyError),
}

/// A Bloom filter of `m` 4-bit counters instead of bits, so that keys can be removed.
///
/// - `insert` adds one to each of the key's `k` counters, `remove` takes one off, and
///   `contains` says *maybe* when all of them are above zero. Positions are exactly those of
///   a [`Layout::Standard`] [`BloomFilter`] of the same configuration, and
///   [`CountingBloomFilter::to_bloom_filter`] gives that filter (a bit for each counter above
///   zero): a quarter of the size, for sharing.
/// - **Saturation.** A counter stops at 15 and is never decremented again, so an overflow
///   can only leave a stale *maybe*, never a false *absent*. With 4-bit counters the chance
///   that any counter reaches 16 is at most `m · (e ln 2 / 16)^16 ≈ 1.4e-15 · m` at the
///   optimal load; [`CountingBloomFilter::saturated_counters`] reports how many did.
/// - **Removing is safe only for inserted keys.** Removing a key the filter reports absent
///   is refused ([`RemoveError::Absent`]) and changes nothing. But a key that was never
///   inserted and happens to read *maybe* (a false positive) cannot be told apart from an
///   inserted one: removing it takes one off counters that belong to other keys, and one of
///   those keys may then be reported absent. That is inherent to counting filters. Remove
///   only keys you know were inserted (`bloom-store` removes only keys its primary store
///   confirmed present).
///
/// ```
/// use bloom_core::{CountingBloomFilter, FilterConfig, FilterParams, RemoveError};
///
/// let params = FilterParams::for_false_positive_rate(1_000, 0.01)?;
/// let mut filter = CountingBloomFilter::new(FilterConfig::new(params))?;
/// filter.insert("alice");
/// filter.insert("bob");
/// filter.remove("alice")?;
/// assert!(filter.contains("bob"));
/// assert_eq!(filter.remove("carol"), Err(RemoveError::Absent)); // never inserted: refused
/// let plain = filter.to_bloom_filter()?; // a quarter of the size, same answers
/// assert!(plain.contains("bob"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct CountingBloomFilter {
    config: FilterConfig,
    hasher: PositionHasher,
    foreign_tables: bool,
    /// Counter `i` is bits `4 (i % 16) .. 4 (i % 16) + 4` of word `i / 16`; written out as
    /// little-endian bytes, the low nibble of byte `i / 2` for even `i`.
    words: AlignedWords<u64>,
    items: u64,
}

crate::filter::eq_by_contents!(CountingBloomFilter);

/// Shows the configuration and a summary of the counters, never the counters themselves.
impl std::fmt::Debug for CountingBloomFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        crate::filter::debug_summary(f, ("CountingBloomFilter", "nonzero"), self, |out| {
            out.field("saturated", &self.saturated_counters());
        })
    }
}

/// The bits of a counter array of `m` counters: `4 m`.
pub(crate) fn counter_bits(counters: u64) -> u64 {
    counters.saturating_mul(4)
}

/// Bit 0 of each counter's nibble set when the counter is not zero.
#[inline]
fn nonzero_mask(word: u64) -> u64 {
    (word | word >> 1 | word >> 2 | word >> 3) & LOW_BITS
}

/// Bit 0 of each counter's nibble set when the counter is 15.
#[inline]
fn saturated_mask(word: u64) -> u64 {
    word & word >> 1 & word >> 2 & word >> 3 & LOW_BITS
}

impl CountingBloomFilter {
    /// An empty counting filter: `m` counters of 4 bits (`ceil(m / 2)` bytes), placed as the
    /// standard layout places bits.
    ///
    /// # Errors
    /// [`CountingError::Layout`] unless the configuration's layout is
    /// [`Layout::Standard`], [`CountingError::Rule`] for Guava's rules, or
    /// [`CountingError::Alloc`].
    pub fn new(config: FilterConfig) -> Result<Self, CountingError> {
        Self::check(&config)?;
        let len = bits::word_len(counter_bits(config.bits()))?;
        let words = AlignedWords::zeroed(len, config.bits().div_ceil(2))?;
        Ok(Self::from_words_unchecked(config, words, 0))
    }

    fn check(config: &FilterConfig) -> Result<(), CountingError> {
        if config.layout() != Layout::Standard {
            return Err(CountingError::Layout(config.layout()));
        }
        if config.rule().is_guava() {
            return Err(CountingError::Rule(config.rule()));
        }
        Ok(())
    }

    fn from_words_unchecked(config: FilterConfig, words: AlignedWords<u64>, items: u64) -> Self {
        Self {
            hasher: config.hasher(),
            foreign_tables: config.has_foreign_tables(),
            config,
            words,
            items,
        }
    }

    /// The value of counter `i` (0 to 15); 0 past the end (the padding counters are zero).
    #[must_use]
    pub fn counter(&self, i: u64) -> u8 {
        counter(&self.words, i)
    }

    #[cfg(test)]
    fn set(&mut self, i: u64, value: u8) {
        set_counter(&mut self.words, i, value);
    }

    /// Inserts a key (text, bytes or already encoded: see [`Key`]): each of its counters
    /// goes up by one (staying at 15 once there). Returns whether the key was absent before,
    /// as [`BloomFilter::insert`] does, and answers a byte key with a `Result` as it does.
    pub fn insert<K: Key + ?Sized>(&mut self, key: &K) -> K::Answer<bool> {
        K::answer(self.insert_key(key))
    }

    fn insert_key<K: Key + ?Sized>(&mut self, key: &K) -> Result<bool, K::Error> {
        let (encoded, sensitive) = key::prepare(key, self.config.encoding(), self.foreign_tables)?;
        if sensitive {
            self.mark_tables_mixed();
        }
        Ok(self.insert_hash(&encoded))
    }

    /// Inserts every key; returns how many were absent before their insert. Stops at a
    /// refused byte key, after every key before it was inserted, as
    /// [`BloomFilter::insert_all`] does.
    pub fn insert_all<I>(&mut self, keys: I) -> <I::Item as Key>::Answer<u64>
    where
        I: IntoIterator,
        I::Item: Key,
    {
        let mut absent = 0;
        let outcome = keys.into_iter().try_for_each(|key| {
            absent += u64::from(self.insert_key(&key)?);
            Ok(())
        });
        <I::Item as Key>::answer(outcome.map(|()| absent))
    }

    fn mark_tables_mixed(&mut self) {
        self.foreign_tables = self.config.mark_tables_mixed();
    }

    fn insert_hash(&mut self, key: &EncodedKey<'_>) -> bool {
        let Self { hasher, words, .. } = self;
        let mut was_absent = false;
        hasher.each_position(hasher.hash(key), |p| {
            let c = counter(words, p);
            was_absent |= c == 0;
            if c < COUNTER_MAX {
                set_counter(words, p, c + 1);
            }
        });
        self.items = self.items.saturating_add(1);
        was_absent
    }

    /// Whether a key may be in the filter. `false` is definite. Answers as
    /// [`BloomFilter::contains`] does.
    #[must_use]
    pub fn contains<K: Key + ?Sized>(&self, key: &K) -> K::Answer<bool> {
        K::answer(
            key::prepare(key, self.config.encoding(), self.foreign_tables)
                .map(|(encoded, sensitive)| sensitive || self.probe(&encoded)),
        )
    }

    fn probe(&self, key: &EncodedKey<'_>) -> bool {
        let mut all = true;
        self.hasher
            .each_position(self.hasher.hash(key), |p| all &= self.counter(p) > 0);
        all
    }

    /// Removes one insertion of a key: each of its counters below 15 goes down by one.
    ///
    /// # Errors
    /// [`RemoveError::Absent`] when the filter says the key is absent;
    /// [`RemoveError::ForeignTables`] for a key outside ASCII (and every already-encoded key)
    /// in a filter with other Unicode tables, whose positions this build cannot know;
    /// [`RemoveError::Key`] for a byte key a text encoding refuses. The filter is then
    /// unchanged. See the type's documentation for removing keys that were never inserted.
    pub fn remove<K: Key + ?Sized>(&mut self, key: &K) -> Result<(), RemoveError> {
        let (encoded, sensitive) =
            key::prepare(key, self.config.encoding(), self.foreign_tables).map_err(Into::into)?;
        if sensitive {
            return Err(RemoveError::ForeignTables);
        }
        self.remove_hash(&encoded)
    }

    fn remove_hash(&mut self, key: &EncodedKey<'_>) -> Result<(), RemoveError> {
        let Self { hasher, words, .. } = self;
        let hash = hasher.hash(key);
        // Takes one off each counter below 15, in position order, noting which (k <= 64). A
        // position named c times is taken off c times: reaching a zero means some counter
        // is below the times the key names it, so the key cannot be in the filter; every
        // change is then put back.
        let (mut taken, mut index, mut refused) = (0u64, 0u32, false);
        hasher.each_position(hash, |p| {
            if refused {
                return;
            }
            let c = counter(words, p);
            if c == 0 {
                refused = true;
                return;
            }
            if c < COUNTER_MAX {
                set_counter(words, p, c - 1);
                taken |= 1 << index;
            }
            index += 1;
        });
        if refused {
            let mut index = 0u32;
            hasher.each_position(hash, |p| {
                if (taken >> index) & 1 == 1 {
                    let c = counter(words, p);
                    set_counter(words, p, c + 1);
                }
                index += 1;
            });
            return Err(RemoveError::Absent);
        }
        self.items = self.items.saturating_sub(1);
        Ok(())
    }

    /// Adds every key of `other`: each counter becomes the sum of the two, saturating at 15.
    ///
    /// # Errors
    /// [`IncompatibleFilters`] when the configurations differ in any way.
    pub fn union(&mut self, other: &Self) -> Result<(), IncompatibleFilters> {
        if let Some(mismatch) = self.config.mismatch(&other.config) {
            return Err(IncompatibleFilters { mismatch });
        }
        if self.config.tables() != other.config.tables() {
            self.mark_tables_mixed();
        }
        for (a, b) in self.words.iter_mut().zip(other.words.iter()) {
            *a = saturating_add_nibbles(*a, *b);
        }
        self.items = self.items.saturating_add(other.items);
        Ok(())
    }

    /// The number of counters at 15, which are never decremented again (each is a position
    /// that stays *maybe* for good).
    #[must_use]
    pub fn saturated_counters(&self) -> u64 {
        self.words
            .iter()
            .map(|&w| u64::from(saturated_mask(w).count_ones()))
            .sum()
    }

    /// The plain filter of the same configuration with a bit set for every counter above
    /// zero: it answers every query exactly as this filter does, in a quarter of the space.
    ///
    /// # Errors
    /// [`AllocError`] when the bit array cannot be allocated.
    pub fn to_bloom_filter(&self) -> Result<BloomFilter, AllocError> {
        let len = bits::word_len(self.config.bits())?;
        let mut bits = AlignedWords::zeroed(len, self.config.params().byte_len())?;
        for (out, counters) in bits.iter_mut().zip(self.words.chunks(4)) {
            let mut word = 0u64;
            for (j, &w) in counters.iter().enumerate() {
                word |= compress_nibble_flags(nonzero_mask(w)) << (16 * j);
            }
            *out = word;
        }
        Ok(BloomFilter::from_words_unchecked(
            self.config.clone(),
            bits,
            self.items,
        ))
    }

    /// The configuration of a counting snapshot's header.
    ///
    /// # Errors
    /// [`SnapshotError::NotCounting`] unless the header's layout is
    /// [`LayoutId::Counting4`], and otherwise as [`FilterConfig::from_header`].
    pub(crate) fn config_of(header: &Header) -> Result<FilterConfig, SnapshotError> {
        if header.layout != LayoutId::Counting4 {
            return Err(SnapshotError::NotCounting {
                layout: header.layout,
            });
        }
        FilterConfig::from_header_placed(header, Layout::Standard)
    }

    /// The counting filter of a counting header, its counters' words made by `words` from
    /// their number of bits.
    fn filled<E: From<SnapshotError>>(
        header: &Header,
        words: impl FnOnce(u64) -> Result<AlignedWords<u64>, E>,
    ) -> Result<Self, E> {
        let config = Self::config_of(header)?;
        let words = words(counter_bits(config.bits()))?;
        Ok(Self::from_words_unchecked(config, words, header.item_count))
    }
}

impl Filter for CountingBloomFilter {
    type LoadError = SnapshotError;

    // The configuration's layout is [`Layout::Standard`] (the positions'), and the item count
    // is insertions less removals (every insert counts, repeated keys included).
    crate::filter::owned_words_methods!();

    /// The counters above zero: the set bits of the projected plain filter.
    fn count_ones(&self) -> u64 {
        self.words
            .iter()
            .map(|&w| u64::from(nonzero_mask(w).count_ones()))
            .sum()
    }

    /// `(X / m)^k` with `X` the counters above zero.
    fn estimated_false_positive_rate(&self) -> f64 {
        estimate::current_false_positive_rate(
            self.count_ones(),
            self.config.bits(),
            self.config.hashes(),
        )
    }

    /// The header of layout [`LayoutId::Counting4`].
    fn header(&self, dataset_generation: impl Into<DatasetGeneration>) -> Header {
        let mut header = self.config.to_header(dataset_generation.into(), self.items);
        header.layout = LayoutId::Counting4;
        header
    }

    /// `ceil(m / 2)` bytes, counter `i` in byte `i / 2`, in the low nibble for even `i` and
    /// the high nibble for odd `i`.
    fn payload_len(&self) -> u64 {
        self.config.bits().div_ceil(2)
    }

    /// A counting filter from a header of layout [`LayoutId::Counting4`]: a plain filter's is
    /// refused with [`SnapshotError::NotCounting`].
    fn from_payload<E: From<SnapshotError>>(
        header: &Header,
        fill: impl FnOnce(&mut dyn FnMut(&[u8])) -> Result<(), E>,
    ) -> Result<Self, E> {
        Self::filled(header, |bits| {
            bits::fill_words::<u64, SnapshotError, E>(bits, fill)
        })
    }

    /// One copy: the payload is read straight into the counters' words.
    fn read_snapshot<R: std::io::Read>(
        reader: SnapshotReader<R>,
    ) -> Result<Self, ReadSnapshotError<SnapshotError>> {
        let header = reader.header().clone();
        Self::filled(&header, |bits| {
            bits::fill_words_in_place::<u64, SnapshotError, _>(bits, |image| {
                reader
                    .read_payload_into(image)
                    .map(drop)
                    .map_err(ReadSnapshotError::Read)
            })
        })
    }
}

/// Counter `i` of `words`; 0 past the end.
#[inline]
fn counter(words: &[u64], i: u64) -> u8 {
    let word = words.get((i / PER_WORD) as usize).copied().unwrap_or(0);
    ((word >> ((i % PER_WORD) * 4)) & 0xF) as u8
}

#[inline]
fn set_counter(words: &mut [u64], i: u64, value: u8) {
    let shift = (i % PER_WORD) * 4;
    if let Some(word) = words.get_mut((i / PER_WORD) as usize) {
        *word = (*word & !(0xF << shift)) | (u64::from(value & 0xF) << shift);
    }
}

/// Adds two words of 16 nibbles each, nibble by nibble, saturating at 15.
fn saturating_add_nibbles(a: u64, b: u64) -> u64 {
    let mut out = 0u64;
    for i in 0..PER_WORD {
        let shift = i * 4;
        let sum = ((a >> shift) & 0xF) + ((b >> shift) & 0xF);
        out |= sum.min(u64::from(COUNTER_MAX)) << shift;
    }
    out
}

/// Gathers bit `4 i` of `flags` into bit `i`, for `i < 16`.
fn compress_nibble_flags(flags: u64) -> u64 {
    let mut out = 0u64;
    for i in 0..PER_WORD {
        out |= ((flags >> (4 * i)) & 1) << i;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{FilterParams, PositionRule};

    fn filter(bits: u64, hashes: u32) -> CountingBloomFilter {
        let params = FilterParams::new(bits, hashes).unwrap();
        CountingBloomFilter::new(FilterConfig::new(params)).unwrap()
    }

    #[test]
    fn nibble_helpers_agree_with_a_counter_by_counter_reading() {
        let words = [0u64, u64::MAX, 0x0123_4567_89AB_CDEF, 0xF0F0_0F0F_1000_0001];
        for &a in &words {
            for &b in &words {
                let sum = saturating_add_nibbles(a, b);
                for i in 0..16 {
                    let n = |w: u64| (w >> (4 * i)) & 0xF;
                    assert_eq!(n(sum), (n(a) + n(b)).min(15));
                    assert_eq!((nonzero_mask(a) >> (4 * i)) & 1, u64::from(n(a) != 0));
                    assert_eq!((saturated_mask(a) >> (4 * i)) & 1, u64::from(n(a) == 15));
                    assert_eq!(
                        (compress_nibble_flags(nonzero_mask(a)) >> i) & 1,
                        u64::from(n(a) != 0)
                    );
                }
            }
        }
    }

    #[test]
    fn payload_nibble_order_is_low_nibble_first() {
        let mut f = filter(5, 1);
        f.set(0, 1);
        f.set(1, 2);
        f.set(4, 15);
        assert_eq!(f.to_snapshot(0).payload()[..], [0x21, 0x00, 0x0F]);
        assert_eq!(f.counter(4), 15);
        assert_eq!(f.counter(5), 0);
    }

    #[test]
    fn other_layouts_and_guava_rules_are_refused() {
        let blocked = FilterParams::planned(Layout::Blocked512, 1000, 0.01).unwrap();
        assert!(matches!(
            CountingBloomFilter::new(FilterConfig::new(blocked)),
            Err(CountingError::Layout(Layout::Blocked512))
        ));
        let guava = FilterConfig::new(FilterParams::new(6400, 3).unwrap())
            .with_rule(PositionRule::GuavaMitz64)
            .unwrap();
        assert!(matches!(
            CountingBloomFilter::new(guava),
            Err(CountingError::Rule(PositionRule::GuavaMitz64))
        ));
    }

    #[test]
    fn a_key_named_twice_by_its_positions_needs_two_counts() {
        // k = 4 positions in 2 counters: every key names some counter at least twice.
        let mut f = filter(2, 4);
        let mut g = f.clone();
        f.insert("a");
        assert!(f.contains("a"));
        // Each counter one below the times the key names it (but not zero): "a" reads maybe,
        // yet cannot have been inserted, since some counter is named at least twice.
        let positions: Vec<u64> = f
            .config()
            .positions(&f.config().encoding().encode_str("a"))
            .collect();
        for p in 0..2 {
            let times = positions.iter().filter(|&&q| q == p).count() as u8;
            g.set(p, times.saturating_sub(1).max(1));
        }
        assert!(g.contains("a"));
        let before = g.clone();
        assert_eq!(g.remove("a"), Err(RemoveError::Absent));
        assert_eq!(g, before);
        assert_eq!(f.remove("a"), Ok(()));
        assert_eq!(f.count_ones(), 0);
    }
}
