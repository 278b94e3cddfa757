//! [`SnapshotReader`]: reading snapshots from files and streams, header first, with bounded
//! memory. The payload can be streamed in chunks (to verify it, or to fill a bit array
//! without a second copy), read into a caller's buffer, or collected into a [`Snapshot`].

use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use bytes::Bytes;

use crate::error::{DecodeError, ReadError, Section};
use crate::fsutil::{self, OpenFailure};
use crate::header::{self, DecodeOptions, Header, MAX_HEADER_LEN, PREFIX_LEN};
use crate::ids::FormatVersion;
use crate::snapshot::{
    Snapshot, check_last_byte, check_limit, check_payload_crc, check_payload_size,
};

/// The smallest and largest read buffer for streamed payloads. The buffer starts small and
/// doubles while data keeps arriving, so a short input never costs a large buffer.
const FIRST_CHUNK: usize = 8 << 10;
const LARGEST_CHUNK: usize = 1 << 20;

/// A snapshot whose header was read and checked (steps 1 to 5 of `docs/format.md`, and the
/// payload limit), with its payload still unread.
///
/// ```
/// use bloom_format::{DecodeOptions, SnapshotReader};
/// # let bytes = bloom_format::import_seed_raw(&[0; 128])?.encode();
/// let reader = SnapshotReader::new(&bytes[..], &DecodeOptions::with_max_payload_len(1 << 20))?;
/// assert_eq!(reader.header().bit_count, 1024);
/// // Reads the payload through a small buffer: checks size, padding and CRC.
/// let (_, header) = reader.verify()?;
/// assert_eq!(header.hash_count, 4);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct SnapshotReader<R> {
    reader: R,
    path: Option<PathBuf>,
    version: FormatVersion,
    header: Header,
    header_len: u16,
    header_crc: u32,
    payload_crc: u32,
    /// The whole input's length when known (a file): the payload size was then checked
    /// against it before anything was read.
    known_len: Option<u64>,
}

/// Opens `path` for reading if it is a regular file (after following symbolic links),
/// without blocking: a named pipe, device or directory is refused unread, as
/// [`SnapshotReader::open`] refuses it. For files of other forms (a Guava stream, a seed raw
/// snapshot) read with the same care.
///
/// # Errors
/// [`ReadError::NotARegularFile`], or [`ReadError::Io`] naming the path.
pub fn open_regular_file(path: impl AsRef<Path>) -> Result<File, ReadError> {
    let path = path.as_ref();
    fsutil::open_regular(path).map_err(|e| match e {
        OpenFailure::Io(cause) => ReadError::Io {
            path: Some(path.to_owned()),
            cause,
        },
        OpenFailure::NotRegular(kind) => ReadError::NotARegularFile {
            path: path.to_owned(),
            kind,
        },
    })
}

impl SnapshotReader<File> {
    /// Opens a snapshot file and reads its header.
    ///
    /// Only a regular file is read (after following symbolic links); a named pipe, device or
    /// directory is refused without blocking. With the file's length known, the whole of
    /// step 6 (limit, truncation, trailing bytes) is checked before any payload byte is read.
    ///
    /// # Errors
    /// [`ReadError::NotARegularFile`], [`ReadError::Io`] naming the path, or
    /// [`ReadError::Decode`].
    pub fn open(path: impl AsRef<Path>, options: &DecodeOptions) -> Result<Self, ReadError> {
        let path = path.as_ref();
        let io_err = |cause| ReadError::Io {
            path: Some(path.to_owned()),
            cause,
        };
        let file = fsutil::open_regular(path).map_err(|e| match e {
            OpenFailure::Io(source) => io_err(source),
            OpenFailure::NotRegular(kind) => ReadError::NotARegularFile {
                path: path.to_owned(),
                kind,
            },
        })?;
        let len = file.metadata().map_err(io_err)?.len();
        let reader = Self::start(file, Some(path.to_owned()), options, Some(len))?;
        check_payload_size(reader.header_len, reader.payload_len(), len, options)?;
        Ok(reader)
    }
}

