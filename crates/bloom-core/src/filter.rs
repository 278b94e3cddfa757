//! [`Filter`]: what every filter type answers about itself (its configuration, its estimates,
//! how it stands against its plan) and how it becomes a snapshot and comes back from one,
//! written once for plain, atomic, counting and scalable filters.

use std::io::Read;
use std::path::Path;

use bloom_format::{DatasetGeneration, DecodeOptions, Header, ReadError, Snapshot, SnapshotReader};

use crate::capacity::Capacity;
use crate::config::FilterConfig;
use crate::estimate;
use crate::snapshot::ReadSnapshotError;

/// What every filter type has in common: [`BloomFilter`](crate::BloomFilter),
/// [`AtomicBloomFilter`](crate::AtomicBloomFilter),
/// [`CountingBloomFilter`](crate::CountingBloomFilter) and
/// [`ScalableBloomFilter`](crate::ScalableBloomFilter).
///
/// Keys go in and are asked about through each type's own `insert` and `contains` (an atomic
/// filter inserts through `&self`, a counting one can also `remove`). This trait is the rest:
/// the configuration, the estimates, the capacity verdict, and the snapshot, so that code
/// which persists or reports on filters is written once for all of them.
///
/// Its methods need the trait in scope: `use bloom_core::{BloomFilter, Filter};`.
///
/// ```
/// use bloom_core::{BloomFilter, Filter};
///
/// let mut seen = BloomFilter::with_capacity(10_000, 0.01)?;
/// seen.insert("order-1");
/// // A store records the generation its bits cover; 0 for a filter tied to no store.
/// let snapshot = seen.to_snapshot(0);
/// let back = BloomFilter::from_snapshot(&snapshot)?;
/// assert!(back.contains("order-1"));
/// assert_eq!(back.remaining_capacity(), Some(9_999));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// A file is written and read without a copy of the bits in memory: the header, then the
/// payload a chunk at a time.
///
/// ```
/// use std::error::Error;
///
/// use bloom_core::{BloomFilter, Filter};
/// use bloom_format::{AtomicFile, DecodeOptions, SnapshotReader, SnapshotWriter, WriteOptions};
///
/// # let dir = tempfile::tempdir()?;
/// # let path = dir.path().join("seen.bloom");
/// let mut seen = BloomFilter::with_capacity(10_000, 0.01)?;
/// seen.insert("order-1");
///
/// // Written to a temporary file beside `path`, which replaces it at the commit.
/// let header = seen.header(0);
/// let file = AtomicFile::create_with(&path, WriteOptions::for_snapshot(&header))?;
/// let mut writer = SnapshotWriter::new(file, header)?;
/// seen.for_each_payload_chunk(|chunk| writer.write_payload(chunk))?;
/// writer.finish()?.commit()?;
///
/// // The header is checked before anything is allocated; the payload is read straight into
/// // the bits and checked before the filter is returned.
/// let back = BloomFilter::read_file(&path, &DecodeOptions::default())?;
/// assert_eq!(back, seen);
///
/// // From any other source: a `SnapshotReader` over a stream or bytes, or `from_payload` for
/// // a payload that arrives in chunks.
/// let bytes = std::fs::read(&path)?;
/// let reader = SnapshotReader::from_bytes(&bytes, &DecodeOptions::default())?;
/// assert_eq!(BloomFilter::read_snapshot(reader)?, seen);
/// # Ok::<(), Box<dyn Error>>(())
/// ```
pub trait Filter: Sized {
    /// Why a snapshot cannot become a filter of this type.
    type LoadError: std::error::Error + From<crate::BitsError>;

    /// The configuration keys are encoded and placed with. A scalable filter's is its newest
    /// stage's, whose encoding, tables, rule and salt every stage shares (its plan is that
    /// stage's too: the chain's own is `ScalableBloomFilter::plan`).
    fn config(&self) -> &FilterConfig;

    /// The number of inserts the filter counted: inserts that changed a bit (for a counting
    /// filter, inserts less removals). Snapshots record it.
    fn items_inserted(&self) -> u64;

    /// The number of set positions `X`: set bits, or counters above zero.
    fn count_ones(&self) -> u64;

    /// The positions of the filter `m`: bits, or counters (a chain: all its stages').
    fn positions(&self) -> u64 {
        self.config().bits()
    }

