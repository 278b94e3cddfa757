//! Snapshots in and out, for every binding: [`load`] a filter from a file or bytes,
//! [`save`] or [`to_bytes`] one, [`verify`] a snapshot completely, and [`inspect`] its
//! header ([`HeaderInfo`]). Every read checks sizes before it allocates and verifies both
//! checksums before it answers.

use std::io::Read;
use std::path::Path;

use bloom_core::{AnyFilter, Filter, ReadSnapshotError};
use bloom_format::{
    AtomicFile, DecodeOptions, FormatVersion, Header, ReadError, SnapshotReader, SnapshotWriter,
    WriteOptions,
};

use crate::error::Error;

/// Where a snapshot is read from: a file (opened as `bloom_format::open_regular_file`
/// opens it: a directory, FIFO or device is refused before it is read) or bytes in memory.
#[derive(Clone, Copy, Debug)]
pub enum Source<'a> {
    /// A file.
    Path(&'a Path),
    /// Bytes in memory.
    Bytes(&'a [u8]),
}

impl<'a> Source<'a> {
    /// The reader of the snapshot, its header checked (and sized against `max_payload_bytes`,
    /// and for a file or bytes against their length, before anything is allocated).
    fn open(self, max_payload_bytes: u64) -> Result<SnapshotReader<Box<dyn Read + 'a>>, Error> {
        let options = DecodeOptions::with_max_payload_len(payload_limit(max_payload_bytes));
        match self {
            Self::Path(path) => SnapshotReader::open(path, &options)
                .map(SnapshotReader::boxed)
                .map_err(|e| self.read_error(&e)),
            Self::Bytes(bytes) => SnapshotReader::from_bytes(bytes, &options)
                .map(SnapshotReader::boxed)
                .map_err(|e| Error::read(&e)),
        }
    }

    /// An error about this source: prefixed by the path for a file.
    pub(crate) fn about(self, e: Error) -> Error {
        match self {
            Self::Path(path) => e.context(path.display()),
            Self::Bytes(_) => e,
        }
    }

    /// A read error about this source, classified: prefixed by the path for a file, unless
    /// it is one of the system's errors, which name the path already.
    pub(crate) fn read_error(self, e: &ReadError) -> Error {
        match e {
            ReadError::Io { path: Some(_), .. } | ReadError::NotARegularFile { .. } => {
                Error::read(e)
            }
            _ => self.about(Error::read(e)),
        }
    }
}

/// The payload limit a binding was given: `0` means [`DEFAULT_MAX_PAYLOAD_BYTES`], in every
/// binding.
#[must_use]
pub const fn payload_limit(max_payload_bytes: u64) -> u64 {
    if max_payload_bytes == 0 {
        DEFAULT_MAX_PAYLOAD_BYTES
    } else {
        max_payload_bytes
    }
}

/// The largest payload the bindings read unless told otherwise: 1 GiB, as the CLI
/// (`bloom_format::DEFAULT_MAX_PAYLOAD_LEN`).
pub const DEFAULT_MAX_PAYLOAD_BYTES: u64 = bloom_format::DEFAULT_MAX_PAYLOAD_LEN;

/// A loaded snapshot: the filter, and the header it was read with (its dataset generation,
/// its store binding).
#[derive(Debug)]
pub struct Loaded {
    /// The filter.
    pub filter: AnyFilter,
    /// The header read.
    pub header: Header,
}

/// How far a chain loaded with the read limit `max_payload_bytes` may grow, its payload being
/// `payload_len` bytes. The limit a chain was made with is not recorded in its snapshot, so a
/// loaded chain gets what a new one gets by default ([`DEFAULT_MAX_PAYLOAD_BYTES`]), raised
/// to the read limit when that is larger (so that what is saved can be read back with the
/// limit it was read with), and never less than what was loaded. A read limit below the
/// default never lowers it: a reader that allows only the bytes it holds (a pickle, a tight
/// `bloom_filter_load_buffer`) would otherwise get a chain that cannot grow at all, whose
/// newest stage takes every key past its plan. The CLI differs on purpose: `bloom add
/// --max-bytes N` writes back a file that its next run reads with the same `N`, so there the
/// read limit is also the growth limit (`crates/bloom-cli/src/files.rs`, `load`).
fn growth_limit_after_load(max_payload_bytes: u64, payload_len: u64) -> u64 {
    max_payload_bytes
        .max(DEFAULT_MAX_PAYLOAD_BYTES)
        .max(payload_len)
}

