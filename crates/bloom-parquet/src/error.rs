//! Typed errors: what was wrong with a filter blob, a Parquet file or a key.

use std::path::PathBuf;

/// Why a Parquet Bloom filter (its `BloomFilterHeader` and bitset) was refused.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SbbfError {
    /// The header ends before it is complete.
    #[error("the Bloom filter header is truncated")]
    TruncatedHeader,
    /// The header is not valid Thrift compact protocol.
    #[error("the Bloom filter header is malformed: {0}")]
    MalformedHeader(&'static str),
    /// A required header field is missing.
    #[error("the Bloom filter header has no {0} field")]
    MissingField(&'static str),
    /// The algorithm is not the split block (member 1 of `BloomFilterAlgorithm`).
    #[error(
        "the Bloom filter uses algorithm {0} (a member of BloomFilterAlgorithm this build does not know); only the split-block algorithm (1) is defined"
    )]
    UnsupportedAlgorithm(i16),
    /// The hash is not XXH64 (member 1 of `BloomFilterHash`).
    #[error(
        "the Bloom filter uses hash strategy {0} (a member of BloomFilterHash this build does not know); only XXH64 (1) is defined"
    )]
    UnsupportedHash(i16),
    /// The bitset is compressed (only member 1 of `BloomFilterCompression`, uncompressed,
    /// is defined).
    #[error(
        "the Bloom filter uses compression {0} (a member of BloomFilterCompression this build does not know); only uncompressed (1) is defined"
    )]
    UnsupportedCompression(i16),
    /// The bitset size is not a positive whole number of 32-byte blocks.
    #[error(
        "the Bloom filter bitset is {0} bytes: not a positive multiple of 32 (whole 256-bit blocks)"
    )]
    InvalidSize(i64),
    /// The bitset is larger than the caller's limit.
    #[error("the Bloom filter bitset is {found} bytes, over the limit of {limit}")]
    TooLarge {
        /// The announced size.
        found: u64,
        /// The limit.
        limit: u64,
    },
    /// Fewer or more bitset bytes than the header announces.
    #[error("the Bloom filter header announces {expected} bitset bytes, {found} follow")]
    BitsetLength {
        /// The header's `numBytes`.
        expected: u64,
        /// The bytes there are.
        found: u64,
    },
    /// The footer's `bloom_filter_length` disagrees with the filter's header and bitset (or
    /// is negative).
    #[error(
        "the footer gives the Bloom filter {footer} bytes (bloom_filter_length), but its header and bitset take {filter}"
    )]
    FooterLength {
        /// The footer's length.
        footer: i64,
        /// The header's length and its `numBytes`.
        filter: u64,
    },
    /// The deprecated pre-2.7 `parquet-format` filter: a 12-byte binary header and murmur3
    /// hashing, which no released Parquet writes.
    #[error(
        "this is the deprecated Bloom filter format (a binary header and murmur3 hashing, parquet-format before 2.7), which no Parquet release writes or reads; only the Thrift header with XXH64 is supported"
    )]
    Deprecated,
}

