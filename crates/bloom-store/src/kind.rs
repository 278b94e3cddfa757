//! The two kinds of filter a store keeps: a plain one, set lock-free from many threads, or a
//! counting one, which can take keys out.

use std::convert::Infallible;
use std::path::Path;
use std::sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use bloom_core::{
    AllocError, AtomicBloomFilter, BloomFilter, CountingBloomFilter, CountingError, EncodedKey,
    Filter, FilterConfig, Key, RemoveError,
};
use bloom_format::{AtomicFile, SnapshotWriter, StoreBinding, StreamWriteError, WriteError};

use crate::history::HistoryPoint;

/// The filter of a store.
pub(crate) enum StoreFilter {
    Plain(AtomicBloomFilter),
    /// Behind a lock: counters are read-modify-write, and a remove checks all of a key's
    /// counters before it changes any.
    Counting(RwLock<CountingBloomFilter>),
}

impl StoreFilter {
    /// An empty filter of `config`, counting or not.
    pub(crate) fn new(config: FilterConfig, counting: bool) -> Result<Self, CountingError> {
        Ok(if counting {
            Self::Counting(RwLock::new(CountingBloomFilter::new(config)?))
        } else {
            Self::Plain(AtomicBloomFilter::new(config)?)
        })
    }

    fn read(lock: &RwLock<CountingBloomFilter>) -> RwLockReadGuard<'_, CountingBloomFilter> {
        // Every change to the counters completes before the guard drops (no panics inside).
        lock.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(lock: &RwLock<CountingBloomFilter>) -> RwLockWriteGuard<'_, CountingBloomFilter> {
        lock.write().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn is_counting(&self) -> bool {
        matches!(self, Self::Counting(_))
    }

    /// The configuration keys are encoded and placed with.
    pub(crate) fn config(&self) -> FilterConfig {
        with_filter!(self, f => f.config().clone())
    }

    pub(crate) fn contains(&self, key: &EncodedKey<'_>) -> bool {
        with_filter!(self, f => f.contains(key))
    }

    pub(crate) fn insert(&self, key: &EncodedKey<'_>) {
        match self {
            Self::Plain(f) => {
                f.insert(key);
            }
            Self::Counting(f) => {
                Self::write(f).insert(key);
            }
        }
    }

    /// Whether each already-encoded key may be in the filter, a batch at a time.
    pub(crate) fn contains_each(&self, keys: &[EncodedKey<'_>]) -> Vec<bool> {
        match self {
            Self::Plain(f) => f.contains_each(keys).collect(),
            Self::Counting(f) => {
                let filter = Self::read(f);
                keys.iter().map(|key| filter.contains(key)).collect()
            }
        }
    }

    /// Inserts keys that are already encoded: keys being committed or taken in, so mostly
    /// new ones, whose bits are set without a probe first.
    pub(crate) fn insert_all<K: Key<Error = Infallible>>(&self, keys: impl Iterator<Item = K>) {
        match self {
            Self::Plain(f) => {
                let _changed = f.insert_all(keys);
            }
            Self::Counting(f) => {
                let _absent = Self::write(f).insert_all(keys);
            }
        }
    }

    /// Takes one insertion of the key off a counting filter; a plain filter keeps its bits.
    pub(crate) fn remove(&self, key: &EncodedKey<'_>) -> Result<(), RemoveError> {
        match self {
            Self::Plain(_) => Ok(()),
            Self::Counting(f) => Self::write(f).remove(key),
        }
    }

    pub(crate) fn estimated_items(&self) -> f64 {
        with_filter!(self, f => f.estimated_items())
    }

    pub(crate) fn fill_ratio(&self) -> f64 {
        with_filter!(self, f => f.fill_ratio())
    }

    pub(crate) fn estimated_false_positive_rate(&self) -> f64 {
        with_filter!(self, f => f.estimated_false_positive_rate())
    }

    /// Counters at 15, for a counting filter.
    pub(crate) fn saturated_counters(&self) -> Option<u64> {
        match self {
            Self::Plain(_) => None,
            Self::Counting(f) => Some(Self::read(f).saturated_counters()),
        }
    }

    /// A plain copy (the projection of a counting filter).
    pub(crate) fn to_filter(&self) -> Result<BloomFilter, AllocError> {
        match self {
            Self::Plain(f) => f.to_filter(),
            Self::Counting(f) => Self::read(f).to_bloom_filter(),
        }
    }

    /// A copy of a counting filter's counters, taken at one instant (under its lock).
    pub(crate) fn counting_copy(&self) -> Option<CountingBloomFilter> {
        match self {
            Self::Plain(_) => None,
            Self::Counting(f) => Some(Self::read(f).clone()),
        }
    }

    /// Streams the filter into a snapshot file bound to `identity` at `head`: a plain
    /// filter's bits while inserts go on, a counting filter's counters under its read lock.
    pub(crate) fn write_snapshot(
        &self,
        path: &Path,
        identity: bloom_format::StoreIdentity,
        head: HistoryPoint,
    ) -> Result<(), WriteError> {
        with_filter!(self, f => write_snapshot(path, f, identity, head))
    }
}

/// Runs `$body` with `$f` bound to the filter of a [`StoreFilter`] (a counting filter under
/// its read lock), for what every filter type answers alike ([`Filter`]).
macro_rules! with_filter {
    ($store:expr, $f:ident => $body:expr) => {
        match $store {
            StoreFilter::Plain($f) => $body,
            StoreFilter::Counting(lock) => {
                let $f = &*StoreFilter::read(lock);
                $body
            }
        }
    };
}
use with_filter;

/// Streams `filter` into a snapshot file bound to `identity` at `head`.
pub(crate) fn write_snapshot(
    path: &Path,
    filter: &impl Filter,
    identity: bloom_format::StoreIdentity,
    head: HistoryPoint,
) -> Result<(), WriteError> {
    let mut header = filter.header(head.generation);
    header.store = Some(StoreBinding::new(identity, head.digest));
    let file = AtomicFile::create_with(path, bloom_format::WriteOptions::for_snapshot(&header))?;
    let target = file.target().to_path_buf();
    let fail = |e: StreamWriteError| WriteError::Io {
        path: target.clone(),
        action: "writing the temporary file",
        cause: e.into(),
    };
    let mut writer = SnapshotWriter::new(file, header).map_err(fail)?;
    filter
        .for_each_payload_chunk(|chunk| writer.write_payload(chunk))
        .map_err(fail)?;
    writer.finish().map_err(fail)?.commit()
}
