//! The errors of decoding, reading and writing snapshots.

use std::ops::RangeInclusive;
use std::path::PathBuf;

use crate::ids::IdKind;
use crate::unicode::UnicodeVersion;

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
        "not a bloom snapshot: the file starts with \"{}\", expected the magic \"{}\"", found.escape_ascii(), expected.escape_ascii()
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
    /// The header length field is outside the valid range for the file's version.
    #[error(
        "header length {found} is invalid; format version {version} headers are {min}..={max} bytes"
    )]
    InvalidHeaderLength {
        /// The file's format version.
        version: u16,
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
    /// A recorded rate (a binary64 field) is outside what the format allows.
    #[error("invalid {field}: found {}, expected {expected}", f64::from_bits(*found_bits))]
    InvalidRate {
        /// The field.
        field: &'static str,
        /// The bits of the binary64 value found.
        found_bits: u64,
        /// What a valid value is.
        expected: String,
    },
    /// A recorded Unicode version does not fit the key encoding.
    #[error("invalid Unicode version of the {table} tables: found {found}, expected {expected}")]
    InvalidUnicodeVersion {
        /// Which tables: `normalization` or `casing`.
        table: &'static str,
        /// The version found (0.0.0 for none).
        found: UnicodeVersion,
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
    /// Bits past the data (`m` bits, or `4 m` bits of counters) are set in the last payload
    /// byte.
    #[error(
        "padding bits past data bit {bit_count} are set (last payload byte {last_byte:#04x}); they must be zero (data bits are m, or 4 m for a counting filter's counters)"
    )]
    NonZeroPadding {
        /// The payload bits that hold data: `m`, or `4 m` for the counting layout.
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

/// What kind of file a path names, when it is not a regular file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FileKind {
    /// A directory.
    Directory,
    /// A named pipe: reading it could block forever, writing it could feed anyone.
    Fifo,
    /// A character device, such as `/dev/zero` or `/dev/null`.
    CharDevice,
    /// A block device.
    BlockDevice,
    /// A Unix domain socket.
    Socket,
    /// Anything else that is not a regular file.
    Other,
}

impl FileKind {
    /// The kind of `file_type`, or `None` for a regular file (or a symbolic link, which the
    /// caller resolves).
    #[must_use]
    pub fn of(file_type: std::fs::FileType) -> Option<Self> {
        if file_type.is_file() || file_type.is_symlink() {
            return None;
        }
        if file_type.is_dir() {
            return Some(Self::Directory);
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::FileTypeExt;
            if file_type.is_fifo() {
                return Some(Self::Fifo);
            }
            if file_type.is_char_device() {
                return Some(Self::CharDevice);
            }
            if file_type.is_block_device() {
                return Some(Self::BlockDevice);
            }
            if file_type.is_socket() {
                return Some(Self::Socket);
            }
        }
        Some(Self::Other)
    }
}

impl std::fmt::Display for FileKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Directory => "a directory",
            Self::Fifo => "a named pipe (FIFO)",
            Self::CharDevice => "a character device",
            Self::BlockDevice => "a block device",
            Self::Socket => "a socket",
            Self::Other => "not a regular file",
        })
    }
}

/// Reading a snapshot from a file or stream failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    /// The file or stream could not be read.
    #[error("cannot read {}: {cause}", path.as_ref().map_or("snapshot stream".into(), |p| p.display().to_string()))]
    Io {
        /// The file, if reading from a path.
        path: Option<PathBuf>,
        /// The I/O error (shown in the message, not returned by `source()`).
        cause: std::io::Error,
    },
    /// The path names something other than a regular file; it was not read (a named pipe
    /// could block forever, a device could never end).
    #[error("cannot read {}: it is {kind}; a snapshot is a regular file", path.display())]
    NotARegularFile {
        /// The path.
        path: PathBuf,
        /// What it is.
        kind: FileKind,
    },
    /// The payload buffer could not be allocated.
    #[error("cannot allocate {bytes} bytes for the snapshot payload on this machine")]
    Alloc {
        /// The size that was requested.
        bytes: u64,
    },
    /// The bytes are not a valid snapshot.
    #[error(transparent)]
    Decode(#[from] DecodeError),
}

/// Writing a snapshot file failed. The previous file at the path, if any, is unchanged and no
/// temporary file is left behind.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WriteError {
    /// A step of the write failed.
    #[error("cannot write snapshot {}: {action} failed: {cause}", path.display())]
    Io {
        /// The target path.
        path: PathBuf,
        /// The step that failed.
        action: &'static str,
        /// The I/O error (shown in the message, not returned by `source()`).
        cause: std::io::Error,
    },
    /// The target exists and is not a regular file: it is left alone rather than replaced.
    #[error("cannot write snapshot {}: it is {kind}; refusing to replace it with a file", path.display())]
    NotARegularFile {
        /// The target path (after following symbolic links).
        path: PathBuf,
        /// What it is.
        kind: FileKind,
    },
    /// The target exists and is not a bloom snapshot: it is left alone rather than replaced
    /// (a mistyped path must not overwrite a database or a document).
    #[error("refusing to replace {}: it exists and is not a bloom snapshot; remove it first or write elsewhere", path.display())]
    NotASnapshot {
        /// The target path (after following links).
        path: PathBuf,
    },
    /// The caller cancelled the write (for example on a signal) before it completed.
    #[error("writing snapshot {} was interrupted; the previous file is unchanged", path.display())]
    Cancelled {
        /// The target path.
        path: PathBuf,
    },
}

impl WriteError {
    /// The step that failed, for [`WriteError::Io`].
    #[must_use]
    pub fn action(&self) -> Option<&'static str> {
        match self {
            Self::Io { action, .. } => Some(action),
            _ => None,
        }
    }
}
