//! [`SnapshotLock`]: an exclusive lock over a read-modify-write of one snapshot file.
//!
//! An atomic write replaces the file (a new inode), so a lock on the snapshot itself would be
//! lost at the first write; the lock lives on a sidecar file `.NAME.lock` next to the file
//! the path resolves to, which is never removed (removing lock files reopens the race they
//! close).

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

use crate::error::FileKind;
use crate::fsutil;

/// Holds the lock until dropped. The lock dies with the process, however it ends.
#[derive(Debug)]
pub struct SnapshotLock {
    _file: File,
    path: PathBuf,
}

/// The lock could not be taken.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LockError {
    /// Another process holds it (only when not waiting).
    #[error("{} is being updated by another process (lock file {})", target.display(), lock.display())]
    Busy {
        /// The snapshot path (after following links).
        target: PathBuf,
        /// The lock file.
        lock: PathBuf,
    },
    /// Something that is not a regular file is at the target's path or the lock file's.
    #[error("cannot lock {}: {} is {kind}", target.display(), lock.display())]
    NotARegularFile {
        /// The snapshot path (after following links).
        target: PathBuf,
        /// The lock file.
        lock: PathBuf,
        /// What is there instead.
        kind: FileKind,
    },
    /// The lock file could not be created or locked.
    #[error("cannot lock {} (lock file {}): {cause}", target.display(), lock.display())]
    Io {
        /// The snapshot path (after following links).
        target: PathBuf,
        /// The lock file.
        lock: PathBuf,
        /// The I/O error (shown in the message, not returned by `source()`).
        cause: io::Error,
    },
}

impl SnapshotLock {
    /// Locks the snapshot at `path` (following symbolic links, once, to the file they name:
    /// read and write [`SnapshotLock::target`] afterwards, so that a link changed meanwhile
    /// cannot redirect the write), waiting for another holder to release it when `wait` is
    /// true.
    ///
    /// Nothing is created unless the target can be a snapshot: a target that exists and is
    /// not a regular file, or a directory that does not exist, is refused before the lock
    /// file is made. The lock file is opened without following links, so a link planted at
    /// its name cannot make this create a file elsewhere.
    ///
    /// # Errors
    /// [`LockError::Busy`] when not waiting and another process holds the lock,
    /// [`LockError::NotARegularFile`] for the target or the lock file, or [`LockError::Io`].
    pub fn acquire(path: impl AsRef<Path>, wait: bool) -> Result<Self, LockError> {
        let requested = path.as_ref();
        let target = fsutil::resolve_links(requested).map_err(|cause| LockError::Io {
            target: requested.to_path_buf(),
            lock: requested.to_path_buf(),
            cause,
        })?;
        let lock = lock_path(&target).ok_or_else(|| LockError::Io {
            target: target.clone(),
            lock: target.clone(),
            cause: io::Error::new(io::ErrorKind::InvalidInput, "the path has no file name"),
        })?;
        let io_err = |cause| LockError::Io {
            target: target.clone(),
            lock: lock.clone(),
            cause,
        };
        if let Some(kind) = fsutil::non_regular_kind(&target).map_err(io_err)? {
            return Err(LockError::NotARegularFile {
                target: target.clone(),
                lock: target.clone(),
                kind,
            });
        }
        let dir = fsutil::parent_dir(&target);
        if !dir.is_dir() {
            return Err(io_err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("the directory {} does not exist", dir.display()),
            )));
        }
        let mut options = OpenOptions::new();
        options.read(true).write(true).create(true).truncate(false);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW);
        }
        let file = options.open(&lock).map_err(io_err)?;
        if let Some(kind) = FileKind::of(file.metadata().map_err(io_err)?.file_type()) {
            return Err(LockError::NotARegularFile {
                target: target.clone(),
                lock: lock.clone(),
                kind,
            });
        }
        if wait {
            file.lock().map_err(io_err)?;
        } else {
            match file.try_lock() {
                Ok(()) => {}
                Err(std::fs::TryLockError::WouldBlock) => {
                    return Err(LockError::Busy {
                        target: target.clone(),
                        lock: lock.clone(),
                    });
                }
                Err(std::fs::TryLockError::Error(e)) => return Err(io_err(e)),
            }
        }
        Ok(Self {
            _file: file,
            path: target,
        })
    }

    /// The snapshot file the lock covers (links followed).
    #[must_use]
    pub fn target(&self) -> &Path {
        &self.path
    }
}

fn lock_path(target: &Path) -> Option<PathBuf> {
    let mut name = std::ffi::OsString::from(".");
    name.push(target.file_name()?);
    name.push(".lock");
    Some(fsutil::parent_dir(target).join(name))
}
