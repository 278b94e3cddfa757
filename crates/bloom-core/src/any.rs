//! [`AnyFilter`]: whichever filter a snapshot holds (plain, counting or a scalable chain),
//! chosen by its header's layout, for readers that take any snapshot: the CLI and the C and
//! Python bindings.

use bloom_format::{DatasetGeneration, Header, LayoutId, Snapshot, SnapshotReader};

use crate::batch::ContainsEach;
use crate::capacity::Capacity;
use crate::config::FilterConfig;
use crate::counting::CountingBloomFilter;
use crate::filter::Filter;
use crate::key::Key;
use crate::plain::BloomFilter;
use crate::scalable::{ScalableBloomFilter, ScalableError};
use crate::snapshot::ReadSnapshotError;

/// Whichever filter a snapshot holds: a plain filter, a counting filter (layout
/// `counting-4bit`) or a scalable chain (layout `scalable`).
///
/// [`Filter::from_snapshot`] and [`Filter::from_payload`] choose the type by the header's
/// layout, so a reader that takes any snapshot needs no dispatch of its own. Every query
/// answers exactly as the filter type itself would.
///
/// ```
/// use bloom_core::{AnyFilter, BloomFilter, Filter};
///
/// let mut seen = BloomFilter::with_capacity(1_000, 0.01)?;
/// seen.insert("order-1");
/// let snapshot = seen.to_snapshot(0);
///
/// let mut any = AnyFilter::from_snapshot(&snapshot)?;
/// assert_eq!(any.kind(), "plain");
/// assert!(any.contains("order-1"));
/// assert!(any.insert("order-2"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub enum AnyFilter {
    /// A plain filter, of any layout but `counting-4bit` and `scalable`.
    Plain(BloomFilter),
    /// A counting filter.
    Counting(CountingBloomFilter),
    /// A scalable chain.
    Scalable(ScalableBloomFilter),
}

/// Runs `$body` with `$f` bound to the filter an [`AnyFilter`] holds.
macro_rules! with_any {
    ($any:expr, $f:ident => $body:expr) => {
        match $any {
            AnyFilter::Plain($f) => $body,
            AnyFilter::Counting($f) => $body,
            AnyFilter::Scalable($f) => $body,
        }
    };
}

impl AnyFilter {
    /// `"plain"`, `"counting"` or `"scalable"`.
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Plain(_) => "plain",
            Self::Counting(_) => "counting",
            Self::Scalable(_) => "scalable",
        }
    }

    /// Whether a key may have been inserted: `false` is definite. A byte key is answered
    /// with a `Result`, as in [`BloomFilter::contains`].
    #[must_use]
    #[inline]
    pub fn contains<K: Key + ?Sized>(&self, key: &K) -> K::Answer<bool> {
        with_any!(self, f => f.contains(key))
    }

    /// Inserts a key; whether it changed the filter (a chain: whether it was added). A byte
    /// key is answered with a `Result`, as in [`BloomFilter::insert`].
    pub fn insert<K: Key + ?Sized>(&mut self, key: &K) -> K::Answer<bool> {
        with_any!(self, f => f.insert(key))
    }

    /// Inserts every key; how many changed the filter, as the type's own `insert_all`
    /// counts them. Byte keys are answered with a `Result`: the first key a text encoding
    /// refuses stops the call, after every key before it was inserted.
    pub fn insert_all<I>(&mut self, keys: I) -> <I::Item as Key>::Answer<u64>
    where
        I: IntoIterator,
        I::Item: Key,
    {
        with_any!(self, f => f.insert_all(keys))
    }

    /// Whether each key may have been inserted: one answer per key, in order, exactly those
    /// of [`AnyFilter::contains`]. A plain filter answers a batch at a time
    /// ([`BloomFilter::contains_each`]); the others a key at a time.
    pub fn contains_each<I>(&self, keys: I) -> AnyContainsEach<'_, I::IntoIter>
    where
        I: IntoIterator,
        I::Item: Key,
    {
        match self {
            Self::Plain(f) => AnyContainsEach::Batched(f.contains_each(keys)),
            other => AnyContainsEach::OneByOne(other, keys.into_iter()),
        }
    }
}