impl<'a> SnapshotReader<&'a [u8]> {
    /// Reads and checks the header of a snapshot in memory. The input's length is known, so
    /// the whole of step 6 (limit, truncation, trailing bytes) is checked before any payload
    /// byte is read: a header claiming more payload than the bytes hold is refused before
    /// anything is allocated for it.
    ///
    /// # Errors
    /// [`ReadError::Decode`].
    pub fn from_bytes(bytes: &'a [u8], options: &DecodeOptions) -> Result<Self, ReadError> {
        let len = bytes.len() as u64;
        let reader = Self::start(bytes, None, options, Some(len))?;
        check_payload_size(reader.header_len, reader.payload_len(), len, options)?;
        Ok(reader)
    }
}

impl<R: Read> SnapshotReader<R> {
    /// The same reader, its source behind a `dyn Read`: a file and standard input, say, as
    /// one type. Nothing is read.
    pub fn boxed<'a>(self) -> SnapshotReader<Box<dyn Read + 'a>>
    where
        R: 'a,
    {
        SnapshotReader {
            reader: Box::new(self.reader),
            path: self.path,
            version: self.version,
            header: self.header,
            header_len: self.header_len,
            header_crc: self.header_crc,
            payload_crc: self.payload_crc,
            known_len: self.known_len,
        }
    }

    /// Reads and checks the header from a stream. Memory stays within the header's size.
    ///
    /// # Errors
    /// [`ReadError::Io`] when reading fails, [`ReadError::Decode`] when the header is
    /// invalid or the payload is over the limit.
    pub fn new(reader: R, options: &DecodeOptions) -> Result<Self, ReadError> {
        Self::start(reader, None, options, None)
    }

    fn start(
        mut reader: R,
        path: Option<PathBuf>,
        options: &DecodeOptions,
        known_len: Option<u64>,
    ) -> Result<Self, ReadError> {
        let io_err = |cause| ReadError::Io {
            path: path.clone(),
            cause,
        };
        let mut buf = [0u8; MAX_HEADER_LEN as usize];
        let (prefix, rest) = buf.split_at_mut(PREFIX_LEN);
        let got = read_full(&mut reader, prefix).map_err(io_err)?;
        let header_len = if got < PREFIX_LEN {
            // The input ended inside the prefix: the full check names what is wrong.
            header::check_prefix(prefix.get(..got).unwrap_or_default(), options)?.1
        } else {
            header::parse_prefix(prefix, options)?.1
        };
        let wanted = usize::from(header_len) - PREFIX_LEN;
        let more =
            read_full(&mut reader, rest.get_mut(..wanted).unwrap_or_default()).map_err(io_err)?;
        let bytes = buf.get(..PREFIX_LEN + more).unwrap_or_default();
        let decoded = header::decode(bytes, options)?;
        check_limit(decoded.payload_len, options)?;
        Ok(Self {
            reader,
            path,
            version: decoded.version,
            header: decoded.header,
            header_len: decoded.header_len,
            header_crc: decoded.header_crc,
            payload_crc: decoded.payload_crc,
            known_len,
        })
    }

    /// The file's format version.
    #[must_use]
    pub fn format_version(&self) -> FormatVersion {
        self.version
    }

    /// The checked header.
    #[must_use]
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The payload length the header requires.
    #[must_use]
    pub fn payload_len(&self) -> u64 {
        self.header.payload_len()
    }

    /// The header length as the file holds it.
    #[must_use]
    pub fn header_len(&self) -> u16 {
        self.header_len
    }

    /// The header CRC32 as the file holds it (checked).
    #[must_use]
    pub fn header_crc32(&self) -> u32 {
        self.header_crc
    }

    /// The payload CRC32 as the header holds it (checked once the payload is read).
    #[must_use]
    pub fn payload_crc32(&self) -> u32 {
        self.payload_crc
    }

    /// The header dump of [`Snapshot::dump_header`], from the header alone: the payload CRC
    /// shown is the stored one, checked only when the payload is read.
    #[must_use]
    pub fn dump_header(&self) -> String {
        crate::dump::dump(&crate::dump::Stored {
            version: self.version,
            header: &self.header,
            header_len: self.header_len,
            payload_len: self.payload_len(),
            payload_crc: self.payload_crc,
            header_crc: self.header_crc,
        })
    }

