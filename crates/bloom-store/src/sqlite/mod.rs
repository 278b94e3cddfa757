//! A primary store on SQLite: an append-only change log whose `seq` is the generation and
//! which carries the history digest of every generation, a table of the keys in the store,
//! and a metadata table with the store's identity, all named `bloom_…` beside the
//! application's own tables (the schema and its migrations are in `schema.rs`).

mod chain;
mod schema;

pub use schema::LegacyKeys;

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use bloom_format::{DatasetGeneration, HistoryDigest, StoreIdentity};
use rusqlite::{Connection, OpenFlags, OptionalExtension, TransactionBehavior, params};

use crate::history::{self, Change, HistoryPoint, IdentityError, KeyGeneration, Removal};
use crate::primary::PrimaryStore;

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

/// Errors of [`SqliteStore`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SqliteStoreError {
    /// SQLite failed.
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
    /// The database was written by a newer bloom-store.
    #[error(
        "the database was written by a newer bloom-store (schema {found}); this build reads schemas up to {supported}"
    )]
    NewerSchema {
        /// The schema version in the database.
        found: i64,
        /// The newest this build reads.
        supported: i64,
    },
    /// The database has a `keys` (or `bloom_changes`) table that bloom-store did not create;
    /// it is left alone.
    #[error(
        "the database has a table named {table} that bloom-store did not create (columns {columns}); refusing to change it"
    )]
    ForeignTable {
        /// The table's name.
        table: &'static str,
        /// Its columns, comma separated.
        columns: String,
    },
    /// The database has a table, index or trigger with one of bloom-store's names that
    /// bloom-store did not create; it is left alone.
    #[error(
        "the database has {found} named {name} that bloom-store did not create; refusing to change it"
    )]
    ForeignObject {
        /// The name.
        name: &'static str,
        /// What it is (`a table`, `an index on orders`, ...).
        found: String,
    },
    /// The database has a table `keys` exactly like bloom-store 0.1's, and no bloom-store
    /// metadata: it may be bloom-store 0.1's store, or the application's own table of the
    /// same shape. Nothing was changed.
    #[error(
        "the database has a table `keys` exactly like bloom-store 0.1's and no bloom-store metadata; open it with LegacyKeys::Adopt if bloom-store 0.1 made it (its keys become the store's), or LegacyKeys::Ignore if it is the application's own"
    )]
    LegacyKeysTable,
    /// A value in the database has the wrong shape: it was changed outside bloom-store.
    #[error("{what} in the database is damaged ({detail}); it was changed outside bloom-store")]
    Damaged {
        /// What is damaged.
        what: &'static str,
        /// How.
        detail: String,
    },
    /// No identity could be made for a new database.
    #[error(transparent)]
    Identity(#[from] IdentityError),
    /// The lock file beside the database (`PATH-bloom.lock`) that claims it for one
    /// `FilteredStore` could not be made or locked.
    #[error("cannot lock {path} (the claim of one FilteredStore on the database): {source}")]
    Lock {
        /// The lock file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The database is read-only and needs an upgrade that writes.
    #[error("the database is read-only and must first be opened once with write access ({0})")]
    ReadOnly(String),
}

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
/// - [`PrimaryStore::insert_all`] commits a batch in one transaction: all of it or none.
/// - Scans (`keys_since`, used by rebuilds and catch-up) and lookups run on their own
///   read-only connections, so a long rebuild does not hold up inserts or lookups.
/// - [`SqliteStore::open`] sets WAL journal mode with `synchronous = NORMAL`: a commit
///   survives a process crash; a power loss may roll back the newest commits. The history
///   digests make that safe: a snapshot taken before the rollback no longer matches the
///   store's history and is not trusted. [`SqliteStore::from_connection`] keeps the
///   connection's own settings.
/// - A database of an earlier schema (1 or 2, or bloom-store 0.1's, which kept no version
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
    /// The wrapper claim of an in-memory database (a file database is claimed by a lock
    /// beside it).
    claimed: crate::primary::ClaimFlag,
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

    /// [`SqliteStore::open`], saying what a table `keys` exactly like bloom-store 0.1's is
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
    /// 0.1's is (see [`LegacyKeys`]).
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
        Ok(Self {
            writer: Mutex::new(conn),
            path,
            readers: Mutex::new(Vec::new()),
            identity,
            claimed: crate::primary::ClaimFlag::default(),
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

    /// Runs `f` on a read connection of its own (a file database), or on the one connection
    /// (in memory).
    fn read<T>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, SqliteStoreError>,
    ) -> Result<T, SqliteStoreError> {
        let Some(path) = &self.path else {
            return f(&self.writer());
        };
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

impl SqliteStore {
    /// Inserts keys, in order, in one IMMEDIATE transaction: each new one is logged with the
    /// next generation and its digest. A key already in the store (or earlier in the batch)
    /// gets `None`.
    fn insert_batch(
        &self,
        keys: &[&[u8]],
    ) -> Result<Vec<Option<DatasetGeneration>>, SqliteStoreError> {
        let mut done = Vec::with_capacity(keys.len());
        if keys.is_empty() {
            return Ok(done);
        }
        let mut conn = self.writer();
        // IMMEDIATE takes the write lock first, so the head read below is the head this
        // batch extends, even with other connections writing.
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        {
            let mut head = chain::head_in(&tx, self.identity)?;
            // One step per key: the unique index `bloom_keys` turns the insert of a key
            // already in the store into no row, so no lookup comes first. The row takes the
            // next rowid, which (with no gaps) is the next generation; SQLite appends it
            // without a search.
            let mut log = tx.prepare_cached(
                "INSERT OR IGNORE INTO main.bloom_changes (kind, key, history) VALUES (1, ?1, ?2)",
            )?;
            let mut live = tx.prepare_cached(LIVE_INSERT)?;
            for &key in keys {
                let generation = next_generation(head)?;
                let digest = history::after_insert(head.digest, generation, key);
                let kept = chain::is_checkpoint(generation).then(|| digest.to_bytes());
                if log.execute(params![key, kept.as_ref().map(<[u8; 16]>::as_slice)])? == 1 {
                    let seq = tx.last_insert_rowid();
                    if seq != to_seq(generation) {
                        // A row past the newest one (appended by hand): the rollback of this
                        // batch takes ours back out.
                        return Err(gap(generation));
                    }
                    head = HistoryPoint { generation, digest };
                    done.push(Some(generation));
                } else if live.exists(params![key])? {
                    done.push(None);
                } else {
                    // Nothing but the key's own entry in `bloom_keys` may refuse the row.
                    return Err(SqliteStoreError::Damaged {
                        what: "change log",
                        detail: format!("generation {generation} cannot be appended"),
                    });
                }
            }
        }
        tx.commit()?;
        Ok(done)
    }

    /// Removes a key in one IMMEDIATE transaction: the removal is logged with the next
    /// generation and its digest, and the insert it undoes is marked removed by it.
    fn remove_one(&self, key: &[u8]) -> Result<Option<Removal>, SqliteStoreError> {
        let mut conn = self.writer();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let inserted_at: Option<i64> = tx
            .prepare_cached(LIVE_INSERT)?
            .query_row(params![key], |row| row.get(0))
            .optional()?;
        let Some(inserted_at) = inserted_at else {
            return Ok(None);
        };
        let head = chain::head_in(&tx, self.identity)?;
        let generation = next_generation(head)?;
        let digest = history::after_remove(head.digest, generation, key);
        let seq = to_seq(generation);
        tx.prepare_cached(
            "INSERT INTO main.bloom_changes (seq, kind, key, history, undoes) VALUES (?1, 2, ?2, ?3, ?4)",
        )?
        .execute(params![
            seq,
            key,
            chain::is_checkpoint(generation).then(|| digest.to_bytes().to_vec()),
            inserted_at
        ])?;
        tx.prepare_cached("UPDATE main.bloom_changes SET removed_at = ?1 WHERE seq = ?2")?
            .execute(params![seq, inserted_at])?;
        tx.commit()?;
        Ok(Some(Removal {
            generation,
            inserted_at: from_seq(inserted_at),
        }))
    }
}

fn next_generation(head: HistoryPoint) -> Result<DatasetGeneration, SqliteStoreError> {
    head.generation.next().ok_or(SqliteStoreError::Damaged {
        what: "generation",
        detail: "at its maximum".into(),
    })
}

/// The error for a generation missing from a scan: the log has a gap, which only an append
/// by hand can make.
fn gap(missing: DatasetGeneration) -> SqliteStoreError {
    SqliteStoreError::Damaged {
        what: "change log",
        detail: format!(
            "generation {missing} is missing (a change was appended by hand, skipping generations)"
        ),
    }
}

/// A failure to take the write lock: on a read-only database, say that plainly.
fn read_only_or(error: rusqlite::Error) -> SqliteStoreError {
    read_only(SqliteStoreError::Sqlite(error))
}

/// A write refused because the database (or the connection) is read-only, said plainly.
fn read_only(error: SqliteStoreError) -> SqliteStoreError {
    match error {
        SqliteStoreError::Sqlite(e)
            if e.sqlite_error_code() == Some(rusqlite::ErrorCode::ReadOnly) =>
        {
            SqliteStoreError::ReadOnly(e.to_string())
        }
        other => other,
    }
}

fn to_seq(generation: DatasetGeneration) -> i64 {
    i64::try_from(generation.get()).unwrap_or(i64::MAX)
}

fn from_seq(seq: i64) -> DatasetGeneration {
    DatasetGeneration::new(u64::try_from(seq).unwrap_or(0))
}

impl PrimaryStore for SqliteStore {
    type Error = SqliteStoreError;

    fn identity(&self) -> Result<StoreIdentity, SqliteStoreError> {
        Ok(self.identity)
    }

    fn contains(&self, key: &[u8]) -> Result<bool, SqliteStoreError> {
        self.read(|conn| Ok(conn.prepare_cached(LIVE_INSERT)?.exists(params![key])?))
    }

    fn head(&self) -> Result<HistoryPoint, SqliteStoreError> {
        self.read(|conn| chain::head_in(conn, self.identity))
    }

    fn history_at(
        &self,
        generation: DatasetGeneration,
    ) -> Result<Option<HistoryDigest>, SqliteStoreError> {
        self.read(|conn| chain::digest_at(conn, self.identity, generation))
    }

    fn keys_since(
        &self,
        after: DatasetGeneration,
        visit: &mut dyn FnMut(&[u8]),
    ) -> Result<DatasetGeneration, SqliteStoreError> {
        self.read(|conn| {
            // Every change since `after`, in order (so that a gap is seen); the inserts of
            // keys still in the store are visited.
            let mut stmt = conn.prepare_cached(
                "SELECT seq, kind = 1 AND removed_at IS NULL, CAST(key AS BLOB)
                 FROM main.bloom_changes WHERE seq > ?1 ORDER BY seq",
            )?;
            let mut rows = stmt.query(params![to_seq(after)])?;
            let mut reached = after;
            while let Some(row) = rows.next()? {
                let generation = from_seq(row.get(0)?);
                let expected = reached.next().unwrap_or(reached);
                if generation != expected {
                    return Err(gap(expected));
                }
                if row.get::<_, bool>(1)? {
                    let key = row.get_ref(2)?.as_blob().map_err(rusqlite::Error::from)?;
                    visit(key);
                }
                reached = generation;
            }
            Ok(reached)
        })
    }

    fn changes_since(
        &self,
        after: DatasetGeneration,
        visit: &mut dyn FnMut(Change<'_>),
    ) -> Result<DatasetGeneration, SqliteStoreError> {
        self.read(|conn| {
            // Each row's digest is checked against the chain as it is read, and the
            // generations must follow one another: a row appended by hand with a wrong
            // digest, or past a gap, fails the replay instead of being applied.
            let head = chain::head_in(conn, self.identity)?;
            if after >= head.generation {
                return Ok(after);
            }
            let mut digest = chain::digest_at(conn, self.identity, after)?.ok_or(gap(after))?;
            // A removal is replayed when it undid an insert (it names the insert, whose
            // `removed_at` names it); one appended by hand that undid nothing is part of the
            // history, not a change of the store's keys.
            let mut stmt = conn.prepare_cached(
                "SELECT c.seq, c.kind, CAST(c.key AS BLOB), c.history,
                     c.kind = 1 OR EXISTS (
                         SELECT 1 FROM main.bloom_changes i
                         WHERE i.seq = c.undoes AND i.removed_at = c.seq AND i.key = c.key)
                 FROM main.bloom_changes c WHERE c.seq > ?1 ORDER BY c.seq",
            )?;
            let mut rows = stmt.query(params![to_seq(after)])?;
            let mut reached = after;
            while let Some(row) = rows.next()? {
                let seq: i64 = row.get(0)?;
                let generation = from_seq(seq);
                let expected = reached.next().unwrap_or(reached);
                if generation != expected {
                    return Err(gap(expected));
                }
                let kind = chain::kind_of(row.get(1)?, seq)?;
                let key = row.get_ref(2)?.as_blob().map_err(rusqlite::Error::from)?;
                let kept = row
                    .get_ref(3)?
                    .as_blob_or_null()
                    .map_err(rusqlite::Error::from)?;
                digest = history::after_change(digest, generation, kind, key);
                chain::check_row(digest, generation, kept)?;
                if row.get::<_, bool>(4)? {
                    visit(Change {
                        generation,
                        kind,
                        key,
                    });
                }
                reached = generation;
            }
            Ok(reached)
        })
    }

    fn insert(&self, key: &[u8]) -> Result<Option<DatasetGeneration>, SqliteStoreError> {
        Ok(self.insert_batch(&[key])?.pop().flatten())
    }

    fn generation_of(&self, key: &[u8]) -> Result<KeyGeneration, SqliteStoreError> {
        self.read(|conn| {
            Ok(conn
                .prepare_cached(LIVE_INSERT)?
                .query_row(params![key], |row| row.get::<_, i64>(0))
                .optional()?
                .map_or(KeyGeneration::Absent, |seq| {
                    KeyGeneration::Since(from_seq(seq))
                }))
        })
    }

    /// One transaction for the batch: all of it is committed, or (on an error) none of it.
    fn insert_all(
        &self,
        keys: &[&[u8]],
    ) -> Result<Vec<Option<DatasetGeneration>>, SqliteStoreError> {
        self.insert_batch(keys)
    }

    /// One read transaction on one connection: the answers are of one state of the store.
    fn contains_each(&self, keys: &[&[u8]]) -> Result<Vec<bool>, SqliteStoreError> {
        self.read(|conn| {
            let tx = conn.unchecked_transaction()?;
            let answers = {
                let mut find = tx.prepare_cached(LIVE_INSERT)?;
                keys.iter()
                    .map(|key| find.exists(params![key]))
                    .collect::<Result<Vec<bool>, _>>()?
            };
            tx.finish()?;
            Ok(answers)
        })
    }

    fn remove(&self, key: &[u8]) -> Result<Option<Removal>, SqliteStoreError> {
        self.remove_one(key)
    }

    /// A file database is claimed by an exclusive lock on `PATH-bloom.lock` beside it (the
    /// path with links resolved, so two paths to one file share it), released when the
    /// claim is dropped or the process ends; an in-memory one by a flag.
    fn claim_wrapper(&self) -> Result<Option<crate::StoreClaim>, SqliteStoreError> {
        // The file SQLite opened (a `file:` URI or a relative path resolved), links resolved.
        let (file, read_only) = {
            let conn = self.writer();
            let file = conn.path().filter(|p| !p.is_empty()).map(PathBuf::from);
            (file, conn.is_readonly(rusqlite::MAIN_DB)?)
        };
        let Some(file) = file.filter(|_| self.path.is_some()) else {
            return Ok(self.claimed.claim());
        };
        let resolved = std::fs::canonicalize(&file).unwrap_or(file);
        let mut name = resolved.into_os_string();
        name.push("-bloom.lock");
        let lock = PathBuf::from(name);
        let failed = |source| SqliteStoreError::Lock {
            path: lock.clone(),
            source,
        };
        // Only a regular file (or none yet) is a lock: a symbolic link there could make the
        // claim create a file elsewhere or share one lock with every store linked the same
        // way, and a pipe or a device locks nothing.
        let not_a_file = || {
            failed(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "not a regular file (a link, a pipe, a directory or a device); remove it",
            ))
        };
        if std::fs::symlink_metadata(&lock).is_ok_and(|m| !m.file_type().is_file()) {
            return Err(not_a_file());
        }
        let opened = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&lock)
            .or_else(|e| {
                // A read-only database in a directory this process cannot write: the lock a
                // writer made is locked through a read-only handle.
                if read_only {
                    std::fs::File::open(&lock).map_err(|_| e)
                } else {
                    Err(e)
                }
            });
        let file = match opened {
            Ok(file) => file,
            // No writer has made a lock there either (it could not have written beside the
            // database without making one): nothing to share the database with.
            Err(e) if read_only && e.kind() == std::io::ErrorKind::PermissionDenied => {
                return Ok(Some(crate::StoreClaim::unenforced()));
            }
            Err(e) => return Err(failed(e)),
        };
        if !file.metadata().is_ok_and(|m| m.is_file()) {
            return Err(not_a_file());
        }
        match file.try_lock() {
            Ok(()) => Ok(Some(crate::StoreClaim::holding(file))),
            Err(std::fs::TryLockError::WouldBlock) => Ok(None),
            Err(std::fs::TryLockError::Error(e)) => Err(failed(e)),
        }
    }

    fn claim_key_encoding(&self, proposed: &str) -> Result<String, SqliteStoreError> {
        let mut conn = self.writer();
        let recorded: Option<String> = conn
            .query_row(
                "SELECT CAST(value AS TEXT) FROM main.bloom_store_meta WHERE name = 'key_encoding'",
                [],
                |r| r.get(0),
            )
            .optional()?;
        if let Some(recorded) = recorded {
            return Ok(recorded);
        }
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(read_only_or)?;
        tx.execute(
            "INSERT OR IGNORE INTO main.bloom_store_meta (name, value) VALUES ('key_encoding', CAST(?1 AS BLOB))",
            params![proposed],
        )
        .map_err(read_only_or)?;
        let recorded: String = tx.query_row(
            "SELECT CAST(value AS TEXT) FROM main.bloom_store_meta WHERE name = 'key_encoding'",
            [],
            |r| r.get(0),
        )?;
        tx.commit()?;
        Ok(recorded)
    }
}