/// Loads the filter a snapshot holds (plain, counting or scalable), refusing a payload over
/// `max_payload_bytes` (0: the default, 1 GiB) before anything is allocated. The filter
/// answers exactly as the filter that wrote it. The read limit limits what is read, not how
/// far a chain grows afterwards: a loaded chain may grow to 1 GiB (what a new one may, by
/// default), or to `max_payload_bytes` when that is larger, and never less than its payload.
///
/// # Errors
/// Every [`ErrorKind`](crate::ErrorKind) a read can have: `Io`, `NotASnapshot`, `Corrupt`,
/// `Unsupported`, `TooLarge`, `OutOfMemory`.
pub fn load(source: Source<'_>, max_payload_bytes: u64) -> Result<Loaded, Error> {
    let reader = source.open(max_payload_bytes)?;
    let header = reader.header().clone();
    let filter = AnyFilter::read_snapshot(reader).map_err(|e| match e {
        ReadSnapshotError::Read(e) => source.read_error(&e),
        ReadSnapshotError::Load(e) => source.about(Error::load(&e)),
    })?;
    let filter = match filter {
        AnyFilter::Scalable(mut chain) => {
            let limit = growth_limit_after_load(max_payload_bytes, chain.payload_len());
            chain.set_growth_limit(Some(limit));
            AnyFilter::Scalable(chain)
        }
        other => other,
    };
    Ok(Loaded { filter, header })
}

/// Writes a snapshot of `filter` with `header` (typically `Filter::header` or
/// [`Handle::header`](crate::Handle::header)) to `path`, atomically: a temporary file
/// beside it, synced, then renamed over it. Whatever happens, `path` holds the old snapshot
/// or the new one, never a mix. An existing file that is not a snapshot is never replaced,
/// and a salted filter's file is created readable by its owner only.
///
/// # Errors
/// [`ErrorKind::Io`](crate::ErrorKind::Io).
pub fn save(filter: &AnyFilter, header: Header, path: &Path) -> Result<(), Error> {
    let file = AtomicFile::create_with(path, WriteOptions::for_snapshot(&header))
        .map_err(|e| Error::write(&e))?;
    let mut writer = SnapshotWriter::new(file, header).map_err(|e| Error::stream(&e))?;
    filter
        .for_each_payload_chunk(|chunk| writer.write_payload(chunk))
        .map_err(|e| Error::stream(&e).context(path.display()))?;
    let file = writer
        .finish()
        .map_err(|e| Error::stream(&e).context(path.display()))?;
    file.commit().map_err(|e| Error::write(&e))
}

/// A snapshot of `filter` with `header`, in memory: the bytes [`save`] writes.
///
/// # Errors
/// [`ErrorKind::OutOfMemory`](crate::ErrorKind::OutOfMemory) when the bytes cannot be
/// allocated.
pub fn to_bytes(filter: &AnyFilter, header: Header) -> Result<Vec<u8>, Error> {
    let len = usize::try_from(filter.payload_len().saturating_add(4096)).unwrap_or(usize::MAX);
    let mut out = Vec::new();
    out.try_reserve_exact(len).map_err(|_| {
        Error::new(
            crate::ErrorKind::OutOfMemory,
            format!("cannot allocate {len} bytes for the snapshot"),
        )
    })?;
    let mut writer =
        SnapshotWriter::new(std::io::Cursor::new(out), header).map_err(|e| Error::stream(&e))?;
    filter
        .for_each_payload_chunk(|chunk| writer.write_payload(chunk))
        .map_err(|e| Error::stream(&e))?;
    writer
        .finish()
        .map(std::io::Cursor::into_inner)
        .map_err(|e| Error::stream(&e))
}

