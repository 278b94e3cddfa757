//! Apache Parquet's split-block Bloom filters, for the bindings that want them (feature
//! `parquet`): [`from_parquet`] reads a column's filter from each row group of a Parquet
//! file (as `bloom parquet check` does), [`from_parquet_blob`] one filter blob.

use std::path::Path;

use bloom_core::{AnyFilter, KeyEncoding};
use bloom_parquet::{FilterError, Limits, ParquetFile, ParquetFileError, SbbfError};

use crate::error::{Error, ErrorKind};
use crate::handle::Handle;
use crate::snapshots::payload_limit;

/// A filter blob's refusal, classified.
fn sbbf_kind(e: &SbbfError) -> ErrorKind {
    match e {
        SbbfError::TooLarge { .. } => ErrorKind::TooLarge,
        SbbfError::UnsupportedAlgorithm(_)
        | SbbfError::UnsupportedHash(_)
        | SbbfError::UnsupportedCompression(_)
        | SbbfError::Deprecated => ErrorKind::Unsupported,
        _ => ErrorKind::Corrupt,
    }
}

/// A filter blob's error, classified.
fn filter_kind(e: &FilterError) -> ErrorKind {
    match e {
        FilterError::Alloc(_) => ErrorKind::OutOfMemory,
        FilterError::Sbbf(e) => sbbf_kind(e),
        _ => ErrorKind::Corrupt,
    }
}

/// A Parquet file's error, classified.
fn file_error(e: ParquetFileError) -> Error {
    let kind = match &e {
        ParquetFileError::Open(read) => return Error::read(read),
        ParquetFileError::Io { .. } => ErrorKind::Io,
        ParquetFileError::NotParquet { .. } => ErrorKind::NotASnapshot,
        ParquetFileError::Encrypted { .. } => ErrorKind::Unsupported,
        ParquetFileError::FooterTooLarge { .. } | ParquetFileError::FilterBudget { .. } => {
            ErrorKind::TooLarge
        }
        ParquetFileError::NoSuchColumn { .. }
        | ParquetFileError::AmbiguousColumn { .. }
        | ParquetFileError::NoSuchRowGroup { .. }
        | ParquetFileError::NoFilter { .. }
        | ParquetFileError::NoFilters { .. } => ErrorKind::InvalidArgument,
        ParquetFileError::Filter { cause, .. } => sbbf_kind(cause),
        ParquetFileError::Alloc { .. } => ErrorKind::OutOfMemory,
        _ => ErrorKind::Corrupt,
    };
    Error::new(kind, e.to_string())
}

/// The filter of `column` (its dotted path, or a unique leaf name) in each row group of the
/// Parquet file at `path`, `None` where a row group has none; no data page is read. A key is
/// the column value's plain encoding: the text (UTF-8 columns) or bytes of a string or
/// binary value, the little-endian bytes of a number. A filter bitset over
/// `max_payload_bytes` (0: 128 MiB, the most Parquet writers make) is refused before it is
/// read.
///
/// # Errors
/// `Io`, `NotASnapshot` (not a Parquet file), `Unsupported` (an encrypted footer, another
/// filter algorithm), `TooLarge`, `Corrupt`, `InvalidArgument` (no such column, or no filter
/// in any row group), `OutOfMemory`.
pub fn from_parquet(
    path: &Path,
    column: &str,
    max_payload_bytes: u64,
) -> Result<Vec<Option<Handle>>, Error> {
    let mut limits = Limits::default();
    if max_payload_bytes != 0 {
        limits.max_filter_bytes = max_payload_bytes;
    }
    let mut file = ParquetFile::open(path, limits).map_err(file_error)?;
    let column = file.column(column).map_err(file_error)?;
    let filters = file.filters(&column).map_err(file_error)?;
    Ok(filters
        .into_iter()
        .map(|f| f.map(|f| Handle::from_filter(AnyFilter::Plain(f))))
        .collect())
}

/// The filter of a Parquet filter blob (a `BloomFilterHeader`, then its bitset, as
/// parquet-testing's `bloom_filter.xxhash.bin`), its keys in `encoding` (`Utf8` for a string
/// column, `Bytes` otherwise).
///
/// # Errors
/// `Corrupt`, `Unsupported`, `TooLarge` (over `max_payload_bytes`, 0: the default),
/// `OutOfMemory`.
pub fn from_parquet_blob(
    blob: &[u8],
    encoding: KeyEncoding,
    max_payload_bytes: u64,
) -> Result<Handle, Error> {
    let filter = bloom_parquet::decode(blob, encoding, payload_limit(max_payload_bytes))
        .map_err(|e| Error::new(filter_kind(&e), e.to_string()))?;
    Ok(Handle::from_filter(AnyFilter::Plain(filter)))
}