    fn io_err(&self, cause: io::Error) -> ReadError {
        ReadError::Io {
            path: self.path.clone(),
            cause,
        }
    }

    fn total_len(&self) -> u64 {
        u64::from(self.header_len).saturating_add(self.payload_len())
    }

    /// Reads the payload and hands it to `each` in order, in chunks of up to 1 MiB, then
    /// checks the rest of the snapshot: the input ends exactly after the payload, the padding
    /// bits are zero and the payload CRC matches (steps 6 to 8).
    ///
    /// `each` sees the bytes before the CRC is checked: on an error, discard whatever it
    /// built. Memory stays at one chunk, however large the payload.
    ///
    /// # Errors
    /// The first error of `each`, [`ReadError::Io`], or [`ReadError::Decode`].
    pub fn read_payload_with<E: From<ReadError>>(
        mut self,
        mut each: impl FnMut(&[u8]) -> Result<(), E>,
    ) -> Result<(FormatVersion, Header), E> {
        let payload_len = self.payload_len();
        let mut crc = crc32fast::Hasher::new();
        let mut buf = Vec::new();
        let mut read = 0u64;
        let mut last_byte = 0u8;
        while read < payload_len {
            let remaining = usize::try_from(payload_len - read).unwrap_or(usize::MAX);
            // Grows only while data keeps arriving, up to LARGEST_CHUNK.
            let size = (buf.len() * 2)
                .clamp(FIRST_CHUNK, LARGEST_CHUNK)
                .min(remaining);
            if buf.len() < size {
                buf.try_reserve_exact(size - buf.len())
                    .map_err(|_| ReadError::Alloc { bytes: size as u64 })?;
                buf.resize(size, 0);
            }
            let chunk = buf.get_mut(..size).unwrap_or_default();
            let got = read_full(&mut self.reader, chunk).map_err(|e| self.io_err(e))?;
            let data = chunk.get(..got).unwrap_or_default();
            if let Some(&last) = data.last() {
                last_byte = last;
            }
            crc.update(data);
            each(data)?;
            read += got as u64;
            if got < size {
                return Err(ReadError::from(DecodeError::Truncated {
                    section: Section::Payload,
                    needed: self.total_len(),
                    got: u64::from(self.header_len) + read,
                })
                .into());
            }
        }
        self.finish(last_byte, crc.finalize())?;
        Ok((self.version, self.header))
    }

    /// Steps 6 (nothing after the payload), 7 and 8, once the payload was read.
    fn finish(&mut self, last_byte: u8, computed_crc: u32) -> Result<(), ReadError> {
        if self.known_len.is_none() {
            let mut probe = [0u8; 1];
            if read_full(&mut self.reader, &mut probe).map_err(|e| self.io_err(e))? > 0 {
                return Err(DecodeError::TrailingBytes {
                    expected: self.total_len(),
                    found: self.total_len() + 1,
                }
                .into());
            }
        }
        check_last_byte(&self.header, last_byte)?;
        check_payload_crc(self.payload_crc, computed_crc)?;
        Ok(())
    }

    /// Reads the whole payload through a small buffer and checks it, keeping nothing: what
    /// `bloom verify` does, in constant memory for any size.
    ///
    /// # Errors
    /// As [`SnapshotReader::read_payload_with`].
    pub fn verify(self) -> Result<(FormatVersion, Header), ReadError> {
        self.read_payload_with(|_| Ok::<(), ReadError>(()))
    }

