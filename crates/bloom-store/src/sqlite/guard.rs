//! What ties a [`SqliteStore`](super::SqliteStore) to the file it opened: the file's
//! identity on disk, the store's identity in it, and the newest point of its history this
//! handle has seen. A file replaced under a running process (another file moved or copied to
//! its path, the file deleted and made again, a backup written over it) is caught by every
//! call, and by the claim's watcher as it happens (`watch.rs`): the store then fails every
//! call with [`SqliteStoreError::Replaced`], and its wrapper's claim is lost for good.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bloom_format::{DatasetGeneration, StoreIdentity};
use rusqlite::{Connection, OpenFlags, OptionalExtension};

use crate::claim::ClaimWatch;
use crate::history::HistoryPoint;

use super::chain;
use super::error::SqliteStoreError;
use super::writes::from_seq;

/// A file as the system names it: its device and inode (on Unix), the same for every path to
/// it and new for a file made again under the same name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct FileId {
    #[cfg(unix)]
    dev: u64,
    #[cfg(unix)]
    ino: u64,
}

impl FileId {
    /// The file `path` names now (links followed).
    pub(super) fn of(path: &Path) -> std::io::Result<Self> {
        let meta = std::fs::metadata(path)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            Ok(Self {
                dev: meta.dev(),
                ino: meta.ino(),
            })
        }
        #[cfg(not(unix))]
        {
            let _ = meta;
            Ok(Self {})
        }
    }
}

/// The file a store opened and what this handle has seen of it.
#[derive(Debug)]
pub(super) struct Guard {
    /// The path SQLite opened (absolute).
    pub(super) path: PathBuf,
    file: FileId,
    identity: StoreIdentity,
    /// The newest point of the store's history this handle has seen (read or committed): a
    /// file whose history no longer has it is not this store any more.
    seen: Mutex<HistoryPoint>,
    /// Commits of this handle between their `COMMIT` and the record of their head.
    in_flight: std::sync::atomic::AtomicU32,
    /// The claims' watch: lost for good once the file is found replaced.
    pub(super) watch: ClaimWatch,
    /// The running watchers (one per claim held): what a call waits for before it reads
    /// or writes.
    settle: Mutex<Vec<Arc<Settle>>>,
    /// Set when the store closes: no check runs from then on (each check holds it shared).
    closing: std::sync::RwLock<bool>,
    /// The change counter of the database's wal-index: a commit of another connection, seen
    /// at the next answer.
    pub(super) wal: super::wal_index::WalIndex,
}

/// A commit in flight ([`Guard::committing`]).
pub(super) struct Committing<'g>(&'g Guard);

impl Drop for Committing<'_> {
    fn drop(&mut self) {
        self.0
            .in_flight
            .fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

/// How long a call waits for the watcher's verdict on a change to the file before it fails
/// with [`SqliteStoreError::Unsettled`].
const SETTLE_WAIT: Duration = Duration::from_secs(5);

/// The watcher's side of a call: whether a change to the file is waiting to be checked (its
/// events queued, or the check running or to be tried again). A call never reads a file
/// someone else is writing, nor one whose change has not been judged.
pub(super) struct Settle {
    /// Set while the watcher handles a change, until its verdict; and whether the watcher
    /// has stopped (then nothing is waited for: its queue is nobody's).
    busy: Mutex<(bool, bool)>,
    judged: std::sync::Condvar,
    /// Whether events are queued that the watcher has not taken yet.
    queued: Box<dyn Fn() -> bool + Send + Sync>,
}

impl std::fmt::Debug for Settle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settle").finish_non_exhaustive()
    }
}

impl Settle {
    pub(super) fn new(queued: impl Fn() -> bool + Send + Sync + 'static) -> Self {
        Self {
            busy: Mutex::new((false, false)),
            judged: std::sync::Condvar::new(),
            queued: Box::new(queued),
        }
    }