/// Reads a snapshot through and checks all of it (both checksums, every field, nothing
/// after the payload), in constant memory: what `bloom verify` does. Returns its header.
///
/// # Errors
/// As [`load`], but never `OutOfMemory` for the payload: it is not kept.
pub fn verify(source: Source<'_>, max_payload_bytes: u64) -> Result<HeaderInfo, Error> {
    let reader = source.open(max_payload_bytes)?;
    let (version, header) = reader.verify().map_err(|e| source.read_error(&e))?;
    Ok(HeaderInfo::new(version, &header))
}

/// Reads a snapshot's header only (its checksum checked, the payload not read): what it
/// holds and how it was made.
///
/// # Errors
/// As [`load`], for the header.
pub fn inspect(source: Source<'_>, max_payload_bytes: u64) -> Result<HeaderInfo, Error> {
    let reader = source.open(max_payload_bytes)?;
    Ok(HeaderInfo::new(reader.format_version(), reader.header()))
}

/// What a snapshot header says, in plain values every language can hold.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct HeaderInfo {
    /// The format version (1, 2 or 3).
    pub format_version: u16,
    /// `"plain"`, `"counting"` or `"scalable"`.
    pub kind: &'static str,
    /// Bits (counters, for a counting filter; all stages', for a chain) `m`.
    pub bits: u64,
    /// Positions per key `k`.
    pub hashes: u32,
    /// The position rule's name.
    pub rule: &'static str,
    /// The layout's name.
    pub layout: &'static str,
    /// The key encoding's name.
    pub encoding: &'static str,
    /// Whether the filter is salted (the salt itself is never reported).
    pub salted: bool,
    /// The dataset generation the bits cover.
    pub dataset_generation: u64,
    /// The items the filter counted.
    pub items: u64,
    /// The payload's length in bytes.
    pub payload_len: u64,
    /// Whether the snapshot is bound to a primary store.
    pub store_bound: bool,
    /// The plan: capacity and false-positive rate, when recorded.
    pub plan: Option<(u64, f64)>,
}

impl HeaderInfo {
    /// The plain values of `header`.
    #[must_use]
    pub fn new(version: FormatVersion, header: &Header) -> Self {
        let kind = match header.layout {
            bloom_format::LayoutId::Counting4 => "counting",
            bloom_format::LayoutId::Scalable => "scalable",
            _ => "plain",
        };
        Self {
            format_version: version.value(),
            kind,
            bits: header.bit_count,
            hashes: header.hash_count,
            rule: header.position_rule.name(),
            layout: header.layout.name(),
            encoding: header.key_encoding.id.name(),
            salted: !header.salt.is_empty(),
            dataset_generation: header.dataset_generation.get(),
            items: header.item_count,
            payload_len: header.payload_len(),
            store_bound: header.store.is_some(),
            plan: header.plan.map(|p| (p.capacity, p.false_positive_rate)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_limit_raises_growth_but_never_lowers_it() {
        const DEFAULT: u64 = DEFAULT_MAX_PAYLOAD_BYTES;
        // A tight limit (a pickle's, a buffer's own length) or none: the default.
        assert_eq!(growth_limit_after_load(4_096, 4_000), DEFAULT);
        assert_eq!(growth_limit_after_load(0, 4_000), DEFAULT);
        // A larger limit: that limit, so that what is saved reads back with it.
        assert_eq!(growth_limit_after_load(4 * DEFAULT, 4_000), 4 * DEFAULT);
        // Never less than what was loaded.
        assert_eq!(growth_limit_after_load(0, DEFAULT + 1), DEFAULT + 1);
    }

    #[test]
    fn an_io_error_keeps_what_the_system_said_and_others_say_nothing() {
        let missing = std::env::temp_dir().join("bloom-ffi-no-such-dir/none.bloom");
        let read = load(Source::Path(&missing), 0).err();
        let cause = read.as_ref().and_then(Error::io_cause);
        assert!(
            read.as_ref()
                .is_some_and(|e| e.kind() == crate::ErrorKind::Io),
            "{read:?}"
        );
        assert_eq!(cause.map(|c| c.kind), Some(std::io::ErrorKind::NotFound));
        assert!(cause.is_some_and(|c| c.os_code.is_some()));
        let kept = read.map(|e| e.context("loading").io_cause());
        assert_eq!(kept, Some(cause));
        assert_eq!(Error::invalid("no").io_cause(), None);
    }
}
