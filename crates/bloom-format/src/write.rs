//! Writing snapshots: [`AtomicFile`] (temporary file, fsync, rename, directory fsync) and
//! [`SnapshotWriter`], which streams a payload in chunks and never holds a second copy of it.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read as _, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{DecodeError, WriteError};
use crate::fsutil;
use crate::header::{self, Header};
use crate::ids::FormatVersion;
use crate::snapshot::{EncodeError, Snapshot, check_last_byte};

/// A file written under a temporary name next to its target and renamed over the target
/// only by [`AtomicFile::commit`]. After a crash or an error, the target holds its old
/// contents or the new ones, never a mix.
///
/// - A symbolic link at the target path is followed: the file it names is replaced, in that
///   file's directory, and the link stays a link.
/// - An existing target that is not a regular file (directory, named pipe, device) is
///   refused with [`WriteError::NotARegularFile`] and left alone.
/// - The temporary file is `.NAME.PID.N.tmp`. It is removed when the `AtomicFile` is dropped
///   without a commit. One left by a killed writer is removed by the next `create` for the
///   same target: each writer holds a lock on its temporary file, and the lock dies with the
///   process, so a temporary file nobody holds a lock on is stale.
/// - A replaced target's permissions are kept.
#[derive(Debug)]
pub struct AtomicFile {
    /// The path the caller asked for, for messages.
    requested: PathBuf,
    /// The file that is replaced on commit (after following links).
    target: PathBuf,
    temporary: PathBuf,
    /// `None` once committed.
    file: Option<File>,
}

/// What an [`AtomicFile`] may replace, and how a new file is created.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WriteOptions {
    /// Replace an existing file only if it is a bloom snapshot (it starts with the magic, or
    /// is a prefix of it, or is empty): a mistyped path never overwrites a database or a
    /// document. [`WriteError::NotASnapshot`] otherwise.
    pub only_replace_snapshots: bool,
    /// Create a new file readable by its owner only (mode 0600 on Unix), as a salted snapshot
    /// must be. An existing file keeps its permissions either way.
    pub private: bool,
}

impl WriteOptions {
    /// The options for writing a snapshot with `header`: only replace snapshots, and private
    /// when it carries a salt.
    #[must_use]
    pub fn for_snapshot(header: &crate::header::Header) -> Self {
        Self {
            only_replace_snapshots: true,
            private: !header.salt.is_empty(),
        }
    }
}

impl AtomicFile {
    /// Starts writing `path` with the default [`WriteOptions`] (any regular file may be
    /// replaced); see [`AtomicFile::create_with`].
    ///
    /// # Errors
    /// As [`AtomicFile::create_with`].
    pub fn create(path: impl AsRef<Path>) -> Result<Self, WriteError> {
        Self::create_with(path, WriteOptions::default())
    }

