//! The watcher of a claimed SQLite store: a thread that learns, as it happens, that the
//! database file was replaced, written by another program, or that the claim's lock file was
//! removed, and tells the wrapper's claim (`ClaimWatch`) before anything else can be
//! committed through the new file. On Linux it waits on inotify events of the file and its
//! directory; elsewhere it looks at the file's identity every [`POLL`].
//!
//! - The database file's name made, moved or deleted in its directory, the file itself
//!   moved, unlinked or closed after a write by another program (a backup copied over it, a
//!   `sqlite3` session), or the event queue overflowing: the claim is unconfirmed (lookups
//!   go to the store) until the whole check (`Guard::verify`) passes: the same file, the same
//!   store, the history still has the newest point this handle saw. It is lost for good if
//!   the check fails, or cannot run for [`UNJUDGED_LIMIT`].
//! - A commit of another connection to a database in WAL mode, which writes only the `-wal`
//!   file: seen by the wal-index's change counter (`wal_index.rs`), read with every answer
//!   and at every [`POLL`], and judged the same way.
//! - For a `FilteredStore`, history past what it saw is writes that did not pass through it:
//!   the claim is behind (`ClaimStatus::Behind`) until a save or a rebuild takes them in.
//! - The lock file's name removed, moved or made again: another wrapper could claim the store
//!   now, so the claim is lost for good.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::guard::{Guard, Settle};
use crate::claim::ClaimWatch;

/// How often the watcher looks whether its claim was dropped (and, without inotify, at the
/// file), and how soon a check that could not run is tried again.
const POLL: Duration = Duration::from_millis(100);

/// How long a change may stay unjudged (every check failing to read the file: a lock held
/// throughout, a file being written) before the claim is given up: calls no longer wait,
/// and the filter never answers alone again (reopen the wrapper).
const UNJUDGED_LIMIT: Duration = Duration::from_secs(30);

/// The running watcher; it stops (within [`POLL`]) when dropped, and calls stop waiting
/// for it at once.
pub(super) struct Watcher {
    stop: Arc<AtomicBool>,
    guard: Arc<Guard>,
    settle: Arc<Settle>,
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        self.guard.unwatched_by(&self.settle);
        self.settle.retire();
    }
}

/// What the watcher keeps an eye on.
struct Watched {
    guard: Arc<Guard>,
    claim: ClaimWatch,
    /// Whether the claim is exclusive (its wrapper made every change of the store).
    exclusive: bool,
    settle: Arc<Settle>,
    /// The claim's lock file.
    lock: PathBuf,
    stop: Arc<AtomicBool>,
    /// When the checks that could not run began failing.
    unjudged_since: std::cell::Cell<Option<std::time::Instant>>,
    /// Whether the first check (which takes the head for seen) was decided as the claim was
    /// taken.
    first_decided: std::cell::Cell<bool>,
}

impl Watched {
    /// Something changed the file: unconfirmed, and calls wait, until the check passes
    /// (`true` once it has been decided, `false` when it must be tried again).
    /// The `first` check, as the claim is taken, takes the head for seen.
    fn check_again(&self, first: bool) -> bool {
        self.settle.begin();
        self.claim.suspend();
        // Commits after this reading are judged by the next check.
        let counter = self.guard.wal.read();
        let decided = match self
            .guard
            .verify(self.exclusive.then_some(&self.claim), first)
        {
            Ok(()) => {
                self.guard.wal.accept(counter);
                self.claim.confirm();
                true
            }
            // The guard's own watch is lost with the reason: the claim watches it too.
            Err(Some(_)) => true,
            Err(None) => {
                let since = self
                    .unjudged_since
                    .get()
                    .unwrap_or_else(std::time::Instant::now);
                self.unjudged_since.set(Some(since));
                if since.elapsed() >= UNJUDGED_LIMIT {
                    self.claim.lose(format!(
                        "a change to the database file {} could not be checked for {} s (locked or being written throughout)",
                        self.guard.path.display(),
                        UNJUDGED_LIMIT.as_secs()
                    ));
                    true
                } else {
                    false
                }
            }
        };
        if decided {
            self.unjudged_since.set(None);
        }
        if decided {
            self.settle.end();
        }
        decided
    }

