//! File-system details of reading and writing snapshot files safely: opening without
//! blocking on named pipes, refusing what is not a regular file, following symbolic links to
//! the file they name, and finding temporary files that a killed writer left behind.

use std::ffi::OsString;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

use crate::error::FileKind;

/// Symbolic links followed before giving up, as Linux's `MAXSYMLINKS`.
const MAX_LINK_HOPS: usize = 40;

/// Why a path could not be opened as a regular file.
#[derive(Debug)]
pub(crate) enum OpenFailure {
    Io(io::Error),
    NotRegular(FileKind),
}

/// Opens `path` for reading without blocking, and only if it is a regular file (after
/// following symbolic links).
///
/// The open itself is non-blocking, so a named pipe with no writer cannot hang the caller;
/// the type is then checked on the opened handle, so the path cannot be swapped between
/// the check and the read.
pub(crate) fn open_regular(path: &Path) -> Result<File, OpenFailure> {
    let mut options = OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK);
    }
    let file = options.open(path).map_err(OpenFailure::Io)?;
    let file_type = file.metadata().map_err(OpenFailure::Io)?.file_type();
    match FileKind::of(file_type) {
        None => Ok(file),
        Some(kind) => Err(OpenFailure::NotRegular(kind)),
    }
}

/// The file a write to `path` must replace: `path` itself, or, if it is a symbolic link,
/// the file the chain of links ends at (which may not exist yet).
pub(crate) fn resolve_links(path: &Path) -> io::Result<PathBuf> {
    let mut current = path.to_path_buf();
    for _ in 0..MAX_LINK_HOPS {
        match fs::symlink_metadata(&current) {
            Ok(meta) if meta.file_type().is_symlink() => {
                let target = fs::read_link(&current)?;
                current = match current.parent() {
                    Some(dir) if target.is_relative() => dir.join(target),
                    _ => target,
                };
            }
            _ => return Ok(current),
        }
    }
    Err(io::Error::other(format!(
        "more than {MAX_LINK_HOPS} levels of symbolic links"
    )))
}

/// The directory holding `path`, `.` for a bare file name.
pub(crate) fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// What is at `path` now, if it is something a write must not replace.
pub(crate) fn non_regular_kind(path: &Path) -> io::Result<Option<FileKind>> {
    match fs::symlink_metadata(path) {
        Ok(meta) => Ok(FileKind::of(meta.file_type())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Whether the regular file at `path` (if any) may be replaced by a snapshot: it does not
/// exist, is empty, or starts with the snapshot magic (or a prefix of it, for a truncated
/// snapshot).
pub(crate) fn starts_like_a_snapshot(path: &Path) -> io::Result<bool> {
    use std::io::Read;
    let mut file = match open_regular(path) {
        Ok(file) => file,
        Err(OpenFailure::Io(e)) if e.kind() == io::ErrorKind::NotFound => return Ok(true),
        Err(OpenFailure::Io(e)) => return Err(e),
        Err(OpenFailure::NotRegular(_)) => return Ok(false),
    };
    let mut head = [0u8; 8];
    let mut filled = 0;
    while let Some(rest) = head.get_mut(filled..) {
        match file.read(rest) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
        if filled == head.len() {
            break;
        }
    }
    Ok(head.get(..filled) == crate::header::MAGIC.get(..filled))
}

/// The temporary file name for writing `target`: `.NAME.PID.N.tmp` in the same directory.
pub(crate) fn temporary_name(target: &Path, counter: u64) -> Option<PathBuf> {
    let name = target.file_name()?;
    let mut tmp = OsString::from(".");
    tmp.push(name);
    tmp.push(format!(".{}.{counter}.tmp", std::process::id()));
    Some(parent_dir(target).join(tmp))
}

/// Whether `candidate` is a temporary file name that [`temporary_name`] makes for `name`.
fn is_temporary_of(candidate: &str, name: &str) -> bool {
    let Some(rest) = candidate
        .strip_prefix('.')
        .and_then(|c| c.strip_prefix(name))
        .and_then(|c| c.strip_prefix('.'))
        .and_then(|c| c.strip_suffix(".tmp"))
    else {
        return false;
    };
    let mut parts = rest.split('.');
    let numeric =
        |p: Option<&str>| p.is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    numeric(parts.next()) && numeric(parts.next()) && parts.next().is_none()
}

/// Removes the temporary files that writers of `target` left behind when they were killed.
///
/// Only names of the form `.NAME.PID.N.tmp` for this target's NAME are considered, and only
/// regular files. A writer holds an exclusive lock on its temporary file until it renames or
/// removes it, and the lock dies with its process: a file that can be locked has no live
/// writer. Returns how many files were removed. Errors are ignored: a leftover file is
/// harmless, and the write that follows does not depend on it.
pub(crate) fn remove_stale_temporaries(target: &Path) -> usize {
    let Some(name) = target.file_name().and_then(|n| n.to_str()) else {
        return 0;
    };
    let Ok(entries) = fs::read_dir(parent_dir(target)) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let Some(candidate) = file_name.to_str() else {
            continue;
        };
        if !is_temporary_of(candidate, name) {
            continue;
        }
        let path = entry.path();
        let Ok(Some(file)) = open_unlocked_regular(&path) else {
            continue;
        };
        if fs::remove_file(&path).is_ok() {
            removed += 1;
        }
        drop(file);
    }
    removed
}

/// Opens `path` and takes its lock without waiting; `None` when it is not a regular file or
/// a live writer holds the lock.
fn open_unlocked_regular(path: &Path) -> io::Result<Option<File>> {
    if fs::symlink_metadata(path)?.file_type().is_file() {
        let file = match open_regular(path) {
            Ok(file) => file,
            Err(OpenFailure::Io(e)) => return Err(e),
            Err(OpenFailure::NotRegular(_)) => return Ok(None),
        };
        return match file.try_lock() {
            Ok(()) => Ok(Some(file)),
            Err(_) => Ok(None),
        };
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temporary_names_are_recognised_exactly() {
        assert!(is_temporary_of(".a.bloom.123.0.tmp", "a.bloom"));
        assert!(is_temporary_of(".a.bloom.1.99.tmp", "a.bloom"));
        for other in [
            ".a.bloom.123.tmp",
            ".a.bloom.x.0.tmp",
            ".a.bloom.1.2.3.tmp",
            ".b.bloom.1.2.tmp",
            "a.bloom.1.2.tmp",
            ".a.bloom.1.2.tmpx",
            ".a.bloom..2.tmp",
            ".a.bloom.lock",
        ] {
            assert!(!is_temporary_of(other, "a.bloom"), "{other}");
        }
        let tmp = temporary_name(Path::new("dir/a.bloom"), 7).unwrap();
        let name = tmp.file_name().unwrap().to_str().unwrap();
        assert!(is_temporary_of(name, "a.bloom"), "{name}");
        assert_eq!(tmp.parent(), Some(Path::new("dir")));
    }
}
