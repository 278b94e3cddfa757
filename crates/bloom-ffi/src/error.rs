//! [`Error`] and its [`ErrorKind`]: what every binding reports, with a stable numeric code
//! (the C ABI's status) and a stable name (the Python exception's `kind`), classified once
//! from the library's typed errors.

use std::ffi::CStr;
use std::fmt;

use bloom_core::{BitsError, BuildError, CountingError, KeyError, ScalableError, SnapshotError};
use bloom_format::{DecodeError, ReadError, StreamWriteError, WriteError};

/// What went wrong, in a form every language can branch on. The codes are part of the C ABI
/// and the names part of the Python package: neither ever changes meaning, and new kinds get
/// new codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum ErrorKind {
    /// An argument is invalid: a null pointer, a parameter out of range, an unknown rule,
    /// layout or encoding name, options that do not go together.
    InvalidArgument = 1,
    /// The file could not be read or written: missing, no permission, not a regular file
    /// (a directory, a FIFO, a device), or an I/O error.
    Io = 2,
    /// The bytes are not a bloom snapshot at all (another kind of file, or empty).
    NotASnapshot = 3,
    /// The bytes are a damaged snapshot: truncated, a checksum mismatch, an invalid field.
    /// Never trust such a file: rebuild the filter from the primary data.
    Corrupt = 4,
    /// The snapshot is intact but uses a format version, rule, layout or encoding this build
    /// does not implement: upgrade, or rebuild the filter from the primary data.
    Unsupported = 5,
    /// The snapshot's payload is larger than the limit it was read with: raise the limit if
    /// the file is trusted.
    TooLarge = 6,
    /// A key was refused: the filter's encoding takes text, and the bytes are not UTF-8.
    Key = 7,
    /// Memory for the filter could not be allocated.
    OutOfMemory = 8,
    /// A bug in bloom: a panic was caught at the boundary. The handle it happened on must
    /// not be used again except to free it. Please report it.
    Internal = 9,
}

impl ErrorKind {
    /// Every kind, in code order.
    pub const ALL: [Self; 9] = [
        Self::InvalidArgument,
        Self::Io,
        Self::NotASnapshot,
        Self::Corrupt,
        Self::Unsupported,
        Self::TooLarge,
        Self::Key,
        Self::OutOfMemory,
        Self::Internal,
    ];

    /// The stable numeric code (the C ABI's `BLOOM_ERR_*`).
    #[must_use]
    pub const fn code(self) -> i32 {
        self as i32
    }

    /// The stable name: `"invalid-argument"`, `"io"`, `"not-a-snapshot"`, `"corrupt"`,
    /// `"unsupported"`, `"too-large"`, `"key"`, `"out-of-memory"` or `"internal"`.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self.c_name().to_str() {
            Ok(name) => name,
            Err(_) => "",
        }
    }

    /// [`ErrorKind::name`], ending in NUL: what the C ABI's `bloom_status_name` returns.
    #[must_use]
    pub const fn c_name(self) -> &'static CStr {
        match self {
            Self::InvalidArgument => c"invalid-argument",
            Self::Io => c"io",
            Self::NotASnapshot => c"not-a-snapshot",
            Self::Corrupt => c"corrupt",
            Self::Unsupported => c"unsupported",
            Self::TooLarge => c"too-large",
            Self::Key => c"key",
            Self::OutOfMemory => c"out-of-memory",
            Self::Internal => c"internal",
        }
    }

    /// The kind with this code, if any.
    #[must_use]
    pub fn from_code(code: i32) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.code() == code)
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A binding's error: its [`ErrorKind`], a message for people, which says what to do, and
/// for a refused key of many, its index among them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    kind: ErrorKind,
    message: String,
    key_index: Option<usize>,
    /// For an [`ErrorKind::Io`] error, what the system said.
    cause: Option<IoCause>,
}

