//! A primary store on SQLite: an append-only change log whose `seq` is the generation and
//! which carries the history digest of every generation, a table of the keys in the store,
//! and a metadata table with the store's identity, all named `bloom_…` beside the
//! application's own tables (the schema and its migrations are in `schema.rs`).

mod chain;
mod error;
mod guard;
mod primary;
mod schema;
mod wal_index;
mod watch;
mod writes;

pub use error::SqliteStoreError;
use writes::{from_seq, gap, read_only, to_seq};

pub use schema::LegacyKeys;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use bloom_format::{DatasetGeneration, StoreIdentity};
use rusqlite::{Connection, OpenFlags, TransactionBehavior};

use crate::history::HistoryPoint;

/// How long a connection waits for another one's write lock before failing with
/// `SQLITE_BUSY`.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// How long the read-only connections of lookups and scans wait for a writer: in
/// rollback-journal mode (a caller's connection may use it) readers wait for every commit.
const READ_BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// How long an open waits for another process's migration of the same database.
const MIGRATION_WAIT: Duration = Duration::from_secs(600);

/// The generation of a key's insert, if the key is in the store (from the index
/// `bloom_keys` alone).
const LIVE_INSERT: &str =
    "SELECT seq FROM main.bloom_changes WHERE key = ?1 AND kind = 1 AND removed_at IS NULL";

/// A primary store in a SQLite database (bundled SQLite; nothing to install), in a file of
/// its own or beside an application's tables.
///
/// - Everything it creates is named `bloom_…`; other tables are left alone, so
///   [`SqliteStore::open`] takes an application's existing database, and
///   [`SqliteStore::from_connection`] a connection the application opened. The schema, its
///   version ([`SqliteStore::SCHEMA_VERSION`], kept in `bloom_store_meta`, never in `PRAGMA user_version`)
///   and its migrations are documented in `docs/sqlite-schema.md`.
/// - Table `bloom_store_meta(name, value)` holds the store's random identity (`identity`,
///   16 bytes), the schema version (`schema`) and the key encoding the keys are in
///   (`key_encoding`). The identity is written in the transaction that creates the schema,
///   so every database has exactly one identity from its first moment.
/// - Table `bloom_changes(seq, kind, key, history)`: the change log. `seq` is the
///   generation, assigned as the previous largest plus one inside the changing transaction
///   (so a duplicate insert, or the removal of a missing key, consumes no generation);
///   `kind` is 1 for an insert and 2 for a removal; `history` is the history digest at
///   `seq`. Append-only (triggers refuse edits and deletions), and without gaps.
/// - The keys in the store are those whose newest change is an insert, found through the
///   index `bloom_changes_by_key(key, seq, kind)`: one table, one index, so an insert costs
///   about what an insert into a table with a unique key costs.
/// - [`PrimaryStore::insert_all`](crate::PrimaryStore::insert_all) commits a batch in one transaction: all of it or none.
/// - Scans (`keys_since`, used by rebuilds and catch-up) and lookups run on their own
///   read-only connections, so a long rebuild does not hold up inserts or lookups.
/// - [`SqliteStore::open`] sets WAL journal mode with `synchronous = NORMAL`: a commit
///   survives a process crash; a power loss may roll back the newest commits. The history
///   digests make that safe: a snapshot taken before the rollback no longer matches the
///   store's history and is not trusted. [`SqliteStore::from_connection`] keeps the
///   connection's own settings.
/// - A database of an earlier schema (1 or 2, or schema 0's, which kept no version
///   and is recognised by its exact `keys` table) is upgraded in place the first time it is
///   opened with write access, in one transaction. A database of a newer schema, or whose
///   `bloom_…` tables have columns bloom-store never gave them, is refused untouched.
/// - An up-to-date database opens without writing, so a read-only one can be opened (and
///   inserts then fail with SQLite's error).
#[derive(Debug)]
pub struct SqliteStore {
    writer: Mutex<Connection>,
    /// Where read connections are opened from; `None` for an in-memory database, whose
    /// single connection serves everything.
    path: Option<PathBuf>,
    readers: Mutex<Vec<Connection>>,
    identity: StoreIdentity,
    /// The file the store opened (`None` in memory): every call checks that its path still
    /// names it, and a claim's watcher watches it.
    guard: Option<Arc<guard::Guard>>,
    /// The wrapper claim of an in-memory database (a file database is claimed by a lock
    /// beside it).
    claimed: crate::claim::ClaimFlag,
}