    /// Starts writing `path`: resolves links, refuses a non-regular target (and, with
    /// `only_replace_snapshots`, a file that is not a snapshot), removes stale temporary
    /// files of the target, and creates (and locks) a new temporary file.
    ///
    /// # Errors
    /// [`WriteError::NotARegularFile`], [`WriteError::NotASnapshot`], or [`WriteError::Io`]
    /// naming the failed step.
    pub fn create_with(path: impl AsRef<Path>, options: WriteOptions) -> Result<Self, WriteError> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let requested = path.as_ref().to_path_buf();
        let io_fail = |action, cause| WriteError::Io {
            path: requested.clone(),
            action,
            cause,
        };
        if requested
            .as_os_str()
            .to_string_lossy()
            .ends_with(std::path::MAIN_SEPARATOR)
        {
            return Err(io_fail(
                "choosing a file name",
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "the path ends with a separator, so it names a directory",
                ),
            ));
        }
        let target = fsutil::resolve_links(&requested)
            .map_err(|e| io_fail("following symbolic links", e))?;
        if let Some(kind) =
            fsutil::non_regular_kind(&target).map_err(|e| io_fail("checking the target", e))?
        {
            return Err(WriteError::NotARegularFile { path: target, kind });
        }
        if options.only_replace_snapshots {
            match fsutil::starts_like_a_snapshot(&target) {
                Ok(true) => {}
                Ok(false) => return Err(WriteError::NotASnapshot { path: target }),
                Err(e) => return Err(io_fail("checking the target", e)),
            }
        }
        let permissions = match fs::metadata(&target) {
            Ok(meta) => Some(meta.permissions()),
            Err(_) if options.private => private_permissions(),
            Err(_) => None,
        };
        fsutil::remove_stale_temporaries(&target);
        // A concurrent cleaner in another process could remove our file in the moment
        // between creating and locking it; then the name no longer names our file, and we
        // start over under a new name.
        for _ in 0..8 {
            let temporary =
                fsutil::temporary_name(&target, COUNTER.fetch_add(1, Ordering::Relaxed))
                    .ok_or_else(|| {
                        io_fail(
                            "choosing a file name",
                            io::Error::new(
                                io::ErrorKind::InvalidInput,
                                "the path has no file name",
                            ),
                        )
                    })?;
            let file = OpenOptions::new()
                .write(true)
                .read(true)
                .create_new(true)
                .open(&temporary)
                .map_err(|e| io_fail("creating the temporary file", e))?;
            let guard = Self {
                requested: requested.clone(),
                target: target.clone(),
                temporary,
                file: Some(file),
            };
            let file = guard.file.as_ref().ok_or_else(|| {
                io_fail("creating the temporary file", io::Error::other("no file"))
            })?;
            file.lock()
                .map_err(|e| io_fail("locking the temporary file", e))?;
            if !same_file(file, &guard.temporary) {
                // Dropping the guard removes nothing: the name is gone or is not ours.
                let mut guard = guard;
                guard.file = None;
                continue;
            }
            if let Some(permissions) = &permissions {
                file.set_permissions(permissions.clone())
                    .map_err(|e| io_fail("copying the target's permissions", e))?;
            }
            return Ok(guard);
        }
        Err(io_fail(
            "creating the temporary file",
            io::Error::other("the temporary file kept disappearing"),
        ))
    }

    /// The file that the commit replaces (the requested path with links followed).
    #[must_use]
    pub fn target(&self) -> &Path {
        &self.target
    }

    /// The temporary file being written.
    #[must_use]
    pub fn temporary_path(&self) -> &Path {
        &self.temporary
    }

    fn fail(&self, action: &'static str, cause: io::Error) -> WriteError {
        WriteError::Io {
            path: self.requested.clone(),
            action,
            cause,
        }
    }

    fn file(&mut self) -> io::Result<&mut File> {
        self.file
            .as_mut()
            .ok_or_else(|| io::Error::other("the file was already committed"))
    }

    /// Syncs the temporary file, renames it over the target and syncs the directory.
    ///
    /// # Errors
    /// [`WriteError::Io`] naming the failed step; the target is then unchanged (unless only
    /// the final directory sync failed, after the rename) and the temporary file is removed.
    pub fn commit(mut self) -> Result<(), WriteError> {
        let synced = self.file().and_then(|file| file.sync_all());
        synced.map_err(|e| self.fail("syncing the temporary file", e))?;
        fs::rename(&self.temporary, &self.target)
            .map_err(|e| self.fail("renaming over the target", e))?;
        // Renamed: nothing is left to remove, and the lock goes with the handle.
        self.file = None;
        sync_dir(&fsutil::parent_dir(&self.target))
            .map_err(|e| self.fail("syncing the directory", e))
    }
}

/// Owner-only permissions for a new private file.
#[cfg(unix)]
fn private_permissions() -> Option<fs::Permissions> {
    use std::os::unix::fs::PermissionsExt;
    Some(fs::Permissions::from_mode(0o600))
}

