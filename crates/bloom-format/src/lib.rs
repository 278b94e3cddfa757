//! The bloom snapshot format: a versioned, checksummed header plus opaque payload bytes.
//!
//! This crate is the leaf of the workspace. It encodes and decodes a header and a payload and
//! knows nothing of hashing or bits beyond the payload's length and padding: the identifiers in
//! the header name rules that `bloom-core` implements. `docs/format.md` is the byte-level
//! contract; every assigned identifier is pinned by a test.
//!
//! Decoding is strict and bounded: magic, version, header length, header checksum, fields,
//! payload size (against the input and an optional caller limit), padding, payload checksum,
//! in that order, each failure with its own [`DecodeError`] variant. Nothing is allocated for
//! the payload before the header has been checked, and every allocation sized from the input
//! is fallible. Readers read format versions 1 to 3; writers write version 3.
//!
//! Files: [`SnapshotReader`] opens only regular files (a named pipe cannot block it) and can
//! stream a payload of any size in constant memory; [`AtomicFile`] and [`SnapshotWriter`]
//! write atomically, through symbolic links, and never leave a torn file or a temporary file
//! behind.
//!
//! Foreign forms: [`import_guava`] and [`export_guava`] read and write Guava's `BloomFilter`
//! streams (bounded: the word count is checked against the caller's limit before anything
//! is allocated), and [`import_seed_raw`] the reference article's raw 128 bytes.
//!
//! ```
//! use bloom_format::{
//!     DecodeError, DecodeOptions, Header, KeyEncodingId, KeyEncodingSpec, LayoutId,
//!     PositionRuleId, Snapshot,
//! };
//!
//! let mut header = Header::new(
//!     16,
//!     3,
//!     PositionRuleId::Sha256Double,
//!     LayoutId::Standard,
//!     KeyEncodingSpec::new(KeyEncodingId::Bytes, 1),
//! );
//! header.dataset_generation = 7.into();
//! header.item_count = 2;
//! let snapshot = Snapshot::new(header, vec![0b1010_0001, 0b0000_0100])?;
//! let bytes = snapshot.encode();
//! assert_eq!(Snapshot::decode(bytes.clone(), &DecodeOptions::unlimited())?, snapshot);
//!
//! // A flipped payload bit is caught by the checksum.
//! let mut corrupt = bytes.to_vec();
//! *corrupt.last_mut().unwrap() ^= 1;
//! assert!(matches!(
//!     Snapshot::decode(corrupt, &DecodeOptions::unlimited()),
//!     Err(DecodeError::PayloadChecksumMismatch { .. })
//! ));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

// No unsafe code but the system calls that make a read buffer's pages before the reads
// (`prefault/`), each with its proof beside it.
#![deny(unsafe_code)]
// Decode and write paths never panic; unit tests may.
#![cfg_attr(
    not(test),
    deny(clippy::indexing_slicing, clippy::unwrap_used, clippy::panic)
)]

mod binding;
mod dump;
mod error;
mod fsutil;
mod guava;
mod header;
mod hex;
mod ids;
mod legacy;
mod lock;
mod plan;
mod prefault;
mod read;
mod snapshot;
mod unicode;
mod write;

pub use binding::{DatasetGeneration, HistoryDigest, StoreBinding, StoreIdentity};
pub use error::{DecodeError, FileKind, ReadError, Section, WriteError};
pub use guava::{
    GuavaError, GuavaFunnel, GuavaStrategy, export_guava, guava_announced_len, guava_parameters,
    guava_stream_len, import_guava,
};
pub use header::{
    DEFAULT_MAX_PAYLOAD_LEN, DecodeOptions, GUAVA_MAX_BITS, Header, KeyEncodingSpec, MAGIC,
    MAX_HEADER_LEN, MAX_SALT_LEN, MAX_SHARDS, MAX_SPLIT_BLOCKS,
};
pub use hex::{hex, hex_dump, unhex};
pub use ids::{FormatVersion, IdKind, KeyEncodingId, LayoutId, PositionRuleId};
pub use legacy::{LegacyError, SEED_RAW_LEN, export_seed_raw, import_seed_raw, seed_raw_header};
pub use lock::{LockError, SnapshotLock};
pub use plan::{MAX_GROWTH, MAX_STAGES, Plan, Scalable, Stage};
pub use read::{SnapshotReader, open_regular_file};
pub use snapshot::{EncodeError, Snapshot};
pub use unicode::UnicodeVersion;
pub use write::{AtomicFile, SnapshotWriter, StreamWriteError, WriteOptions, write_atomic};