    /// The watcher takes a change up.
    pub(super) fn begin(&self) {
        self.busy.lock().unwrap_or_else(PoisonError::into_inner).0 = true;
    }

    /// The watcher's verdict is in (or the change was nothing to judge).
    pub(super) fn end(&self) {
        self.busy.lock().unwrap_or_else(PoisonError::into_inner).0 = false;
        self.judged.notify_all();
    }

    /// The watcher stopped (its claim dropped or lost): calls wait for it no more.
    pub(super) fn retire(&self) {
        *self.busy.lock().unwrap_or_else(PoisonError::into_inner) = (false, true);
        self.judged.notify_all();
    }

    /// Waits until no change is waiting to be judged; `false` past [`SETTLE_WAIT`].
    pub(super) fn wait(&self) -> bool {
        let deadline = std::time::Instant::now() + SETTLE_WAIT;
        let mut busy = self.busy.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            let (judging, retired) = *busy;
            if retired || (!judging && !(self.queued)()) {
                return true;
            }
            let now = std::time::Instant::now();
            if now >= deadline {
                return false;
            }
            // Woken by the verdict; queued events wake the watcher, not this call, so it
            // looks again a little later.
            busy = self
                .judged
                .wait_timeout(busy, (deadline - now).min(Duration::from_millis(5)))
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

impl Guard {
    /// The guard of the file at `path`, which SQLite just opened and whose identity is
    /// `identity`.
    pub(super) fn new(path: PathBuf, identity: StoreIdentity) -> Result<Self, SqliteStoreError> {
        let file = FileId::of(&path).map_err(|e| SqliteStoreError::Replaced {
            path: path.clone(),
            why: format!("it cannot be looked at ({e})"),
        })?;
        let wal = super::wal_index::WalIndex::open(&path);
        Ok(Self {
            path,
            file,
            identity,
            seen: Mutex::new(HistoryPoint::genesis(identity)),
            in_flight: std::sync::atomic::AtomicU32::new(0),
            watch: ClaimWatch::new(),
            settle: Mutex::new(Vec::new()),
            closing: std::sync::RwLock::new(false),
            wal,
        })
    }

    fn replaced(&self, why: String) -> SqliteStoreError {
        self.watch.lose(format!(
            "the database file {} was replaced: {why}",
            self.path.display()
        ));
        SqliteStoreError::Replaced {
            path: self.path.clone(),
            why,
        }
    }

    /// The store closes: waits for a check that is running, and lets no other start.
    pub(super) fn close(&self) {
        *self.closing.write().unwrap_or_else(PoisonError::into_inner) = true;
    }

    /// A watcher starts judging changes to the file.
    pub(super) fn watched_by(&self, settle: &Arc<Settle>) {
        self.settle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Arc::clone(settle));
    }

    /// A watcher stops.
    pub(super) fn unwatched_by(&self, settle: &Arc<Settle>) {
        self.settle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|s| !Arc::ptr_eq(s, settle));
    }

    /// Before every call: the file is still the one opened (one `stat`), the store was not
    /// found replaced before, and (while a watcher runs) no change to the file waits to be
    /// judged.
    pub(super) fn check(&self) -> Result<(), SqliteStoreError> {
        self.check_file()?;
        let watchers = self
            .settle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if !watchers.iter().all(|settle| settle.wait()) {
            return Err(SqliteStoreError::Unsettled {
                path: self.path.clone(),
            });
        }
        // The verdict may have been that it was replaced.
        self.check_file()
    }

    /// The file is still the one opened, and was not found replaced.
    fn check_file(&self) -> Result<(), SqliteStoreError> {
        if let crate::ClaimStatus::Lost { why } = self.watch.status() {
            return Err(SqliteStoreError::Replaced {
                path: self.path.clone(),
                why,
            });
        }
        match FileId::of(&self.path) {
            Ok(file) if file == self.file => Ok(()),
            Ok(_) => Err(self.replaced("another file is at its path now".into())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Err(self.replaced("it is gone from its path".into()))
            }
            Err(e) => Err(self.replaced(format!("it cannot be looked at ({e})"))),
        }
    }