/// What the system said about a failed read or write ([`Error::io_cause`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IoCause {
    /// Its kind (`NotFound` for a missing file, `PermissionDenied`, ...).
    pub kind: std::io::ErrorKind,
    /// The operating system's error number (`errno`), when it gave one.
    pub os_code: Option<i32>,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.key_index {
            Some(i) => write!(f, "key {i}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for Error {}

impl Error {
    /// An error of `kind` with `message`.
    #[must_use]
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            key_index: None,
            cause: None,
        }
    }

    /// An invalid argument.
    #[must_use]
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::InvalidArgument, message)
    }

    /// What went wrong.
    #[must_use]
    pub const fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The message, without the key's index.
    #[must_use]
    pub fn message(&self) -> &str {
        &self.message
    }

    /// For a refused key of many, its index among them.
    #[must_use]
    pub const fn key_index(&self) -> Option<usize> {
        self.key_index
    }

    /// For an [`ErrorKind::Io`] error, what the system said (a missing file is
    /// `NotFound`), when it said something.
    #[must_use]
    pub const fn io_cause(&self) -> Option<IoCause> {
        self.cause
    }

    /// The same error, about the key at `index`.
    #[must_use]
    pub fn at_key(mut self, index: usize) -> Self {
        self.key_index = Some(index);
        self
    }

    /// The same error, its key's index moved by `offset` (a chunk's index among all keys).
    #[must_use]
    pub fn shifted(mut self, offset: usize) -> Self {
        self.key_index = self.key_index.map(|i| i.saturating_add(offset));
        self
    }

    /// The same error, its message prefixed by `context` (a path, say).
    #[must_use]
    pub fn context(self, context: impl fmt::Display) -> Self {
        Self {
            message: format!("{context}: {}", self.message),
            ..self
        }
    }

    /// A snapshot that could not be read (`ReadError`), classified.
    #[must_use]
    pub fn read(e: &ReadError) -> Self {
        let kind = match e {
            ReadError::Io { cause, .. } => {
                return Self::new(ErrorKind::Io, e.to_string()).caused_by(cause);
            }
            ReadError::NotARegularFile { .. } => ErrorKind::Io,
            ReadError::Alloc { .. } => ErrorKind::OutOfMemory,
            ReadError::Decode(d) => return Self::decode(d),
            _ => ErrorKind::Corrupt,
        };
        Self::new(kind, e.to_string())
    }

    /// Bytes that do not decode as a snapshot (`DecodeError`), classified.
    #[must_use]
    pub fn decode(e: &DecodeError) -> Self {
        let kind = match e {
            DecodeError::BadMagic { .. } | DecodeError::Truncated { got: 0, .. } => {
                ErrorKind::NotASnapshot
            }
            DecodeError::UnsupportedVersion { .. } | DecodeError::UnknownId { .. } => {
                ErrorKind::Unsupported
            }
            DecodeError::OverLimit { .. } => ErrorKind::TooLarge,
            _ => ErrorKind::Corrupt,
        };
        let mut message = e.to_string();
        if let DecodeError::OverLimit { payload_len, .. } = e {
            message.push_str(&format!(
                "; if the snapshot is trusted, pass a limit of at least {payload_len} bytes to read it \
                 (max_bytes={payload_len} in Python, max_payload_bytes in C)"
            ));
        } else if kind == ErrorKind::Corrupt {
            message.push_str("; do not trust this file: rebuild the filter from the primary data");
        }
        Self::new(kind, message)
    }

    /// A decoded snapshot that cannot become a filter in this build, classified.
    #[must_use]
    pub fn load(e: &ScalableError) -> Self {
        let kind = match e {
            _ if is_alloc(e) => ErrorKind::OutOfMemory,
            ScalableError::Snapshot(
                SnapshotError::Unsupported { .. } | SnapshotError::Config(_),
            ) => ErrorKind::Unsupported,
            _ => ErrorKind::Corrupt,
        };
        Self::new(kind, e.to_string())
    }

    /// A filter that cannot be built as asked, classified.
    #[must_use]
    pub fn build(e: &ScalableError) -> Self {
        let kind = if is_alloc(e) {
            ErrorKind::OutOfMemory
        } else {
            ErrorKind::InvalidArgument
        };
        Self::new(kind, format!("cannot build the filter: {e}"))
    }

    /// A snapshot that could not be written.
    #[must_use]
    pub fn write(e: &WriteError) -> Self {
        let error = Self::new(ErrorKind::Io, e.to_string());
        match e {
            WriteError::Io { cause, .. } => error.caused_by(cause),
            _ => error,
        }
    }

    /// The same error, keeping what the system said in `cause`.
    fn caused_by(self, cause: &std::io::Error) -> Self {
        Self {
            cause: Some(IoCause {
                kind: cause.kind(),
                os_code: cause.raw_os_error(),
            }),
            ..self
        }
    }

    /// A snapshot that could not be streamed.
    #[must_use]
    pub fn stream(e: &StreamWriteError) -> Self {
        let kind = match e {
            StreamWriteError::Io(_) => ErrorKind::Io,
            _ => ErrorKind::Internal,
        };
        Self::new(kind, e.to_string())
    }
}