/// The answers of [`AnyFilter::contains_each`], in order.
#[derive(Debug)]
#[must_use = "iterators are lazy: no key is looked up until the answers are read"]
// The batched variant holds its batch inline, as `ContainsEach` does: boxing it would cost an
// allocation per call for an iterator that lives on the caller's stack.
#[allow(clippy::large_enum_variant)]
pub enum AnyContainsEach<'a, I: Iterator>
where
    I::Item: Key,
{
    /// A plain filter's batches.
    Batched(ContainsEach<'a, I>),
    /// Another filter, asked a key at a time.
    OneByOne(&'a AnyFilter, I),
}

impl<I: Iterator> Iterator for AnyContainsEach<'_, I>
where
    I::Item: Key,
{
    type Item = <I::Item as Key>::Answer<bool>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Self::Batched(each) => each.next(),
            Self::OneByOne(filter, keys) => keys.next().map(|key| filter.contains(&key)),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match self {
            Self::Batched(each) => each.size_hint(),
            Self::OneByOne(_, keys) => keys.size_hint(),
        }
    }
}

impl From<BloomFilter> for AnyFilter {
    fn from(filter: BloomFilter) -> Self {
        Self::Plain(filter)
    }
}

impl From<CountingBloomFilter> for AnyFilter {
    fn from(filter: CountingBloomFilter) -> Self {
        Self::Counting(filter)
    }
}

impl From<ScalableBloomFilter> for AnyFilter {
    fn from(filter: ScalableBloomFilter) -> Self {
        Self::Scalable(filter)
    }
}

/// Every method answers as the held filter's own. Loading chooses the type by the header's
/// layout; its error is [`ScalableError`], whose `Snapshot` variant carries a plain or
/// counting filter's [`SnapshotError`](crate::SnapshotError).
impl Filter for AnyFilter {
    type LoadError = ScalableError;

    fn config(&self) -> &FilterConfig {
        with_any!(self, f => f.config())
    }

    fn items_inserted(&self) -> u64 {
        with_any!(self, f => f.items_inserted())
    }

    fn count_ones(&self) -> u64 {
        with_any!(self, f => f.count_ones())
    }

    fn positions(&self) -> u64 {
        with_any!(self, f => f.positions())
    }

    fn fill_ratio(&self) -> f64 {
        with_any!(self, f => f.fill_ratio())
    }

    fn estimated_items(&self) -> f64 {
        with_any!(self, f => f.estimated_items())
    }

    fn estimated_false_positive_rate(&self) -> f64 {
        with_any!(self, f => f.estimated_false_positive_rate())
    }

    fn capacity(&self) -> Option<Capacity> {
        with_any!(self, f => f.capacity())
    }

    fn remaining_capacity(&self) -> Option<u64> {
        with_any!(self, f => f.remaining_capacity())
    }

    fn is_over_capacity(&self) -> bool {
        with_any!(self, f => f.is_over_capacity())
    }

    fn header(&self, dataset_generation: impl Into<DatasetGeneration>) -> Header {
        with_any!(self, f => f.header(dataset_generation))
    }

    fn payload_len(&self) -> u64 {
        with_any!(self, f => f.payload_len())
    }

    fn for_each_payload_chunk<E>(&self, each: impl FnMut(&[u8]) -> Result<(), E>) -> Result<(), E> {
        with_any!(self, f => f.for_each_payload_chunk(each))
    }

    fn to_snapshot(&self, dataset_generation: impl Into<DatasetGeneration>) -> Snapshot {
        with_any!(self, f => f.to_snapshot(dataset_generation))
    }

    /// The payload read as the type the header's layout names reads it: a plain or counting
    /// filter's straight into its words.
    fn read_snapshot<R: std::io::Read>(
        reader: SnapshotReader<R>,
    ) -> Result<Self, ReadSnapshotError<ScalableError>> {
        match reader.header().layout {
            LayoutId::Scalable => ScalableBloomFilter::read_snapshot(reader).map(Self::Scalable),
            LayoutId::Counting4 => CountingBloomFilter::read_snapshot(reader)
                .map(Self::Counting)
                .map_err(|e| e.map_load(ScalableError::from)),
            _ => BloomFilter::read_snapshot(reader)
                .map(Self::Plain)
                .map_err(|e| e.map_load(ScalableError::from)),
        }
    }

    fn from_payload<E: From<Self::LoadError>>(
        header: &Header,
        fill: impl FnOnce(&mut dyn FnMut(&[u8])) -> Result<(), E>,
    ) -> Result<Self, E> {
        // Each type's own error, lifted into the chain's (which wraps the others').
        fn lift<T, E: From<ScalableError>>(
            loaded: Result<T, Lifted<E>>,
            into: fn(T) -> AnyFilter,
        ) -> Result<AnyFilter, E> {
            loaded.map(into).map_err(|Lifted(e)| e)
        }
        match header.layout {
            LayoutId::Scalable => lift(
                ScalableBloomFilter::from_payload(header, |sink| fill(sink).map_err(Lifted)),
                Self::Scalable,
            ),
            LayoutId::Counting4 => lift(
                CountingBloomFilter::from_payload(header, |sink| fill(sink).map_err(Lifted)),
                Self::Counting,
            ),
            _ => lift(
                BloomFilter::from_payload(header, |sink| fill(sink).map_err(Lifted)),
                Self::Plain,
            ),
        }
    }
}

/// A caller's error `E` carried through a filter type's loader, whose own errors become `E`
/// through [`ScalableError`].
struct Lifted<E>(E);

impl<E: From<ScalableError>> From<ScalableError> for Lifted<E> {
    fn from(e: ScalableError) -> Self {
        Self(E::from(e))
    }
}

impl<E: From<ScalableError>> From<crate::SnapshotError> for Lifted<E> {
    fn from(e: crate::SnapshotError) -> Self {
        Self(E::from(ScalableError::Snapshot(e)))
    }
}
