//! The change counter of SQLite's wal-index: how a claim learns, at the next answer, that
//! another connection committed to a database in WAL mode.
//!
//! In WAL mode a commit appends to the `-wal` file and leaves the database file alone, so the
//! file's inotify events say nothing of it (another program's `.restore`, or its writes, are
//! seen only when it closes). Every commit, by any connection, writes the wal-index header at
//! the start of the `-shm` file (<https://www.sqlite.org/walformat.html>, "The WAL-Index
//! Header"): 48 bytes, twice, whose third `u32` (`iChange`, native byte order) changes with
//! every transaction. The store remembers the value it accepted (after its own commit, or
//! after the watcher judged someone else's); any other value, or a header caught being
//! written (its two copies differ), means a commit nobody judged yet. Reading it is one
//! `pread` of 96 bytes; nothing is mapped, so a file cut short under us is an error, not a
//! signal.

use std::fs::File;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// The size of one copy of the wal-index header.
const HEADER: usize = 48;
/// The offset of `iChange` in a copy.
const CHANGE: usize = 8;
/// `accepted` before any value was accepted.
const NONE: u64 = u64::MAX;

/// A database's wal-index, and the change counter this store accepted.
#[derive(Debug)]
pub(super) struct WalIndex {
    /// `DATABASE-shm`, read only; `None` for a database not in WAL mode.
    file: Option<File>,
    accepted: AtomicU64,
}

/// What the wal-index says now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Reading {
    /// No wal-index: the database is not in WAL mode (its commits write the file itself,
    /// which inotify sees).
    Absent,
    /// The change counter.
    Counter(u32),
    /// It could not be read, or was caught being written: taken for a change.
    Unreadable,
}

impl WalIndex {
    /// The wal-index of the database at `db`, if it has one (a database in WAL mode that a
    /// connection has open).
    pub(super) fn open(db: &Path) -> Self {
        let mut name = db.as_os_str().to_os_string();
        name.push("-shm");
        let file = File::open(name)
            .ok()
            .filter(|f| f.metadata().is_ok_and(|m| m.is_file()));
        let index = Self {
            file,
            accepted: AtomicU64::new(NONE),
        };
        index.accept(index.read());
        index
    }

    /// The counter now.
    pub(super) fn read(&self) -> Reading {
        let Some(file) = &self.file else {
            return Reading::Absent;
        };
        let mut both = [0u8; 2 * HEADER];
        if read_at_start(file, &mut both).is_err() {
            return Reading::Unreadable;
        }
        let (first, second) = both.split_at(HEADER);
        if first != second {
            return Reading::Unreadable;
        }
        let mut change = [0u8; 4];
        change.copy_from_slice(&first[CHANGE..CHANGE + 4]);
        #[expect(
            clippy::host_endian_bytes,
            reason = "the wal-index is in the byte order of the machine that has it open"
        )]
        let change = u32::from_ne_bytes(change);
        Reading::Counter(change)
    }

    /// Whether no commit happened since the counter accepted last (always, without a
    /// wal-index).
    pub(super) fn unchanged(&self) -> bool {
        match self.read() {
            Reading::Absent => true,
            Reading::Counter(now) => u64::from(now) == self.accepted.load(Ordering::Acquire),
            Reading::Unreadable => false,
        }
    }

    /// The commits up to `reading` were judged (read before the check that judged them).
    /// Never back: a value accepted meanwhile (this store's own next commit) is newer.
    pub(super) fn accept(&self, reading: Reading) {
        if let Reading::Counter(now) = reading {
            let _ = self
                .accepted
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |accepted| {
                    let newer = accepted == NONE || (now.wrapping_sub(accepted as u32) as i32) > 0;
                    newer.then_some(u64::from(now))
                });
        }
    }

    /// This store's own commit: `before` was read holding the write lock, `after` once it
    /// committed. Accepted only if nothing else happened between what was accepted and
    /// `after`: the counter accepted was `before`, and moved by one. Anything else (a commit
    /// of another connection just before or just after ours, a log restarted by ours) is
    /// left for the watcher to judge.
    pub(super) fn committed(&self, before: Reading, after: Reading) {
        if let (Reading::Counter(before), Reading::Counter(after)) = (before, after)
            && after == before.wrapping_add(1)
        {
            let _ = self.accepted.compare_exchange(
                u64::from(before),
                u64::from(after),
                Ordering::AcqRel,
                Ordering::Acquire,
            );
        }
    }
}

/// Fills `buf` from the start of `file`, leaving its cursor alone where the platform can.
#[cfg(unix)]
fn read_at_start(file: &File, buf: &mut [u8]) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    file.read_exact_at(buf, 0)
}

#[cfg(windows)]
fn read_at_start(file: &File, buf: &mut [u8]) -> std::io::Result<()> {
    use std::os::windows::fs::FileExt;
    let mut done = 0;
    while done < buf.len() {
        match file.seek_read(&mut buf[done..], done as u64)? {
            0 => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            n => done += n,
        }
    }
    Ok(())
}

#[cfg(not(any(unix, windows)))]
fn read_at_start(_: &File, _: &mut [u8]) -> std::io::Result<()> {
    Err(std::io::ErrorKind::Unsupported.into())
}