    /// A commit nobody judged yet (the wal-index counter moved; the file's events say
    /// nothing): judged without suspending the claim, whose probe already keeps the filter
    /// from answering alone until the counter is accepted. It may be this store's own commit,
    /// accepted as soon as it returns (the check then finds it in flight, and is tried again
    /// at the next look if it still must be).
    fn judge_commit(&self) {
        let counter = self.guard.wal.read();
        if self
            .guard
            .verify(self.exclusive.then_some(&self.claim), false)
            .is_ok()
        {
            self.guard.wal.accept(counter);
        }
    }

    fn lock_gone(&self) {
        self.claim.lose(format!(
            "the claim's lock file {} was removed or replaced: another wrapper could claim the store",
            self.lock.display()
        ));
    }
}

/// Starts watching `guard`'s file and the claim's `lock` file for `claim`.
///
/// # Errors
/// The watcher's thread or its inotify object could not be made.
pub(super) fn start(
    guard: Arc<Guard>,
    lock: PathBuf,
    claim: ClaimWatch,
    kind: crate::ClaimKind,
) -> std::io::Result<Watcher> {
    let stop = Arc::new(AtomicBool::new(false));
    let run = platform::prepare(&guard, &lock)?;
    let settle = Arc::new(Settle::new(run.probe_queued()));
    // The platform's probe, and the wal-index's change counter: another connection's commit
    // to a database in WAL mode writes nothing the file's events show.
    // Events still queued (this store's own commits, most often) are waited out as calls
    // wait them out, rather than taken for a change: the claim's status is read after the
    // probe, so an answer sees the watcher's verdict on them.
    let probe = run.probe();
    let index = Arc::clone(&guard);
    let settled = Arc::clone(&settle);
    claim.set_probe(move || (probe() || settled.wait()) && index.wal.unchanged());
    let watched = Watched {
        guard: Arc::clone(&guard),
        claim,
        exclusive: kind == crate::ClaimKind::Exclusive,
        settle: Arc::clone(&settle),
        lock,
        stop: Arc::clone(&stop),
        unjudged_since: std::cell::Cell::new(None),
        first_decided: std::cell::Cell::new(false),
    };
    guard.watched_by(&settle);
    // The first check runs here, as the claim is taken, not when the thread gets to it: on a
    // busy machine the thread may start after other programs committed, and their commits
    // would then be taken for the store the wrapper opened instead of writes behind its back.
    // (The file may still have changed between the open and the watch: the check sees it.)
    watched.first_decided.set(watched.check_again(true));
    let spawned = std::thread::Builder::new()
        .name("bloom-store sqlite watch".into())
        .spawn(move || {
            run.run(&watched);
            // Stopped, or the claim lost: calls no longer wait for this watcher.
            watched.guard.unwatched_by(&watched.settle);
            watched.settle.retire();
        });
    let watcher = Watcher {
        stop,
        guard,
        settle,
    };
    spawned?;
    Ok(watcher)
}