    /// `X / m`.
    fn fill_ratio(&self) -> f64 {
        estimate::fill_ratio(self.count_ones(), self.positions())
    }

    /// The estimated number of distinct keys inserted (Swamidass–Baldi,
    /// `-(m / k) ln(1 - X / m)`). Always finite: a saturated filter is estimated at
    /// `X = m - 1/2`, a lower bound.
    fn estimated_items(&self) -> f64 {
        estimate::estimated_items(self.count_ones(), self.positions(), self.config().hashes())
    }

    /// The false-positive rate at the current fill: `(X / m)^k` in the standard layout, and
    /// the mean over blocks (or shards) of `(X_p / part bits)^k` where a key's bits all fall
    /// in one part; for a chain, the chance that any stage says maybe.
    fn estimated_false_positive_rate(&self) -> f64;

    /// How the filter stands against its plan ([`FilterConfig::plan`]), or `None` when no
    /// plan is recorded. Counts the set bits (a pass over the filter) for the estimated rate.
    fn capacity(&self) -> Option<Capacity> {
        Capacity::new(self.config(), self.items_inserted(), || {
            self.estimated_false_positive_rate()
        })
    }

    /// Items that still fit the plan (0 once over; for a chain, before it grows), or `None`
    /// when no plan is recorded. Cheap: no pass over the bits.
    fn remaining_capacity(&self) -> Option<u64> {
        self.config()
            .plan()
            .map(|plan| plan.capacity.saturating_sub(self.items_inserted()))
    }

    /// Whether the filter is over its plan ([`Capacity::is_over`]). `false` when no plan is
    /// recorded.
    fn is_over_capacity(&self) -> bool {
        self.capacity().is_some_and(|c| c.is_over())
    }

    /// The header of a snapshot of this filter, recording `dataset_generation`: the
    /// generation of the primary store that these bits fully cover (0 when the filter is
    /// tied to no store). Not bound to a store (set [`Header::store`] for that).
    fn header(&self, dataset_generation: impl Into<DatasetGeneration>) -> Header;

    /// The header of a snapshot that replaces `loaded` (the header this filter was read
    /// with, keys added since): at `dataset_generation`, or `loaded`'s when `None`; and
    /// bound to `loaded`'s store while the generation stays `loaded`'s. More bits only add
    /// false positives, so a binding to a store's history stays true; at another generation
    /// it would claim a history point it was never checked against, so it is dropped.
    fn header_replacing(&self, loaded: &Header, dataset_generation: Option<u64>) -> Header {
        let generation =
            dataset_generation.map_or(loaded.dataset_generation, DatasetGeneration::new);
        let mut header = self.header(generation);
        if generation == loaded.dataset_generation {
            header.store = loaded.store;
        }
        header
    }

    /// The payload's length in bytes.
    fn payload_len(&self) -> u64;

    /// Hands the snapshot payload to `each`, in order, a few KiB at a time: writing a
    /// snapshot never holds a second copy of the bits. With [`Filter::header`], what a
    /// `bloom_format::SnapshotWriter` needs.
    ///
    /// # Errors
    /// The first error `each` returns.
    fn for_each_payload_chunk<E>(&self, each: impl FnMut(&[u8]) -> Result<(), E>) -> Result<(), E>;

    /// A snapshot in memory (a copy of the bits), recording `dataset_generation` as
    /// [`Filter::header`] does. The copy is allocated as a `Vec` is (the process aborts if
    /// the system refuses it): for a large filter, or to write a file, give the header and
    /// [`Filter::for_each_payload_chunk`] to a `bloom_format::SnapshotWriter` instead, as the
    /// trait's example does.
    #[must_use]
    fn to_snapshot(&self, dataset_generation: impl Into<DatasetGeneration>) -> Snapshot {
        let len = usize::try_from(self.payload_len()).unwrap_or(usize::MAX);
        let mut payload = Vec::with_capacity(len);
        let Ok(()) = self.for_each_payload_chunk(|chunk| {
            payload.extend_from_slice(chunk);
            Ok::<(), std::convert::Infallible>(())
        });
        // A filter's own header and payload always make a valid snapshot; the format checks
        // them again, and a failure would be a bug in this crate, reported as one.
        Snapshot::new(self.header(dataset_generation), payload)
            .unwrap_or_else(|e| unreachable!("a filter's own snapshot is refused: {e}"))
    }

