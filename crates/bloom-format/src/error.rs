//! The errors of decoding, reading and writing snapshots.

use std::ops::RangeInclusive;
use std::path::PathBuf;

use crate::ids::IdKind;

/// The part of a snapshot that was cut short.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Section {
    /// The header.
    Header,
    /// The payload.
    Payload,
}

impl std::fmt::Display for Section {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Header => "header",
            Self::Payload => "payload",
        })
    }
}

/// Why a byte string is not a valid snapshot. Every variant carries what was found and what
/// was expected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The first eight bytes are not the snapshot magic.
    #[error(
        "not a bloom snapshot: the file starts with {found:02x?}, expected the magic {expected:02x?}"
    )]
    BadMagic {
        /// The bytes found (up to eight).
        found: Vec<u8>,
        /// The magic.
        expected: [u8; 8],
    },
    /// The format version is not one this build reads.
    #[error("snapshot was written by format version {found}; this build reads versions {}..={}", supported.start(), supported.end())]
    UnsupportedVersion {
        /// The version in the file.
        found: u16,
        /// The versions this build reads.
        supported: RangeInclusive<u16>,
    },
    /// The input ends before the section does.
    #[error(
        "snapshot is truncated: the {section} needs {needed} bytes of input, only {got} are there"
    )]
    Truncated {
        /// The section that is cut short.
        section: Section,
        /// The input length needed.
        needed: u64,
        /// The input length available.
        got: u64,
    },
    /// The header length field is outside the valid range.
    #[error("header length {found} is invalid; format version 1 headers are {min}..={max} bytes")]
    InvalidHeaderLength {
        /// The value found.
        found: u16,
        /// The smallest valid header.
        min: u16,
        /// The largest valid header.
        max: u16,
    },
    /// The header CRC32 does not match: the header is corrupt.
    #[error(
        "header checksum mismatch: stored {stored:#010x}, computed {computed:#010x}; the header is corrupt"
    )]
    HeaderChecksumMismatch {
        /// The CRC32 in the file.
        stored: u32,
        /// The CRC32 of the header bytes.
        computed: u32,
    },
    /// The payload CRC32 does not match: the bits are corrupt.
    #[error(
        "payload checksum mismatch: stored {stored:#010x}, computed {computed:#010x}; the bit array is corrupt"
    )]
    PayloadChecksumMismatch {
        /// The CRC32 in the header.
        stored: u32,
        /// The CRC32 of the payload bytes.
        computed: u32,
    },
    /// A header field has a value the format does not allow.
    #[error("invalid {field}: found {found}, expected {expected}")]
    InvalidParameter {
        /// The field.
        field: &'static str,
        /// The value found.
        found: u64,
        /// What a valid value is.
        expected: String,
    },
    /// An identifier that this build does not know.
    #[error("unknown {kind} {found}; this build knows {known}")]
    UnknownId {
        /// Which table.
        kind: IdKind,
        /// The value found.
        found: u16,
        /// The values this build knows.
        known: String,
    },
    /// A reserved byte is not zero.
    #[error("reserved byte at offset {offset} is {found:#04x}; reserved bytes must be zero")]
    NonZeroReserved {
        /// Offset of the byte in the file.
        offset: u64,
        /// Its value.
        found: u8,
    },
    /// Bits past `m` are set in the last payload byte.
    #[error(
        "padding bits past bit {bit_count} are set (last payload byte {last_byte:#04x}); they must be zero"
    )]
    NonZeroPadding {
        /// The bit count `m`.
        bit_count: u64,
        /// The last payload byte.
        last_byte: u8,
    },
    /// Bytes follow the payload.
    #[error("{found} bytes of input, but the snapshot ends after {expected}: trailing bytes")]
    TrailingBytes {
        /// The snapshot's length, header plus payload.
        expected: u64,
        /// The input length (for a stream: at least this).
        found: u64,
    },
    /// The payload is larger than the caller allows.
    #[error("payload of {payload_len} bytes exceeds the limit of {limit} bytes")]
    OverLimit {
        /// The payload length in the header.
        payload_len: u64,
        /// The caller's limit.
        limit: u64,
    },
}

/// Reading a snapshot from a file or stream failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    /// The file or stream could not be read.
    #[error("cannot read {}: {source}", path.as_ref().map_or("snapshot stream".into(), |p| p.display().to_string()))]
    Io {
        /// The file, if reading from a path.
        path: Option<PathBuf>,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The bytes are not a valid snapshot.
    #[error(transparent)]
    Decode(#[from] DecodeError),
}

/// Writing a snapshot file failed. The previous file at the path, if any, is unchanged.
#[derive(Debug, thiserror::Error)]
#[error("cannot write snapshot {}: {action} failed: {source}", path.display())]
pub struct WriteError {
    /// The target path.
    pub path: PathBuf,
    /// The step that failed.
    pub action: &'static str,
    /// The I/O error.
    #[source]
    pub source: std::io::Error,
}
