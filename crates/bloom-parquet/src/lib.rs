//! Apache Parquet's split-block Bloom filters (SBBF), read bit for bit.
//!
//! A Parquet writer may store, for each column chunk, a Bloom filter of the column's values:
//! a Thrift `BloomFilterHeader` and a bitset of 256-bit blocks. bloom-core's
//! [`Layout::SplitBlock256`](bloom_core::Layout::SplitBlock256) with the
//! [`xxh64`](bloom_core::PositionRule::Xxh64) rule is that filter exactly: the bitset is a
//! snapshot's payload byte for byte, and a value answers as Parquet's reader answers when
//! it is given as the bytes Parquet hashes (its plain encoding; see [`ColumnKind`]).
//!
//! - [`ParquetFile`] decodes a file's footer (with the `parquet` crate, no Arrow, no codecs)
//!   and reads the filter of a column chunk, checking every size against the file and the
//!   [`Limits`] before reading.
//! - [`decode`] and [`encode`] convert a filter blob (header and bitset, as parquet-testing's
//!   `bloom_filter.xxhash.bin`).
//!
//! ```
//! use bloom_core::{BloomFilter, KeyEncoding};
//!
//! // A Parquet filter of 1024 bytes for a string column, with two values in it.
//! let mut filter = BloomFilter::new(bloom_parquet::parquet_config(1024 * 8, KeyEncoding::Utf8)?)?;
//! filter.insert("hello");
//! filter.insert("parquet");
//! let blob = bloom_parquet::encode(&filter)?;
//! // Header (16 bytes) and bitset, as a Parquet writer stores them.
//! assert_eq!(blob.len(), 16 + 1024);
//! let read = bloom_parquet::decode(&blob, KeyEncoding::Utf8, bloom_parquet::MAX_BITSET_BYTES)?;
//! assert!(read.contains("hello"));
//! assert_eq!(read.as_words(), filter.as_words());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod error;
mod file;
mod sbbf;
mod thrift;
mod value;

pub use error::{ParquetFileError, SbbfError, ValueError};
pub use file::{Column, Limits, ParquetFile};
pub use sbbf::{
    FilterError, MAX_BITSET_BYTES, MAX_HEADER_BYTES, NotParquet, SbbfHeader, decode, encode,
    filter_from_bitset, parquet_config, parse_header,
};
pub use value::ColumnKind;