    /// The filter a header describes, its payload delivered in order, in chunks of any
    /// size, by `fill` (typically `bloom_format::SnapshotReader::read_payload_with`). The
    /// filter is allocated once, fallibly, and filled as the chunks arrive: loading holds one
    /// copy of the payload.
    ///
    /// It answers every query exactly as the filter that wrote the snapshot, except that with
    /// Unicode tables other than this build's it answers *maybe* for keys outside ASCII (see
    /// [`UnicodeTables`](crate::UnicodeTables)).
    ///
    /// An implementation calls `fill` once, unless the header is refused first, and returns
    /// its error: what [`Filter::read_snapshot`] rests on to return no filter whose payload
    /// failed a check.
    ///
    /// # Errors
    /// The error `fill` returns, or [`Filter::LoadError`] (converted into `E`) when the header
    /// is not this type's, names rules this build does not implement, or the chunks do not
    /// make a valid payload.
    fn from_payload<E: From<Self::LoadError>>(
        header: &Header,
        fill: impl FnOnce(&mut dyn FnMut(&[u8])) -> Result<(), E>,
    ) -> Result<Self, E>;

    /// The filter a snapshot in memory holds; see [`Filter::from_payload`].
    ///
    /// # Errors
    /// As [`Filter::from_payload`].
    fn from_snapshot(snapshot: &Snapshot) -> Result<Self, Self::LoadError> {
        let payload = snapshot.payload();
        Self::from_payload(snapshot.header(), |sink| {
            sink(payload);
            Ok::<(), Self::LoadError>(())
        })
    }

    /// The filter a snapshot holds, its payload read from `reader` (whose header was checked
    /// when it was made) and checked before the filter is returned: its length, its padding
    /// and its checksum. Nothing of a snapshot that fails a check is returned.
    ///
    /// A plain, atomic or counting filter's payload is read straight into its words, with no
    /// buffer in between ([`SnapshotReader::read_payload_into`], which makes the pages of a
    /// large array ahead of the reads); a chain's stage by stage, through a buffer of at most
    /// 1 MiB. The array is allocated once, at the size the header gives (which the reader
    /// checked against its limit, and for a file against the file's length); from a stream
    /// that ends early, its memory is committed at most 32 MiB past the bytes that arrived.
    ///
    /// # Errors
    /// [`ReadSnapshotError::Read`] when reading fails or the snapshot fails a check of the
    /// format; [`ReadSnapshotError::Load`] when its header is not a filter of this type this
    /// build can use (decided before the payload is read), or its array cannot be
    /// allocated, as [`Filter::from_payload`].
    fn read_snapshot<R: Read>(
        reader: SnapshotReader<R>,
    ) -> Result<Self, ReadSnapshotError<Self::LoadError>> {
        let header = reader.header().clone();
        Self::from_payload(&header, |sink| {
            reader
                .read_payload_with(|chunk| {
                    sink(chunk);
                    Ok::<(), ReadError>(())
                })
                .map(drop)
                .map_err(ReadSnapshotError::Read)
        })
    }

    /// [`Filter::read_snapshot`] of the snapshot file at `path`. Only a regular file is
    /// read (a named pipe, device or directory is refused without blocking), and its header
    /// and length are checked against `options` (the payload limit, 1 GiB by default)
    /// before anything is allocated.
    ///
    /// ```
    /// use bloom_core::{
    ///     AnyFilter, BloomFilter, DecodeError, DecodeOptions, Filter, ReadError, ReadSnapshotError,
    /// };
    ///
    /// # let dir = tempfile::tempdir()?;
    /// # let path = dir.path().join("seen.bloom");
    /// let mut seen = BloomFilter::with_capacity(10_000, 0.01)?;
    /// seen.insert("order-1");
    /// std::fs::write(&path, seen.to_snapshot(0).encode())?;
    ///
    /// let back = BloomFilter::read_file(&path, &DecodeOptions::default())?;
    /// assert!(back.contains("order-1"));
    /// // Whatever kind of filter the file holds: plain, counting or scalable.
    /// let any = AnyFilter::read_file(&path, &DecodeOptions::default())?;
    /// assert!(any.contains("order-1"));
    ///
    /// // A damaged file is refused, never half-trusted.
    /// let mut bytes = std::fs::read(&path)?;
    /// *bytes.last_mut().unwrap() ^= 1;
    /// std::fs::write(&path, bytes)?;
    /// assert!(matches!(
    ///     BloomFilter::read_file(&path, &DecodeOptions::default()),
    ///     Err(ReadSnapshotError::Read(ReadError::Decode(
    ///         DecodeError::PayloadChecksumMismatch { .. }
    ///     )))
    /// ));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// As [`Filter::read_snapshot`]; a file that cannot be opened, is not a regular file or
    /// whose payload is over the limit is [`ReadSnapshotError::Read`].
    fn read_file(
        path: impl AsRef<Path>,
        options: &DecodeOptions,
    ) -> Result<Self, ReadSnapshotError<Self::LoadError>> {
        Self::read_snapshot(SnapshotReader::open(path, options).map_err(ReadSnapshotError::Read)?)
    }
}