/// Windows has no owner-only mode bits; a new file inherits its directory's ACL.
#[cfg(not(unix))]
fn private_permissions() -> Option<fs::Permissions> {
    None
}

/// Whether `path` still names the open `file`.
fn same_file(file: &File, path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        match (file.metadata(), fs::symlink_metadata(path)) {
            (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
            _ => false,
        }
    }
    #[cfg(not(unix))]
    {
        let _ = file;
        path.exists()
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file()?.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file()?.flush()
    }
}

impl Seek for AtomicFile {
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        self.file()?.seek(pos)
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if self.file.take().is_some() {
            let _ = fs::remove_file(&self.temporary);
        }
    }
}

#[cfg(unix)]
fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

#[cfg(not(unix))]
fn sync_dir(_dir: &Path) -> io::Result<()> {
    // Windows has no directory handles to fsync; the rename itself is durable there once
    // the file was flushed.
    Ok(())
}

/// Writes `data` to `path` atomically with [`AtomicFile`].
///
/// # Errors
/// [`WriteError`]; the previous file is then unchanged.
pub fn write_atomic(path: impl AsRef<Path>, data: &[u8]) -> Result<(), WriteError> {
    let path = path.as_ref();
    let mut file = AtomicFile::create(path)?;
    file.write_all(data)
        .map_err(|e| file.fail("writing the temporary file", e))?;
    file.commit()
}

/// Writes a snapshot whose payload arrives in chunks, never holding more than the chunk it
/// is given.
///
/// On a seekable output ([`SnapshotWriter::new`]), room for the header is left first and the
/// header, with the payload CRC computed on the way, is written at the end. On a stream
/// ([`SnapshotWriter::streaming`]), the caller gives the payload CRC up front and the header
/// goes first.
#[derive(Debug)]
pub struct SnapshotWriter<W> {
    out: W,
    header: Header,
    /// The CRC given up front, for streams.
    expected_crc: Option<u32>,
    crc: crc32fast::Hasher,
    written: u64,
    last_byte: u8,
}

/// Writing a snapshot stream failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StreamWriteError {
    /// The header or payload is not valid, or the payload chunks do not add up to it.
    #[error(transparent)]
    Invalid(#[from] EncodeError),
    /// The output failed.
    #[error("cannot write the snapshot: {0}")]
    Io(io::Error),
}

impl From<DecodeError> for StreamWriteError {
    fn from(e: DecodeError) -> Self {
        Self::Invalid(EncodeError::Invalid(e))
    }
}

impl<W: Write> SnapshotWriter<W> {
    fn start(out: W, header: Header, expected_crc: Option<u32>) -> Result<Self, EncodeError> {
        header::validate(&header, FormatVersion::CURRENT, header.payload_len())?;
        Ok(Self {
            out,
            header,
            expected_crc,
            crc: crc32fast::Hasher::new(),
            written: 0,
            last_byte: 0,
        })
    }

    /// A writer to a stream that cannot seek (standard output, a socket): the header is
    /// written first, so the payload CRC must be known already.
    ///
    /// # Errors
    /// [`StreamWriteError::Invalid`] for an invalid header, or the output's error.
    pub fn streaming(out: W, header: Header, payload_crc: u32) -> Result<Self, StreamWriteError> {
        let mut writer = Self::start(out, header, Some(payload_crc))?;
        let encoded = header::encode(&writer.header, writer.header.payload_len(), payload_crc);
        writer.out.write_all(&encoded)?;
        Ok(writer)
    }

    /// Appends the next payload bytes.
    ///
    /// # Errors
    /// [`StreamWriteError::Invalid`] when the chunks pass the payload length, or the output's
    /// error.
    pub fn write_payload(&mut self, chunk: &[u8]) -> Result<(), StreamWriteError> {
        let end = self.written + chunk.len() as u64;
        if end > self.header.payload_len() {
            return Err(DecodeError::InvalidParameter {
                field: "payload length",
                found: end,
                expected: format!("at most {}", self.header.payload_len()),
            }
            .into());
        }
        self.out.write_all(chunk)?;
        self.crc.update(chunk);
        self.written = end;
        if let Some(&last) = chunk.last() {
            self.last_byte = last;
        }
        Ok(())
    }

