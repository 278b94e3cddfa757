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
//! the payload before the header has been checked.
//!
//! ```
//! use bloom_format::{
//!     DecodeError, DecodeOptions, Header, KeyEncodingId, KeyEncodingSpec, LayoutId,
//!     PositionRuleId, Snapshot,
//! };
//!
//! let header = Header {
//!     bit_count: 16,
//!     hash_count: 3,
//!     position_rule: PositionRuleId::Sha256Double,
//!     layout: LayoutId::Standard,
//!     key_encoding: KeyEncodingSpec { id: KeyEncodingId::Bytes, version: 1, unicode: None },
//!     salt: Vec::new(),
//!     dataset_generation: 7,
//!     item_count: 2,
//! };
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

#![forbid(unsafe_code)]
#![deny(clippy::indexing_slicing, clippy::unwrap_used, clippy::panic)]

mod dump;
mod error;
mod ids;
mod io;
mod legacy;
mod snapshot;

pub use dump::{hex, hex_dump};
pub use error::{DecodeError, ReadError, Section, WriteError};
pub use ids::{FormatVersion, IdKind, KeyEncodingId, LayoutId, PositionRuleId};
pub use io::write_atomic;
pub use legacy::{LegacyError, SEED_RAW_LEN, export_seed_raw, import_seed_raw, seed_raw_header};
pub use snapshot::{
    DecodeOptions, EncodeError, Header, KeyEncodingSpec, MAGIC, MAX_HEADER_LEN, MAX_SALT_LEN,
    MIN_HEADER_LEN, Snapshot, UnicodeVersion,
};