fn blob16(what: &'static str, bytes: &[u8]) -> Result<[u8; 16], SqliteStoreError> {
    <[u8; 16]>::try_from(bytes).map_err(|_| SqliteStoreError::Damaged {
        what,
        detail: format!("{} bytes, expected 16", bytes.len()),
    })
}

/// Closing: the read connections first, then the writer checkpoints the write-ahead log into
/// the database file and truncates it, so that the file alone (a copy of `keys.sqlite`
/// without its `-wal`) holds every commit. A checkpoint that cannot run (another process
/// still reading, a read-only database) leaves the log, which SQLite replays on the next
/// open as always.
impl Drop for SqliteStore {
    fn drop(&mut self) {
        // A claim's watcher checks the file no more: its reader would be in the checkpoint's
        // way.
        if let Some(guard) = &self.guard {
            guard.close();
        }
        self.readers
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        if self.path.is_some() {
            let conn = self
                .writer
                .get_mut()
                .unwrap_or_else(PoisonError::into_inner);
            // Without waiting: while another connection reads or writes, the checkpoint
            // gives up at once (the last to close checkpoints), never stalling the others.
            let _ = conn.busy_timeout(Duration::ZERO);
            let _ = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
        }
    }
}

impl SqliteStore {
    /// The schema version this build writes, and the newest it reads (kept in
    /// `bloom_store_meta`; see `docs/sqlite-schema.md`).
    pub const SCHEMA_VERSION: i64 = schema::SCHEMA_VERSION;