    /// Whether the path still names the file opened (one `stat`).
    #[cfg_attr(
        target_os = "linux",
        allow(dead_code, reason = "the probe without inotify")
    )]
    pub(super) fn same_file(&self) -> bool {
        FileId::of(&self.path).is_ok_and(|file| file == self.file)
    }

    /// A connection opened on the path holds this store (its identity is the one opened):
    /// `Err(Some(Replaced))` when it holds another (or none), `Err(None)` when it cannot be
    /// read now (busy, locked, being written).
    fn identity_check(&self, conn: &Connection) -> Result<(), Option<SqliteStoreError>> {
        let found: Option<Vec<u8>> = conn
            .query_row(
                "SELECT value FROM main.bloom_store_meta WHERE name = 'identity'",
                [],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| self.unreadable(&e))?;
        if found.as_deref() == Some(self.identity.to_bytes().as_slice()) {
            Ok(())
        } else {
            Err(Some(self.replaced(match found {
                Some(_) => "it holds another store now".into(),
                None => "it holds no store now".into(),
            })))
        }
    }

    /// See [`Guard::verify`]: `Err(None)` while a commit of this handle may have landed
    /// without its record.
    fn nothing_unseen(
        &self,
        conn: &Connection,
        seen: HistoryPoint,
        claim: &ClaimWatch,
    ) -> Result<(), Option<SqliteStoreError>> {
        let head: Option<i64> = conn
            .query_row("SELECT MAX(seq) FROM main.bloom_changes", [], |r| r.get(0))
            .map_err(|e| self.unreadable(&e))?;
        let head = head.map_or(DatasetGeneration::ZERO, from_seq);
        let busy = self.in_flight.load(std::sync::atomic::Ordering::Acquire) > 0;
        let seen = self.floor().max(seen.generation);
        if head <= seen {
            return Ok(());
        }
        if busy {
            return Err(None);
        }
        // Writes that did not pass through the wrapper (another program, or a copy that went
        // its own way from this very history): the store is still this one, but the filter
        // lacks their keys until a save or a rebuild takes them in.
        claim.fall_behind(head);
        Ok(())
    }

    /// A read of the file that failed: the file replaced, when SQLite says it is no
    /// database any more (only a writer other than SQLite, such as a copy over the open file,
    /// makes a database SQLite can no longer read); `None` (try again) otherwise.
    ///
    /// A store table that is not there any more (another database written over it through
    /// SQLite, by a restore or a backup) is the file replaced too: it holds no store now.
    fn unreadable(&self, error: &rusqlite::Error) -> Option<SqliteStoreError> {
        if let rusqlite::Error::SqliteFailure(_, Some(message)) = error
            && message.starts_with("no such table: main.bloom_")
        {
            return Some(self.replaced(format!("it holds no store now ({message})")));
        }
        matches!(
            error.sqlite_error_code(),
            Some(rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase)
        )
        .then(|| {
            self.replaced(format!(
                "SQLite can no longer read it ({error}): something other than SQLite wrote over it while it was open"
            ))
        })
    }

    /// [`Guard::identity_check`] for a connection a call just opened: a read that fails is
    /// the call's error.
    pub(super) fn check_identity(&self, conn: &Connection) -> Result<(), SqliteStoreError> {
        match self.identity_check(conn) {
            Ok(()) => Ok(()),
            Err(Some(replaced)) => Err(replaced),
            Err(None) => conn
                .query_row(
                    "SELECT value FROM main.bloom_store_meta WHERE name = 'identity'",
                    [],
                    |_| Ok(()),
                )
                .map_err(SqliteStoreError::from),
        }
    }

    /// Marks a commit of this handle in flight until the returned guard is dropped (after
    /// its head was recorded).
    pub(super) fn committing(&self) -> Committing<'_> {
        self.in_flight
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        Committing(self)
    }

    /// The newest generation seen so far.
    pub(super) fn floor(&self) -> DatasetGeneration {
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .generation
    }

    /// Records the store's head as it was opened.
    pub(super) fn saw(&self, point: HistoryPoint) -> Result<(), SqliteStoreError> {
        self.saw_after(DatasetGeneration::ZERO, point)
    }

    /// Records a head read or committed by an operation that began once `floor` had been
    /// seen: the store's history never goes back while it is open, so a head behind it is
    /// another history. (A read that began earlier may return an older head, which says
    /// nothing: hence the floor taken before, not the newest seen now.)
    pub(super) fn saw_after(
        &self,
        floor: DatasetGeneration,
        point: HistoryPoint,
    ) -> Result<(), SqliteStoreError> {
        if point.generation < floor {
            return Err(self.replaced(format!(
                "its history went back from generation {floor} to {} (a backup put back?)",
                point.generation
            )));
        }
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        if point.generation > seen.generation {
            *seen = point;
        }
        Ok(())
    }

    /// The whole check, on a connection of its own (the watcher's, after something changed
    /// the file or its directory): the same file, the same store, and the history still has
    /// the newest point seen. `Err(None)` when it cannot be checked now (a lock, a file
    /// being written): try again.
    ///
    /// For an `exclusive` claim, whose wrapper made every change, the head must be that
    /// point too: history past it was made elsewhere (a copy that went its own way put in
    /// the file's place, writes behind the wrapper's back), and its keys are not in the
    /// wrapper's filter: the claim (`claim`) falls behind until a save or a rebuild takes
    /// them in; the store stays usable.
    ///
    /// The `first` check of a claim (as it is taken) takes the head as seen instead: what
    /// was committed before the claim is the store the wrapper opens.
    pub(super) fn verify(
        &self,
        exclusive: Option<&ClaimWatch>,
        first: bool,
    ) -> Result<(), Option<SqliteStoreError>> {
        // Held through the check: a store being closed waits for it, and is never checked
        // again (its own last checkpoint must not find a reader in its way).
        let closing = self.closing.read().unwrap_or_else(PoisonError::into_inner);
        if *closing {
            return Err(None);
        }
        self.check_file().map_err(Some)?;
        // Read before the read transaction begins: the state it reads holds at least this.
        let seen = *self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        let conn = Connection::open_with_flags(
            &self.path,
            OpenFlags::SQLITE_OPEN_READ_ONLY
                | OpenFlags::SQLITE_OPEN_URI
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|_| None)?;
        conn.busy_timeout(Duration::from_millis(500))
            .map_err(|_| None)?;
        // One read transaction: the identity and the history of one state of the file.
        let tx = conn.unchecked_transaction().map_err(|_| None)?;
        self.identity_check(&tx)?;
        let digest = match chain::digest_at(&tx, self.identity, seen.generation) {
            Ok(digest) => digest,
            Err(SqliteStoreError::Sqlite(e)) => return Err(self.unreadable(&e)),
            Err(e) => {
                return Err(Some(
                    self.replaced(format!("its history can no longer be read ({e})")),
                ));
            }
        };
        match digest {
            Some(digest) if digest == seen.digest => match exclusive {
                Some(claim) if !first => self.nothing_unseen(&tx, seen, claim),
                _ if first => match chain::head_in(&tx, self.identity) {
                    Ok(head) => self.saw(head).map_err(Some),
                    Err(SqliteStoreError::Sqlite(e)) => Err(self.unreadable(&e)),
                    Err(e) => Err(Some(e)),
                },
                _ => Ok(()),
            },
            Some(_) => Err(Some(self.replaced(format!(
                "its history up to generation {} is another one (a diverged copy put in its place?)",
                seen.generation
            )))),
            None => Err(Some(self.replaced(format!(
                "its history went back behind generation {} (a backup put back?)",
                seen.generation
            )))),
        }
    }
}