    /// Reads the payload straight into `dest`, which must be exactly
    /// [`SnapshotReader::payload_len`] bytes long, and checks it: one copy, no buffer.
    ///
    /// # Errors
    /// As [`SnapshotReader::read_payload_with`]; a `dest` of the wrong length is
    /// [`DecodeError::InvalidParameter`].
    pub fn read_payload_into(
        mut self,
        dest: &mut [u8],
    ) -> Result<(FormatVersion, Header), ReadError> {
        if dest.len() as u64 != self.payload_len() {
            return Err(DecodeError::InvalidParameter {
                field: "payload buffer length",
                found: dest.len() as u64,
                expected: self.payload_len().to_string(),
            }
            .into());
        }
        // One pass: each chunk is checksummed right after it lands, while it is in cache.
        let mut crc = crc32fast::Hasher::new();
        let mut got = 0usize;
        // Pages are made ahead of the reads (`prefault/`), at most 32 MiB past the chunk
        // being read: all a stream that ends early can make the buffer commit beyond its data.
        crate::prefault::fill_in_order(
            dest,
            LARGEST_CHUNK,
            crate::prefault::Tuning::LOADS,
            |chunk| {
                let read = read_full(&mut self.reader, chunk).map_err(|e| self.io_err(e))?;
                crc.update(chunk.get(..read).unwrap_or_default());
                got += read;
                Ok::<bool, ReadError>(read == chunk.len())
            },
        )?;
        if got < dest.len() {
            return Err(DecodeError::Truncated {
                section: Section::Payload,
                needed: self.total_len(),
                got: u64::from(self.header_len) + got as u64,
            }
            .into());
        }
        self.finish(dest.last().copied().unwrap_or(0), crc.finalize())?;
        Ok((self.version, self.header))
    }

    /// Reads and checks the payload into a [`Snapshot`].
    ///
    /// The buffer is allocated fallibly: at once for a file (whose length was checked), and
    /// as data arrives for a stream, so a header that lies about its payload length cannot
    /// make the reader allocate more than a small multiple of the input it really has.
    ///
    /// # Errors
    /// [`ReadError::Alloc`] when the buffer cannot be allocated, and as
    /// [`SnapshotReader::read_payload_with`].
    pub fn read_payload(self) -> Result<Snapshot, ReadError> {
        let len = self.payload_len();
        let stored = (self.header_len, self.header_crc);
        let alloc_err = |bytes| ReadError::Alloc { bytes };
        if self.known_len.is_some() {
            // A file: its length was checked, so the payload is really there.
            let size = usize::try_from(len).map_err(|_| alloc_err(len))?;
            let mut payload = Vec::new();
            payload
                .try_reserve_exact(size)
                .map_err(|_| alloc_err(len))?;
            payload.resize(size, 0);
            let (version, header) = self.read_payload_into(&mut payload)?;
            return Ok(Snapshot::from_checked(
                version,
                header,
                stored,
                Bytes::from(payload),
            ));
        }
        let mut payload = Vec::new();
        let (version, header) = self.read_payload_with(|chunk| {
            payload
                .try_reserve(chunk.len())
                .map_err(|_| alloc_err((payload.len() + chunk.len()) as u64))?;
            payload.extend_from_slice(chunk);
            Ok::<(), ReadError>(())
        })?;
        Ok(Snapshot::from_checked(
            version,
            header,
            stored,
            Bytes::from(payload),
        ))
    }
}

/// Reads until `buf` is full or the input ends; returns the bytes read.
pub(crate) fn read_full(reader: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while let Some(rest) = buf.get_mut(filled..) {
        if rest.is_empty() {
            break;
        }
        match reader.read(rest) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

impl Snapshot {
    /// Reads and decodes a snapshot from a stream, checking the header before reading the
    /// payload. Memory stays within a small multiple of the bytes actually read.
    ///
    /// # Errors
    /// [`ReadError::Io`] when reading fails, [`ReadError::Decode`] when the bytes are invalid,
    /// [`ReadError::Alloc`] when the payload cannot be held.
    pub fn read_from(reader: impl Read, options: &DecodeOptions) -> Result<Self, ReadError> {
        SnapshotReader::new(reader, options)?.read_payload()
    }

    /// Reads and decodes a snapshot file; see [`SnapshotReader::open`] for what is refused
    /// before reading.
    ///
    /// # Errors
    /// As [`Snapshot::read_from`]; errors name the path.
    pub fn read_file(path: impl AsRef<Path>, options: &DecodeOptions) -> Result<Self, ReadError> {
        SnapshotReader::open(path, options)?.read_payload()
    }
}