    /// Opens (or creates) the database at `path`, which may hold other tables, and sets WAL
    /// journal mode with `synchronous = NORMAL`.
    ///
    /// The file is checked first (`PRAGMA integrity_check`: every table and index, and the
    /// free-page list): a file damaged on disk (a flipped bit, a
    /// torn page, a truncation) can make SQLite answer "not there" for a key its table holds,
    /// through an index entry that no longer matches its row, so it is refused with
    /// [`SqliteStoreError::Damaged`] instead of being trusted. The check reads the store's
    /// pages once (about 0.05 s per 50,000 keys, 1 s per million);
    /// [`SqliteStore::open_without_check`] skips it for a file known to be intact.
    ///
    /// # Errors
    /// [`SqliteStoreError`]; a database of a newer schema, or with `bloom_…` tables this
    /// build does not recognise, is refused and left untouched.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, SqliteStoreError> {
        Self::open_with(path, LegacyKeys::Refuse)
    }

    /// [`SqliteStore::open`] without its check of the store's pages: for a file known to be
    /// intact (one this process just closed, say), where the check's read of the whole table
    /// costs too much.
    ///
    /// # Errors
    /// As [`SqliteStore::open`], but a damaged file may open.
    pub fn open_without_check(path: impl AsRef<Path>) -> Result<Self, SqliteStoreError> {
        Self::open_unchecked(path.as_ref(), LegacyKeys::Refuse)
    }

    /// `PRAGMA integrity_check` of the file: a page structure that does not hold together,
    /// a free-page list that does not, or an index entry that is not its row's, is
    /// [`SqliteStoreError::Damaged`].
    fn check_pages(&self) -> Result<(), SqliteStoreError> {
        // The whole file: a check of some tables skips the free-page list and pages two trees
        // share, and a damaged free list breaks the store's next writes.
        let conn = self.writer();
        let verdict: String = conn.query_row("PRAGMA integrity_check", [], |r| r.get(0))?;
        if verdict != "ok" {
            return Err(SqliteStoreError::Damaged {
                what: "database file",
                detail: verdict.lines().take(3).collect::<Vec<_>>().join("; "),
            });
        }
        Ok(())
    }

    /// [`SqliteStore::open`], saying what a table `keys` exactly like schema 0's is
    /// (in a database without bloom-store's metadata; see [`LegacyKeys`]). `open` refuses
    /// such a database with [`SqliteStoreError::LegacyKeysTable`].
    ///
    /// # Errors
    /// As [`SqliteStore::open`].
    pub fn open_with(path: impl AsRef<Path>, legacy: LegacyKeys) -> Result<Self, SqliteStoreError> {
        let store = Self::open_unchecked(path.as_ref(), legacy)?;
        store.check_pages()?;
        Ok(store)
    }

    fn open_unchecked(path: &Path, legacy: LegacyKeys) -> Result<Self, SqliteStoreError> {
        let conn = Connection::open(path)?;
        let mode: String = conn.query_row("PRAGMA journal_mode", [], |r| r.get(0))?;
        if !mode.eq_ignore_ascii_case("wal") && !mode.eq_ignore_ascii_case("memory") {
            // journal_mode returns the resulting mode as a row. A read-only database keeps
            // its mode (it is then not changed by this store either).
            let _ = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0));
        }
        conn.execute_batch("PRAGMA synchronous = NORMAL;")?;
        conn.busy_timeout(BUSY_TIMEOUT)?;
        Self::init(conn, Some(path.to_path_buf()), legacy)
    }

    /// An in-memory database (one connection: scans and writes take turns).
    ///
    /// # Errors
    /// As [`SqliteStore::open`].
    pub fn open_in_memory() -> Result<Self, SqliteStoreError> {
        let conn = Connection::open_in_memory()?;
        conn.busy_timeout(BUSY_TIMEOUT)?;
        Self::init(conn, None, LegacyKeys::Refuse)
    }

    /// Takes a connection the application opened (to its own database, with its own tables,
    /// pragmas and journal mode, which are kept) and creates or upgrades bloom-store's
    /// tables in it. Lookups and scans open read-only connections of their own to the same
    /// file; an in-memory connection serves everything itself. A connection with no busy
    /// timeout gets one of 5 seconds, so that the store's connections wait for each other.
    ///
    /// ```
    /// use bloom_store::{PrimaryStore, SqliteStore};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let conn = rusqlite::Connection::open(dir.path().join("app.sqlite"))?;
    /// conn.execute_batch("CREATE TABLE keys (id INTEGER PRIMARY KEY, name TEXT);")?;
    /// let store = SqliteStore::from_connection(conn)?;   // beside the app's own `keys`
    /// assert_eq!(store.insert(b"record-1")?.map(|g| g.get()), Some(1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// As [`SqliteStore::open`].
    pub fn from_connection(conn: Connection) -> Result<Self, SqliteStoreError> {
        Self::from_connection_with(conn, LegacyKeys::Refuse)
    }

    /// [`SqliteStore::from_connection`], saying what a table `keys` exactly like bloom-store
    /// schema 0's is (see [`LegacyKeys`]).
    ///
    /// # Errors
    /// As [`SqliteStore::open`].
    pub fn from_connection_with(
        conn: Connection,
        legacy: LegacyKeys,
    ) -> Result<Self, SqliteStoreError> {
        let timeout: i64 = conn.query_row("PRAGMA busy_timeout", [], |r| r.get(0))?;
        if timeout <= 0 {
            conn.busy_timeout(BUSY_TIMEOUT)?;
        }
        // "" for an in-memory or temporary database: no other connection can reach it.
        let path = conn
            .path()
            .filter(|path| !path.is_empty())
            .map(PathBuf::from);
        Self::init(conn, path, legacy)
    }

    fn init(
        mut conn: Connection,
        path: Option<PathBuf>,
        legacy: LegacyKeys,
    ) -> Result<Self, SqliteStoreError> {
        let mut state = schema::read_schema_state_consistently(&conn)?;
        schema::check_schema(&mut state, legacy)?;
        if !state.is_current() {
            // Something to create or upgrade: take the write lock, and look again under it
            // (another process may have done it meanwhile). A migration of a large database
            // takes a while: wait for another process's, up to a bound against a hang.
            let usual: i64 = conn.query_row("PRAGMA busy_timeout", [], |r| r.get(0))?;
            conn.busy_timeout(MIGRATION_WAIT)?;
            let migrated = (|| {
                let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
                let mut state = schema::read_schema_state(&tx)?;
                schema::check_schema(&mut state, legacy)?;
                if !state.is_current() {
                    schema::create_or_migrate(&tx, &state)?;
                }
                tx.commit()?;
                Ok::<(), SqliteStoreError>(())
            })();
            conn.busy_timeout(Duration::from_millis(u64::try_from(usual).unwrap_or(0)))?;
            migrated.map_err(read_only)?;
        }
        let state = schema::read_schema_state_consistently(&conn)?;
        let identity = state.identity.ok_or_else(|| SqliteStoreError::Damaged {
            what: "store identity",
            detail: "missing".into(),
        })?;
        let identity = StoreIdentity::from_bytes(blob16("store identity", &identity)?);
        // The file as SQLite names it (an absolute path): read connections open it there
        // whatever the working directory becomes, and the guard watches it.
        let path = path.map(|given| {
            conn.path()
                .filter(|p| !p.is_empty())
                .map_or(given, PathBuf::from)
        });
        let guard = match &path {
            Some(path) => {
                let guard = guard::Guard::new(path.clone(), identity)?;
                // The head as opened, the point a claim checks the file against (a log that
                // cannot be read opens all the same: its scans fail, its lookups answer).
                if let Ok(head) = chain::head_in(&conn, identity) {
                    guard.saw(head)?;
                }
                Some(Arc::new(guard))
            }
            None => None,
        };
        Ok(Self {
            writer: Mutex::new(conn),
            path,
            readers: Mutex::new(Vec::new()),
            identity,
            guard,
            claimed: crate::claim::ClaimFlag::default(),
        })
    }

    /// The number of keys in the store.
    ///
    /// # Errors
    /// The SQLite error.
    pub fn key_count(&self) -> Result<u64, SqliteStoreError> {
        self.read(|conn| {
            Ok(conn
                .query_row(
                    "SELECT COUNT(*) FROM main.bloom_changes WHERE kind = 1 AND removed_at IS NULL",
                    [],
                    |r| r.get::<_, i64>(0),
                )
                .map(|n| u64::try_from(n).unwrap_or(0))?)
        })
    }

    fn writer(&self) -> MutexGuard<'_, Connection> {
        // The connection holds no Rust-side state that a panic could leave half-updated.
        self.writer.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The writing connection, once the file is checked to be the one opened.
    fn checked_writer(&self) -> Result<MutexGuard<'_, Connection>, SqliteStoreError> {
        self.check_file()?;
        Ok(self.writer())
    }

    /// [`SqliteStoreError::Replaced`] once the database file is no longer the one opened
    /// (one `stat` of its path), for good.
    fn check_file(&self) -> Result<(), SqliteStoreError> {
        self.guard.as_ref().map_or(Ok(()), |g| g.check())
    }

    /// Commits `tx`, a write of this store whose new head is `head` (read once `floor` had
    /// been seen), and records that head. The commit is marked in flight (see
    /// `Guard::committing`) from before `COMMIT` until its head is recorded: a watcher that
    /// reads the new head meanwhile tries again rather than take this store's own commit for
    /// a write behind the wrapper's back. The change it makes to the wal-index's counter
    /// (read with the write lock held) is this store's own, and needs no judging.
    fn commit_and_record(
        &self,
        tx: rusqlite::Transaction<'_>,
        floor: DatasetGeneration,
        head: HistoryPoint,
    ) -> Result<(), SqliteStoreError> {
        let Some(guard) = self.guard.as_deref() else {
            return Ok(tx.commit()?);
        };
        let in_flight = guard.committing();
        let before = guard.wal.read();
        tx.commit()?;
        guard.wal.committed(before, guard.wal.read());
        let recorded = guard.saw_after(floor, head);
        drop(in_flight);
        recorded
    }

    /// The newest generation this handle has seen, before a read that may return a head:
    /// the head it returns is never older.
    fn seen_floor(&self) -> DatasetGeneration {
        self.guard
            .as_ref()
            .map_or(DatasetGeneration::ZERO, |g| g.floor())
    }

    /// Records a head read or committed (after `floor`, taken before the read began): a head
    /// behind it means the file's history went back under the open store.
    fn saw(&self, floor: DatasetGeneration, head: HistoryPoint) -> Result<(), SqliteStoreError> {
        match &self.guard {
            Some(guard) => guard.saw_after(floor, head),
            None => Ok(()),
        }
    }

    /// Runs `f` on a read connection of its own (a file database), or on the one connection
    /// (in memory).
    fn read<T>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, SqliteStoreError>,
    ) -> Result<T, SqliteStoreError> {
        let Some(path) = &self.path else {
            return f(&self.writer());
        };
        self.check_file()?;
        let pooled = self
            .readers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        let conn = match pooled {
            Some(conn) => conn,
            None => {
                let conn = Connection::open_with_flags(
                    path,
                    OpenFlags::SQLITE_OPEN_READ_ONLY
                        | OpenFlags::SQLITE_OPEN_URI
                        | OpenFlags::SQLITE_OPEN_NO_MUTEX,
                )?;
                conn.busy_timeout(READ_BUSY_TIMEOUT)?;
                // Opened by path: it must be the store this handle opened.
                if let Some(guard) = &self.guard {
                    guard.check_identity(&conn)?;
                }
                conn
            }
        };
        let result = f(&conn);
        self.readers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(conn);
        result
    }
}
