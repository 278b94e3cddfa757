//! Reading snapshots from files and streams with bounded memory, and writing them atomically.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{DecodeError, ReadError, WriteError};
use crate::snapshot::{
    DecodeOptions, MAX_HEADER_LEN, Snapshot, check_payload_size, check_prefix, decode_header,
};

impl Snapshot {
    /// Reads and decodes a snapshot from a stream, checking the header before reading the
    /// payload. Memory stays within a small multiple of the bytes actually read.
    ///
    /// # Errors
    /// [`ReadError::Io`] when reading fails, [`ReadError::Decode`] when the bytes are invalid.
    pub fn read_from(mut reader: impl Read, options: &DecodeOptions) -> Result<Self, ReadError> {
        Self::read_inner(&mut reader, options, None, 0)
    }

    /// Reads and decodes a snapshot file.
    ///
    /// # Errors
    /// As [`Snapshot::read_from`]; I/O errors name the path.
    pub fn read_file(path: impl AsRef<Path>, options: &DecodeOptions) -> Result<Self, ReadError> {
        let path = path.as_ref();
        let io_err = |source| ReadError::Io {
            path: Some(path.to_owned()),
            source,
        };
        let mut file = File::open(path).map_err(io_err)?;
        // The file's real size bounds the buffer, however large the header claims it is.
        let size = file.metadata().map_err(io_err)?.len();
        Self::read_inner(&mut file, options, Some(path), size).map_err(|e| match e {
            ReadError::Io { source, .. } => io_err(source),
            other => other,
        })
    }

    /// `known_len` is the input's real length when known (a file), else 0: the payload buffer
    /// is reserved up to it and otherwise grows only as data arrives, so a header that lies
    /// about its payload length cannot make the reader allocate more than a small multiple of
    /// the input it really has.
    fn read_inner(
        reader: &mut dyn Read,
        options: &DecodeOptions,
        path: Option<&Path>,
        known_len: u64,
    ) -> Result<Self, ReadError> {
        let io_err = |source| ReadError::Io {
            path: path.map(Path::to_path_buf),
            source,
        };
        let mut buf = Vec::with_capacity(usize::from(MAX_HEADER_LEN));
        // The fixed prefix first: magic, version and header length.
        read_up_to(reader, &mut buf, 12).map_err(io_err)?;
        let header_len = match check_prefix(&buf) {
            // The prefix is complete and names the header length: read exactly that much.
            Err(DecodeError::Truncated { needed, .. }) if buf.len() >= 12 => {
                read_up_to(reader, &mut buf, needed).map_err(io_err)?;
                check_prefix(&buf)?
            }
            other => other?,
        };
        let header = decode_header(&buf, header_len)?;
        let payload_len = header.payload_len();
        if let Some(limit) = options.max_payload_len
            && payload_len > limit
        {
            return Err(DecodeError::OverLimit { payload_len, limit }.into());
        }
        let reserve = payload_len.min(known_len.saturating_sub(buf.len() as u64));
        buf.reserve(usize::try_from(reserve).unwrap_or(0));
        let wanted = u64::from(header_len).saturating_add(payload_len);
        read_up_to(reader, &mut buf, wanted).map_err(io_err)?;
        let mut probe = [0u8; 1];
        let extra = loop {
            match reader.read(&mut probe) {
                Ok(n) => break n as u64,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(io_err(e)),
            }
        };
        check_payload_size(header_len, payload_len, buf.len() as u64 + extra, options)?;
        Ok(Self::decode(buf, options)?)
    }

    /// Writes the snapshot to `path` atomically: a temporary file in the same directory,
    /// fsync, rename over `path`, then fsync of the directory. After a crash the path holds
    /// either the old snapshot or the new one, never a torn one.
    ///
    /// # Errors
    /// [`WriteError`] naming the step that failed; the old file is then unchanged.
    pub fn write_file(&self, path: impl AsRef<Path>) -> Result<(), WriteError> {
        // Header and payload are written one after the other, so writing never holds a
        // second copy of the payload.
        write_atomic_parts(path.as_ref(), &[&self.encode_header(), self.payload()])
    }
}

/// Reads until `buf` holds `total` bytes or the stream ends. Grows `buf` only as data arrives.
fn read_up_to(reader: &mut dyn Read, buf: &mut Vec<u8>, total: u64) -> io::Result<()> {
    let missing = total.saturating_sub(buf.len() as u64);
    reader.take(missing).read_to_end(buf).map(|_| ())
}

/// Writes `data` to `path` atomically (temporary file, fsync, rename, directory fsync).
///
/// # Errors
/// [`WriteError`] naming the step that failed; the temporary file is removed.
pub fn write_atomic(path: &Path, data: &[u8]) -> Result<(), WriteError> {
    write_atomic_parts(path, &[data])
}

/// [`write_atomic`] for data given in parts, written in order.
fn write_atomic_parts(path: &Path, parts: &[&[u8]]) -> Result<(), WriteError> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let fail = |action, source| WriteError {
        path: path.to_owned(),
        action,
        source,
    };
    let name = path.file_name().ok_or_else(|| {
        fail(
            "choosing a file name",
            io::Error::new(io::ErrorKind::InvalidInput, "the path has no file name"),
        )
    })?;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(
        ".{}.{}.tmp",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let tmp = dir.join(tmp_name);

    let result = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .map_err(|e| fail("creating the temporary file", e))?;
        for part in parts {
            file.write_all(part)
                .map_err(|e| fail("writing the temporary file", e))?;
        }
        file.sync_all()
            .map_err(|e| fail("syncing the temporary file", e))?;
        drop(file);
        fs::rename(&tmp, path).map_err(|e| fail("renaming over the target", e))
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result?;
    sync_dir(&dir).map_err(|e| fail("syncing the directory", e))
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