    /// Checks that the whole payload arrived with valid padding (and, for streams, the CRC
    /// given up front); returns the output and the payload CRC.
    fn check_end(&self) -> Result<u32, StreamWriteError> {
        if self.written != self.header.payload_len() {
            return Err(DecodeError::InvalidParameter {
                field: "payload length",
                found: self.written,
                expected: self.header.payload_len().to_string(),
            }
            .into());
        }
        check_last_byte(&self.header, self.last_byte)?;
        let computed = self.crc.clone().finalize();
        if let Some(stored) = self.expected_crc
            && stored != computed
        {
            return Err(DecodeError::PayloadChecksumMismatch { stored, computed }.into());
        }
        Ok(computed)
    }

    /// Finishes a streaming write.
    ///
    /// # Errors
    /// As [`SnapshotWriter::write_payload`], and a payload that is short, has set padding
    /// bits or does not match the CRC given up front.
    pub fn finish_stream(mut self) -> Result<W, StreamWriteError> {
        self.check_end()?;
        self.out.flush()?;
        Ok(self.out)
    }
}

impl<W: Write + Seek> SnapshotWriter<W> {
    /// A writer to a seekable output (a file): room for the header is left and filled in by
    /// [`SnapshotWriter::finish`].
    ///
    /// # Errors
    /// [`StreamWriteError::Invalid`] for an invalid header, or the output's error.
    pub fn new(out: W, header: Header) -> Result<Self, StreamWriteError> {
        let mut writer = Self::start(out, header, None)?;
        let header_len = writer.header.encoded_len();
        io::copy(&mut io::repeat(0).take(header_len), &mut writer.out)?;
        Ok(writer)
    }

    /// Writes the header, with the CRC of the payload that was written, at the start.
    ///
    /// # Errors
    /// As [`SnapshotWriter::finish_stream`].
    pub fn finish(mut self) -> Result<W, StreamWriteError> {
        let crc = self.check_end()?;
        let encoded = header::encode(&self.header, self.written, crc);
        self.out.seek(SeekFrom::Start(0))?;
        self.out.write_all(&encoded)?;
        self.out.flush()?;
        Ok(self.out)
    }
}

impl Snapshot {
    /// Writes the snapshot to `path` atomically with [`AtomicFile`]: after a crash the path
    /// holds either the old snapshot or the new one, never a torn one. An existing file that
    /// is not a snapshot is not replaced, and a new salted snapshot is private
    /// ([`WriteOptions::for_snapshot`]).
    ///
    /// # Errors
    /// [`WriteError`]; the old file is then unchanged.
    pub fn write_file(&self, path: impl AsRef<Path>) -> Result<(), WriteError> {
        let mut file = AtomicFile::create_with(path, WriteOptions::for_snapshot(self.header()))?;
        // Header and payload are written one after the other: no second copy of the payload.
        let written = file
            .write_all(&self.encode_header())
            .and_then(|()| file.write_all(self.payload()));
        written.map_err(|e| file.fail("writing the temporary file", e))?;
        file.commit()
    }
}

impl From<StreamWriteError> for io::Error {
    fn from(e: StreamWriteError) -> Self {
        match e {
            StreamWriteError::Io(e) => e,
            StreamWriteError::Invalid(e) => io::Error::new(io::ErrorKind::InvalidData, e),
        }
    }
}

/// The message shows the I/O error, so it is not also the `source` (a report would show it
/// twice); the conversion is written out.
impl From<io::Error> for StreamWriteError {
    fn from(e: io::Error) -> Self {
        Self::Io(e)
    }
}