/// The [`Filter`] methods of a filter type that owns its `config`, its item count `items`
/// and the `u64` words `words` whose bytes are its payload (plain and counting filters).
macro_rules! owned_words_methods {
    () => {
        fn config(&self) -> &FilterConfig {
            &self.config
        }

        fn items_inserted(&self) -> u64 {
            u64::from(self.items)
        }

        fn for_each_payload_chunk<E>(
            &self,
            each: impl FnMut(&[u8]) -> Result<(), E>,
        ) -> Result<(), E> {
            $crate::bits::for_each_byte_chunk(self.words.iter().copied(), self.payload_len(), each)
        }
    };
}
pub(crate) use owned_words_methods;

/// `PartialEq` and `Eq` for a filter type that owns its `config`, `words` and `items`: equal
/// configurations, bits and item counts (what it holds besides is derived from the
/// configuration).
macro_rules! eq_by_contents {
    ($filter:ty) => {
        impl PartialEq for $filter {
            fn eq(&self, other: &Self) -> bool {
                self.config == other.config
                    && self.words == other.words
                    && self.items == other.items
            }
        }

        impl Eq for $filter {}
    };
}
pub(crate) use eq_by_contents;

/// [`Filter::from_payload`] and [`Filter::read_snapshot`] for a filter type (plain or atomic)
/// whose words the payload fills as they are, made with `Self::$from_words(config, words,
/// items)`.
macro_rules! from_payload_into_words {
    ($from_words:ident) => {
        fn from_payload<E: From<$crate::SnapshotError>>(
            header: &bloom_format::Header,
            fill: impl FnOnce(&mut dyn FnMut(&[u8])) -> Result<(), E>,
        ) -> Result<Self, E> {
            let config = $crate::FilterConfig::from_header(header)?;
            let words =
                $crate::bits::fill_words::<_, $crate::SnapshotError, E>(config.bits(), fill)?;
            Ok(Self::$from_words(config, words, header.item_count))
        }

        /// One copy: the payload is read straight into the words.
        fn read_snapshot<R: std::io::Read>(
            reader: bloom_format::SnapshotReader<R>,
        ) -> Result<Self, $crate::ReadSnapshotError<$crate::SnapshotError>> {
            let header = reader.header().clone();
            let config = $crate::FilterConfig::from_header(&header)?;
            let words = $crate::bits::fill_words_in_place::<_, $crate::SnapshotError, _>(
                config.bits(),
                |image| {
                    reader
                        .read_payload_into(image)
                        .map(drop)
                        .map_err($crate::ReadSnapshotError::Read)
                },
            )?;
            Ok(Self::$from_words(config, words, header.item_count))
        }
    };
}
pub(crate) use from_payload_into_words;

/// The `Debug` of a filter: its configuration, its set positions (named `ones`) and its item
/// count, never the bits themselves (gigabytes) nor anything derived from the salt; `more`
/// adds fields.
pub(crate) fn debug_summary(
    f: &mut std::fmt::Formatter<'_>,
    (name, ones): (&str, &str),
    filter: &impl Filter,
    more: impl FnOnce(&mut std::fmt::DebugStruct<'_, '_>),
) -> std::fmt::Result {
    let mut out = f.debug_struct(name);
    out.field("config", filter.config())
        .field(ones, &filter.count_ones())
        .field("items", &filter.items_inserted());
    more(&mut out);
    out.finish_non_exhaustive()
}