/// Whether `e` is the system refusing memory (a plain filter's bits, a counting filter's
/// counters, a chain's stage, a snapshot's payload), wherever the library wraps it: the one
/// place that tells `OutOfMemory` from a bad plan or a bad snapshot.
fn is_alloc(e: &ScalableError) -> bool {
    matches!(
        e,
        ScalableError::Build(BuildError::Alloc(_) | BuildError::Counting(CountingError::Alloc(_)))
            | ScalableError::Snapshot(
                SnapshotError::Bits(BitsError::Alloc(_))
                    | SnapshotError::Counting(CountingError::Alloc(_))
            )
    )
}

impl From<KeyError> for Error {
    fn from(e: KeyError) -> Self {
        Self::new(ErrorKind::Key, e.to_string())
    }
}

impl From<BuildError> for Error {
    fn from(e: BuildError) -> Self {
        Self::build(&ScalableError::Build(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_names_are_distinct_and_round_trip() {
        let mut names: Vec<&str> = ErrorKind::ALL.iter().map(|k| k.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ErrorKind::ALL.len());
        for (i, kind) in ErrorKind::ALL.into_iter().enumerate() {
            assert_eq!(kind.code(), i32::try_from(i).unwrap() + 1);
            assert_eq!(ErrorKind::from_code(kind.code()), Some(kind));
        }
        assert_eq!(ErrorKind::from_code(0), None);
        assert_eq!(ErrorKind::from_code(10), None);
    }

    #[test]
    fn every_allocation_failure_is_out_of_memory_and_nothing_else_is() {
        let alloc = bloom_core::AllocError { bytes: 1 << 40 };
        let refusals = [
            ScalableError::Build(BuildError::Alloc(alloc)),
            ScalableError::Build(BuildError::Counting(CountingError::Alloc(alloc))),
            ScalableError::Snapshot(SnapshotError::Bits(BitsError::Alloc(alloc))),
            ScalableError::Snapshot(SnapshotError::Counting(CountingError::Alloc(alloc))),
        ];
        for e in &refusals {
            assert_eq!(
                Error::build(e).kind(),
                ErrorKind::OutOfMemory,
                "build: {e:?}"
            );
            assert_eq!(Error::load(e).kind(), ErrorKind::OutOfMemory, "load: {e:?}");
        }
        let not_memory = ScalableError::Build(BuildError::Counting(CountingError::Layout(
            bloom_core::Layout::Blocked512,
        )));
        assert_eq!(Error::build(&not_memory).kind(), ErrorKind::InvalidArgument);
    }

    #[test]
    fn a_payload_over_the_limit_says_which_limit_to_raise() {
        let e = Error::decode(&DecodeError::OverLimit {
            payload_len: 5_000,
            limit: 16,
        });
        assert_eq!(e.kind(), ErrorKind::TooLarge);
        assert!(e.message().contains("max_bytes=5000"), "{e}");
        assert!(e.message().contains("max_payload_bytes"), "{e}");
        assert!(!e.message().contains("do not trust"), "{e}");
    }
}