/// Why a Parquet file, or a filter in one, could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ParquetFileError {
    /// The file could not be opened: missing, unreadable, or not a regular file (a FIFO, a
    /// device or a directory is refused without blocking).
    #[error(transparent)]
    Open(bloom_format::ReadError),
    /// The file could not be read.
    #[error("{path}: {cause}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error (shown in the message, not returned by `source()`).
        cause: std::io::Error,
    },
    /// The file does not end in Parquet's magic `PAR1`.
    #[error("{path}: not a Parquet file (it does not end in the magic bytes PAR1)")]
    NotParquet {
        /// The file.
        path: PathBuf,
    },
    /// The footer is encrypted (`PARE`): this build reads plaintext footers only.
    #[error(
        "{path}: the Parquet footer is encrypted (magic PARE); this build reads plaintext footers only"
    )]
    Encrypted {
        /// The file.
        path: PathBuf,
    },
    /// The footer is larger than the limit, or than the file.
    #[error("{path}: the footer claims {found} bytes, more than {limit}")]
    FooterTooLarge {
        /// The file.
        path: PathBuf,
        /// The footer length the file gives.
        found: u64,
        /// The limit (the caller's, or what the file can hold).
        limit: u64,
    },
    /// The footer could not be decoded.
    #[error("{path}: the Parquet footer cannot be decoded: {detail}")]
    Metadata {
        /// The file.
        path: PathBuf,
        /// What the decoder said.
        detail: String,
    },
    /// No column has this name.
    #[error("{path}: no column {name:?}; the columns are {available}")]
    NoSuchColumn {
        /// The file.
        path: PathBuf,
        /// The name asked for.
        name: String,
        /// The column paths there are, comma-separated.
        available: String,
    },
    /// The leaf name matches several columns.
    #[error("{path}: {name:?} names several columns ({matches}); give the whole dotted path")]
    AmbiguousColumn {
        /// The file.
        path: PathBuf,
        /// The name asked for.
        name: String,
        /// The paths it matches.
        matches: String,
    },
    /// No row group has this index.
    #[error("{path}: no row group {index}; the file has {count}")]
    NoSuchRowGroup {
        /// The file.
        path: PathBuf,
        /// The index asked for.
        index: usize,
        /// The row groups there are.
        count: usize,
    },
    /// The column chunk has no Bloom filter.
    #[error("{path}: column {column:?} has no Bloom filter in row group {row_group}")]
    NoFilter {
        /// The file.
        path: PathBuf,
        /// The column path.
        column: String,
        /// The row group.
        row_group: usize,
    },
    /// No row group has a Bloom filter for the column.
    #[error("{path}: column {column:?} has no Bloom filter in any of its {row_groups} row groups")]
    NoFilters {
        /// The file.
        path: PathBuf,
        /// The column path.
        column: String,
        /// The row groups of the file.
        row_groups: usize,
    },
    /// Reading the filter would pass [`Limits::max_total_filter_bytes`](crate::Limits) for
    /// the file.
    #[error(
        "{path}: reading its Bloom filters would take more than {limit} bytes in all; raise the limit to read them"
    )]
    FilterBudget {
        /// The file.
        path: PathBuf,
        /// The limit.
        limit: u64,
    },
    /// The filter lies outside the file.
    #[error(
        "{path}: the Bloom filter of column {column:?} in row group {row_group} lies outside the file (offset {offset}, file length {file_len})"
    )]
    FilterOutOfFile {
        /// The file.
        path: PathBuf,
        /// The column path.
        column: String,
        /// The row group.
        row_group: usize,
        /// The offset the metadata gives.
        offset: i64,
        /// The file's length.
        file_len: u64,
    },
    /// The filter itself was refused.
    #[error("{path}: the Bloom filter of column {column:?} in row group {row_group}: {cause}")]
    Filter {
        /// The file.
        path: PathBuf,
        /// The column path.
        column: String,
        /// The row group.
        row_group: usize,
        /// Why (shown in the message, not returned by `source()`).
        cause: SbbfError,
    },
    /// The filter's bits could not be held.
    #[error("{path}: {cause}")]
    Alloc {
        /// The file.
        path: PathBuf,
        /// The allocation that failed (shown in the message, not returned by `source()`).
        cause: bloom_core::AllocError,
    },
}

/// Why a key cannot be a value of a column's type.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ValueError {
    /// The text is not a number of the column's type.
    #[error("{found:?} is not {expected}")]
    NotANumber {
        /// The key.
        found: String,
        /// What the column holds.
        expected: &'static str,
    },
    /// The bytes are not the column's fixed length.
    #[error("the column holds values of exactly {expected} bytes; this key has {found}")]
    WrongLength {
        /// The column's length.
        expected: usize,
        /// The key's.
        found: usize,
    },
    /// The column's type has no text form here (INT96): give the value's bytes in hex.
    #[error("{0} values have no text form here; give their plain-encoded bytes in hex")]
    NeedsHex(&'static str),
    /// The key is not hex.
    #[error("{0:?} is not hex: an even number of the digits 0-9, a-f")]
    BadHex(String),
    /// The number is outside the range of the column's floating-point type.
    #[error("{found:?} is outside the range of {expected}")]
    OutOfRange {
        /// The key.
        found: String,
        /// The column's type.
        expected: &'static str,
    },
}