#[cfg(target_os = "linux")]
mod platform {
    use std::ffi::OsStr;
    use std::mem::MaybeUninit;
    use std::os::fd::OwnedFd;
    use std::os::unix::ffi::OsStrExt;

    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};

    use super::*;

    /// The inotify object and what each watch descriptor stands for.
    pub(super) struct Run {
        fd: Arc<OwnedFd>,
        /// Directories: the watch and the names in it that matter (the database's, the
        /// lock's).
        dirs: Vec<(i32, Vec<(std::ffi::OsString, Name)>)>,
        file: i32,
        /// A second inotify object, on the `-wal` file: it only wakes the thread when
        /// another connection may have committed (the probe reads the wal-index counter
        /// itself, and must not fail for the store's own commits' events).
        wal: OwnedFd,
        wal_path: PathBuf,
    }

    /// The final component of `path`, and its directory.
    fn split(path: &Path) -> (PathBuf, std::ffi::OsString) {
        let dir = path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
        let name = path.file_name().unwrap_or_default().to_os_string();
        (dir, name)
    }

    #[derive(Clone, Copy)]
    enum Name {
        Database,
        Lock,
    }

    pub(super) fn prepare(guard: &Arc<Guard>, lock: &Path) -> std::io::Result<Run> {
        let fd = Arc::new(inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK)?);
        let named = WatchFlags::CREATE
            | WatchFlags::DELETE
            | WatchFlags::MOVED_FROM
            | WatchFlags::MOVED_TO
            | WatchFlags::DELETE_SELF
            | WatchFlags::MOVE_SELF
            | WatchFlags::ONLYDIR;
        let mut dirs: Vec<(i32, Vec<(std::ffi::OsString, Name)>)> = Vec::new();
        for (path, name) in [(guard.path.as_path(), Name::Database), (lock, Name::Lock)] {
            let (dir, file) = split(path);
            let wd = inotify::add_watch(&*fd, &dir, named)?;
            match dirs.iter_mut().find(|(w, _)| *w == wd) {
                Some((_, names)) => names.push((file, name)),
                None => dirs.push((wd, vec![(file, name)])),
            }
        }
        // Written (a copy over it; SQLite's own checkpoints too, which the check passes),
        // closed after a write, unlinked, moved.
        let file = inotify::add_watch(
            &*fd,
            &guard.path,
            WatchFlags::MODIFY
                | WatchFlags::CLOSE_WRITE
                | WatchFlags::ATTRIB
                | WatchFlags::MOVE_SELF
                | WatchFlags::DELETE_SELF,
        )?;
        let wal = inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK)?;
        let mut wal_path = guard.path.as_os_str().to_os_string();
        wal_path.push("-wal");
        let run = Run {
            fd,
            dirs,
            file,
            wal,
            wal_path: wal_path.into(),
        };
        run.watch_wal();
        Ok(run)
    }

    /// Whether events are queued on `fd` (a `poll` that does not wait).
    fn queued(fd: &OwnedFd) -> bool {
        let mut fds = [PollFd::new(fd, PollFlags::IN)];
        // A poll that fails is taken for queued events: the answer then goes to the store.
        poll(&mut fds, Some(&Timespec::default())).map_or(true, |ready| ready > 0)
    }

    impl Run {
        /// Watches the `-wal` file as it is now (made again when the last connection closed
        /// and another opened: a watch of the same file is the same watch). Not there: not
        /// in WAL mode, or not yet; the next look tries again.
        fn watch_wal(&self) {
            let _ = inotify::add_watch(&self.wal, &self.wal_path, WatchFlags::MODIFY);
        }

        /// Takes every event of the `-wal` watch off its queue.
        fn drain_wal(&self, buf: &mut [MaybeUninit<u8>]) {
            let mut reader = inotify::Reader::new(&self.wal, buf);
            while matches!(reader.next(), Ok(_) | Err(rustix::io::Errno::INTR)) {}
        }

        /// The claim's probe: no event queued that the thread has not taken. The kernel queues
        /// an event as the change is made (a rename returns with its events queued), so an
        /// answer given after a change sees it, however late the thread runs.
        pub(super) fn probe(&self) -> impl Fn() -> bool + Send + Sync + 'static {
            let fd = Arc::clone(&self.fd);
            move || !queued(&fd)
        }

        /// Whether events are queued: what a call waits out.
        pub(super) fn probe_queued(&self) -> impl Fn() -> bool + Send + Sync + 'static {
            let fd = Arc::clone(&self.fd);
            move || queued(&fd)
        }

        pub(super) fn run(self, watched: &Watched) {
            // The first check ran as the claim was taken ([`start`]); until one is decided,
            // checks take the head for seen.
            let mut first = !watched.first_decided.get();
            let mut pending = first && !watched.check_again(first);
            first &= pending;
            let mut buf = [MaybeUninit::<u8>::uninit(); 4096];
            let timeout = Timespec::try_from(POLL).unwrap_or_default();
            while !watched.stop.load(Ordering::Acquire) && !watched.claim.is_lost() {
                let mut fds = [
                    PollFd::new(&*self.fd, PollFlags::IN),
                    PollFd::new(&self.wal, PollFlags::IN),
                ];
                let woken = poll(&mut fds, Some(&timeout));
                let events = fds[0].revents().contains(PollFlags::IN);
                if fds[1].revents().contains(PollFlags::IN) {
                    self.drain_wal(&mut buf);
                }
                self.watch_wal();
                match woken {
                    Ok(_) if !events && !pending && !first => {
                        // Only the wal-index counter may have moved: judged without
                        // suspending the claim (see `Watched::judge_commit`).
                        if !watched.guard.wal.unchanged() {
                            watched.judge_commit();
                        }
                        continue;
                    }
                    Ok(_) => {}
                    Err(_) => std::thread::sleep(POLL),
                }
                // Unconfirmed, and calls waiting, before the events are taken off the queue
                // (while they are on it, the probe keeps answers away and calls wait):
                // whatever they say is handled before the filter answers alone again.
                watched.settle.begin();
                watched.claim.suspend();
                let (changed, lock_gone) = self.drain(&mut buf);
                if lock_gone {
                    watched.lock_gone();
                    watched.settle.end();
                    return;
                }
                if changed || pending || !watched.guard.wal.unchanged() {
                    pending = !watched.check_again(first);
                    first &= pending;
                } else {
                    // Other files of the directory (the log, the lock's neighbours).
                    watched.claim.confirm();
                    watched.settle.end();
                }
            }
        }

        /// Reads every event queued: whether the file may have changed, and whether the
        /// lock's name was touched.
        fn drain(&self, buf: &mut [MaybeUninit<u8>]) -> (bool, bool) {
            let (mut changed, mut lock_gone) = (false, false);
            let mut reader = inotify::Reader::new(&*self.fd, buf);
            loop {
                let event = match reader.next() {
                    Ok(event) => event,
                    Err(rustix::io::Errno::INTR) => continue,
                    // WOULDBLOCK: nothing more for now; any other error: look at the file.
                    Err(e) => {
                        changed |= e != rustix::io::Errno::WOULDBLOCK;
                        break;
                    }
                };
                let flags = event.events();
                if flags.contains(ReadFlags::QUEUE_OVERFLOW) {
                    changed = true;
                    continue;
                }
                if event.wd() == self.file {
                    // Written and closed, unlinked, moved (or the watch ended with it).
                    changed = true;
                    continue;
                }
                let Some((_, names)) = self.dirs.iter().find(|(wd, _)| *wd == event.wd()) else {
                    continue;
                };
                if flags.intersects(ReadFlags::DELETE_SELF | ReadFlags::MOVE_SELF) {
                    // The directory itself went away: so did both names.
                    changed = true;
                    lock_gone = true;
                    continue;
                }
                let Some(name) = event.file_name() else {
                    continue;
                };
                let name = OsStr::from_bytes(name.to_bytes());
                for (watched, what) in names {
                    if name == watched.as_os_str() {
                        match what {
                            Name::Database => changed = true,
                            Name::Lock => lock_gone = true,
                        }
                    }
                }
            }
            (changed, lock_gone)
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod platform {
    use super::*;
    use crate::sqlite::guard::FileId;

    /// Without inotify: the file's and the lock's identities, and the file's size and time
    /// of change, looked at every [`POLL`].
    pub(super) struct Run {
        lock: Option<FileId>,
        guard: Arc<Guard>,
        stamp: std::cell::Cell<Option<(u64, std::time::SystemTime)>>,
    }

    /// The file's length and time of last change: a copy written over it in place changes
    /// one or the other.
    fn stamp(path: &Path) -> Option<(u64, std::time::SystemTime)> {
        let meta = std::fs::metadata(path).ok()?;
        Some((meta.len(), meta.modified().ok()?))
    }

    pub(super) fn prepare(guard: &Arc<Guard>, lock: &Path) -> std::io::Result<Run> {
        Ok(Run {
            lock: FileId::of(lock).ok(),
            guard: Arc::clone(guard),
            stamp: std::cell::Cell::new(stamp(&guard.path)),
        })
    }

    impl Run {
        /// The claim's probe: the path still names the file opened (one `stat`). A backup
        /// copied over the file in place is seen by the thread, within [`POLL`], by the
        /// file's size or time of change; until then the filter may answer alone.
        pub(super) fn probe(&self) -> impl Fn() -> bool + Send + Sync + 'static {
            let guard = Arc::clone(&self.guard);
            move || guard.same_file()
        }

        /// Calls wait for nothing the thread has not seen (it looks every [`POLL`]).
        pub(super) fn probe_queued(&self) -> impl Fn() -> bool + Send + Sync + 'static {
            || false
        }

        pub(super) fn run(self, watched: &Watched) {
            // The first check ran as the claim was taken ([`start`]); until one is decided,
            // checks take the head for seen.
            let mut first = !watched.first_decided.get();
            let mut pending = first && !watched.check_again(first);
            first &= pending;
            while !watched.stop.load(Ordering::Acquire) && !watched.claim.is_lost() {
                std::thread::sleep(POLL);
                if FileId::of(&watched.lock).ok() != self.lock {
                    watched.lock_gone();
                    watched.settle.end();
                    return;
                }
                let now = stamp(&watched.guard.path);
                let touched = now != self.stamp.replace(now);
                if pending
                    || touched
                    || watched.guard.check().is_err()
                    || !watched.guard.wal.unchanged()
                {
                    pending = !watched.check_again(first);
                    first &= pending;
                }
            }
        }
    }
}
