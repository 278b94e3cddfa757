//! A primary store on SQLite: an append-only change log whose `seq` is the generation and
//! which carries the history digest of every generation, a keys table of the keys in the
//! store, and a metadata table with the store's identity.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

use bloom_format::{DatasetGeneration, HistoryDigest, StoreIdentity};
use rusqlite::{Connection, OpenFlags, OptionalExtension, TransactionBehavior, params};

use crate::history::{self, Change, ChangeKind, HistoryPoint, IdentityError, Removal};
use crate::primary::PrimaryStore;

/// The schema version this build writes into the metadata table, and the newest it reads.
/// Version 1 had the keys table only (append-only, no removals); version 2 adds the change
/// log, and opening a version 1 database upgrades it in place.
const SCHEMA_VERSION: i64 = 2;

/// The tables and their guards. The change log is append-only: a row is never updated or
/// deleted (the history digests of every later row depend on it). The keys table holds the
/// keys in the store; a key gets in or out only with its change logged first, so an edit by
/// hand (or by an older bloom-store) fails loudly instead of quietly desynchronising the
/// history. (bloom-store 0.1 inserted without a digest, which the insert trigger refuses.)
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS bloom_store_meta (
    name TEXT PRIMARY KEY NOT NULL,
    value BLOB NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS keys (
    seq INTEGER PRIMARY KEY CHECK (seq > 0),
    key BLOB NOT NULL UNIQUE,
    history BLOB NOT NULL CHECK (length(history) = 16)
);
CREATE TABLE IF NOT EXISTS bloom_changes (
    seq INTEGER PRIMARY KEY CHECK (seq > 0),
    kind INTEGER NOT NULL CHECK (kind IN (1, 2)),
    key BLOB NOT NULL,
    history BLOB NOT NULL CHECK (length(history) = 16)
);
CREATE TRIGGER IF NOT EXISTS keys_need_a_history BEFORE INSERT ON keys
    WHEN NEW.history IS NULL
    BEGIN SELECT RAISE(ABORT, 'this database belongs to bloom-store 0.2 or later: insert keys through it'); END;
CREATE TRIGGER IF NOT EXISTS keys_are_never_updated BEFORE UPDATE ON keys
    BEGIN SELECT RAISE(ABORT, 'bloom-store keys are never edited: an edited key breaks the history every snapshot is checked against'); END;
DROP TRIGGER IF EXISTS keys_are_never_deleted;
CREATE TRIGGER IF NOT EXISTS keys_inserts_are_logged BEFORE INSERT ON keys
    WHEN NEW.history IS NOT NULL
        AND NOT EXISTS (SELECT 1 FROM bloom_changes WHERE seq = NEW.seq AND kind = 1 AND key = NEW.key)
    BEGIN SELECT RAISE(ABORT, 'bloom-store keys are inserted through bloom-store only: an unlogged key breaks the history every snapshot is checked against'); END;
CREATE TRIGGER IF NOT EXISTS keys_removals_are_logged BEFORE DELETE ON keys
    WHEN NOT EXISTS (SELECT 1 FROM bloom_changes WHERE seq = (SELECT MAX(seq) FROM bloom_changes) AND kind = 2 AND key = OLD.key)
    BEGIN SELECT RAISE(ABORT, 'bloom-store keys are removed through bloom-store only: an unlogged removal breaks the history every snapshot is checked against'); END;
CREATE TRIGGER IF NOT EXISTS changes_are_never_updated BEFORE UPDATE ON bloom_changes
    BEGIN SELECT RAISE(ABORT, 'the bloom-store change log is append-only'); END;
CREATE TRIGGER IF NOT EXISTS changes_are_never_deleted BEFORE DELETE ON bloom_changes
    BEGIN SELECT RAISE(ABORT, 'the bloom-store change log is append-only'); END;
";

/// Guards the change log's appends, created after any migration has copied old keys in: a
/// change is appended after the newest one, and is an insert of a key not in the store or a
/// removal of one in it.
const APPEND_GUARD: &str = "
CREATE TRIGGER IF NOT EXISTS changes_follow_the_store BEFORE INSERT ON bloom_changes
    WHEN NEW.seq <= (SELECT COALESCE(MAX(seq), 0) FROM bloom_changes)
        OR (NEW.kind = 1) = EXISTS (SELECT 1 FROM keys WHERE key = NEW.key)
    BEGIN SELECT RAISE(ABORT, 'bloom-store changes are appended through bloom-store only: this one does not follow the history'); END;
";

/// The columns of the keys table (schema versions 1 and 2).
const KEYS_COLUMNS: &str = "seq,key,history";
/// The columns of the change log (schema version 2).
const CHANGES_COLUMNS: &str = "seq,kind,key,history";

/// The columns of the keys table of bloom-store 0.1, the only foreign `keys` table this
/// build upgrades.
const UNVERSIONED_COLUMNS: &str = "seq,key";

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
    /// The database is read-only and needs an upgrade that writes.
    #[error("the database is read-only and must first be opened once with write access ({0})")]
    ReadOnly(String),
}

/// A primary store in one SQLite database file (bundled SQLite; nothing to install).
///
/// - Table `bloom_store_meta(name, value)` holds the store's random identity (`identity`,
///   16 bytes), the schema version (`schema`) and the key encoding the keys are in
///   (`key_encoding`). The identity is written in the transaction that creates the schema,
///   so every database has exactly one identity from its first moment.
/// - Table `bloom_changes(seq, kind, key, history)`: the change log. `seq` is the
///   generation, assigned as the previous largest plus one inside the changing transaction
///   (so a duplicate insert, or the removal of a missing key, consumes no generation);
///   `kind` is 1 for an insert and 2 for a removal; `history` is the history digest at
///   `seq`. Append-only, guarded by triggers.
/// - Table `keys(seq, key, history)`: the keys in the store, with the generation and digest
///   of their insert. A row gets in or out only with its change logged first (triggers).
/// - Scans (`keys_since`, used by rebuilds and catch-up) run on their own read-only
///   connections, so a long rebuild does not hold up inserts or lookups.
/// - WAL journal mode with `synchronous = NORMAL`: a commit survives a process crash; a power
///   loss may roll back the newest commits. The history digests make that safe: a snapshot
///   taken before the rollback no longer matches the store's history and is not trusted.
/// - A database created by bloom-store 0.1 (no identity, no digests), or with schema 1 (no
///   change log), is upgraded in place the first time it is opened with write access, in
///   one transaction. A database of a
///   newer schema, or with a `keys` table bloom-store did not make, is refused untouched.
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
}

fn blob16(what: &'static str, bytes: &[u8]) -> Result<[u8; 16], SqliteStoreError> {
    <[u8; 16]>::try_from(bytes).map_err(|_| SqliteStoreError::Damaged {
        what,
        detail: format!("{} bytes, expected 16", bytes.len()),
    })
}

/// The state of the schema, read without writing.
struct SchemaState {
    version: Option<i64>,
    identity: Option<Vec<u8>>,
    /// The columns of the `keys` table, if there is one.
    keys_columns: Option<String>,
    /// The columns of the `bloom_changes` table, if there is one.
    changes_columns: Option<String>,
}

fn columns(conn: &Connection, table: &str) -> Result<Option<String>, rusqlite::Error> {
    let names: Vec<String> = conn
        .prepare("SELECT name FROM pragma_table_info(?1) ORDER BY cid")?
        .query_map([table], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    Ok((!names.is_empty()).then(|| names.join(",")))
}

fn read_schema_state(conn: &Connection) -> Result<SchemaState, rusqlite::Error> {
    let has_meta: bool = conn.query_row(
        "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'bloom_store_meta'",
        [],
        |r| r.get::<_, i64>(0).map(|n| n > 0),
    )?;
    let (version, identity) = if has_meta {
        let get = |name: &str| -> Result<Option<rusqlite::types::Value>, rusqlite::Error> {
            conn.query_row(
                "SELECT value FROM bloom_store_meta WHERE name = ?1",
                [name],
                |r| r.get(0),
            )
            .optional()
        };
        let version = match get("schema")? {
            Some(rusqlite::types::Value::Integer(v)) => Some(v),
            _ => None,
        };
        let identity = match get("identity")? {
            Some(rusqlite::types::Value::Blob(b)) => Some(b),
            _ => None,
        };
        (version, identity)
    } else {
        (None, None)
    };
    Ok(SchemaState {
        version,
        identity,
        keys_columns: columns(conn, "keys")?,
        changes_columns: columns(conn, "bloom_changes")?,
    })
}

impl SqliteStore {
    /// Opens (or creates) the database at `path`.
    ///
    /// # Errors
    /// [`SqliteStoreError`]; a database of a newer schema or with a foreign `keys` table is
    /// refused and left untouched.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, SqliteStoreError> {
        let path = path.as_ref();
        Self::init(Connection::open(path)?, Some(path.to_path_buf()))
    }

    /// An in-memory database (one connection: scans and writes take turns).
    ///
    /// # Errors
    /// As [`SqliteStore::open`].
    pub fn open_in_memory() -> Result<Self, SqliteStoreError> {
        Self::init(Connection::open_in_memory()?, None)
    }

    fn init(mut conn: Connection, path: Option<PathBuf>) -> Result<Self, SqliteStoreError> {
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        let mode: String = conn.query_row("PRAGMA journal_mode", [], |r| r.get(0))?;
        if !mode.eq_ignore_ascii_case("wal") && !mode.eq_ignore_ascii_case("memory") {
            // journal_mode returns the resulting mode as a row. A read-only database keeps
            // its mode (it is then not changed by this store either).
            let _ = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0));
        }
        conn.execute_batch("PRAGMA synchronous = NORMAL;")?;

        let state = read_schema_state(&conn)?;
        check_schema(&state)?;
        let current = state.version == Some(SCHEMA_VERSION)
            && state.identity.is_some()
            && state.keys_columns.as_deref() == Some(KEYS_COLUMNS)
            && state.changes_columns.as_deref() == Some(CHANGES_COLUMNS);
        if !current {
            // Something to create or upgrade: take the write lock, and look again under it
            // (another process may have done it meanwhile).
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(read_only_or)?;
            let state = read_schema_state(&tx)?;
            check_schema(&state)?;
            let unversioned = state.keys_columns.as_deref() == Some(UNVERSIONED_COLUMNS)
                && state.version.is_none();
            if unversioned {
                tx.execute_batch("ALTER TABLE keys RENAME TO keys_unversioned;")?;
            }
            // Schema 1 (keys only): its keys become the first changes of the log.
            let keys_without_log = state.keys_columns.as_deref() == Some(KEYS_COLUMNS)
                && state.changes_columns.is_none();
            tx.execute_batch(SCHEMA)?;
            if keys_without_log {
                tx.execute_batch(
                    "INSERT INTO bloom_changes (seq, kind, key, history)
                     SELECT seq, 1, key, history FROM keys ORDER BY seq;",
                )?;
            }
            let identity = match state.identity {
                Some(bytes) => StoreIdentity::from_bytes(blob16("store identity", &bytes)?),
                None => {
                    let identity = history::new_identity()?;
                    tx.execute(
                        "INSERT INTO bloom_store_meta (name, value) VALUES ('identity', ?1)",
                        params![identity.to_bytes().as_slice()],
                    )?;
                    identity
                }
            };
            if unversioned {
                upgrade_from_unversioned(&tx, identity)?;
            }
            tx.execute_batch(APPEND_GUARD)?;
            tx.execute(
                "INSERT OR REPLACE INTO bloom_store_meta (name, value) VALUES ('schema', ?1)",
                params![SCHEMA_VERSION],
            )?;
            tx.commit()?;
        }
        let state = read_schema_state(&conn)?;
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
        })
    }

    /// The number of keys in the store.
    ///
    /// # Errors
    /// The SQLite error.
    pub fn key_count(&self) -> Result<u64, SqliteStoreError> {
        self.read(|conn| {
            Ok(conn
                .query_row("SELECT COUNT(*) FROM keys", [], |r| r.get::<_, i64>(0))
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
                conn.busy_timeout(std::time::Duration::from_secs(5))?;
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
    /// Inserts or removes a key in one IMMEDIATE transaction: the change is logged with the
    /// next generation and its digest, then the keys table follows. `None` when there is
    /// nothing to change.
    /// Returns the change's generation and, for a removal, the generation of the insert it
    /// undoes.
    fn change(
        &self,
        kind: ChangeKind,
        key: &[u8],
    ) -> Result<Option<(DatasetGeneration, DatasetGeneration)>, SqliteStoreError> {
        let mut conn = self.writer();
        // IMMEDIATE takes the write lock first, so the head read below is the head this
        // change extends, even with other connections writing.
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let inserted_at: Option<i64> = tx
            .prepare_cached("SELECT seq FROM keys WHERE key = ?1")?
            .query_row(params![key], |row| row.get(0))
            .optional()?;
        if inserted_at.is_some() == (kind == ChangeKind::Inserted) {
            return Ok(None);
        }
        let head = head_in(&tx, self.identity)?;
        let generation = head.generation.next().ok_or(SqliteStoreError::Damaged {
            what: "generation",
            detail: "at its maximum".into(),
        })?;
        let digest = history::after_change(head.digest, generation, kind, key);
        let seq = to_seq(generation);
        let kind_value: i64 = match kind {
            ChangeKind::Inserted => 1,
            ChangeKind::Removed => 2,
        };
        tx.prepare_cached(
            "INSERT INTO bloom_changes (seq, kind, key, history) VALUES (?1, ?2, ?3, ?4)",
        )?
        .execute(params![seq, kind_value, key, digest.to_bytes().as_slice()])?;
        match kind {
            ChangeKind::Inserted => tx
                .prepare_cached("INSERT INTO keys (seq, key, history) VALUES (?1, ?2, ?3)")?
                .execute(params![seq, key, digest.to_bytes().as_slice()])?,
            ChangeKind::Removed => tx
                .prepare_cached("DELETE FROM keys WHERE key = ?1")?
                .execute(params![key])?,
        };
        tx.commit()?;
        Ok(Some((generation, inserted_at.map_or(generation, from_seq))))
    }
}

/// A failure to take the write lock: on a read-only database, say that plainly.
fn read_only_or(error: rusqlite::Error) -> SqliteStoreError {
    match error.sqlite_error_code() {
        Some(rusqlite::ErrorCode::ReadOnly) => SqliteStoreError::ReadOnly(error.to_string()),
        _ => SqliteStoreError::Sqlite(error),
    }
}

/// Refuses schemas this build must not touch.
fn check_schema(state: &SchemaState) -> Result<(), SqliteStoreError> {
    if let Some(found) = state.version
        && found > SCHEMA_VERSION
    {
        return Err(SqliteStoreError::NewerSchema {
            found,
            supported: SCHEMA_VERSION,
        });
    }
    match state.changes_columns.as_deref() {
        None | Some(CHANGES_COLUMNS) => {}
        Some(columns) => {
            return Err(SqliteStoreError::ForeignTable {
                table: "bloom_changes",
                columns: columns.to_owned(),
            });
        }
    }
    match state.keys_columns.as_deref() {
        None | Some(KEYS_COLUMNS) => Ok(()),
        Some(UNVERSIONED_COLUMNS) if state.version.is_none() => Ok(()),
        Some(columns) => Err(SqliteStoreError::ForeignTable {
            table: "keys",
            columns: columns.to_owned(),
        }),
    }
}

/// Copies a bloom-store 0.1 `keys` table (renamed `keys_unversioned`) into the new one with
/// the digests of its history, keeping every key's generation, then drops it.
fn upgrade_from_unversioned(
    tx: &rusqlite::Transaction<'_>,
    identity: StoreIdentity,
) -> Result<(), SqliteStoreError> {
    let mut digest = history::genesis(identity);
    {
        // CAST: a key stored as text by hand is still its bytes.
        let mut read =
            tx.prepare("SELECT seq, CAST(key AS BLOB) FROM keys_unversioned ORDER BY seq")?;
        let mut log = tx.prepare(
            "INSERT INTO bloom_changes (seq, kind, key, history) VALUES (?1, 1, ?2, ?3)",
        )?;
        let mut write = tx.prepare("INSERT INTO keys (seq, key, history) VALUES (?1, ?2, ?3)")?;
        let mut rows = read.query([])?;
        while let Some(row) = rows.next()? {
            let seq: i64 = row.get(0)?;
            let key = row.get_ref(1)?.as_blob().map_err(rusqlite::Error::from)?;
            digest = history::after_insert(digest, from_seq(seq), key);
            log.execute(params![seq, key, digest.to_bytes().as_slice()])?;
            write.execute(params![seq, key, digest.to_bytes().as_slice()])?;
        }
    }
    tx.execute_batch("DROP TABLE keys_unversioned;")?;
    Ok(())
}

fn to_seq(generation: DatasetGeneration) -> i64 {
    i64::try_from(generation.get()).unwrap_or(i64::MAX)
}

fn from_seq(seq: i64) -> DatasetGeneration {
    DatasetGeneration::new(u64::try_from(seq).unwrap_or(0))
}

/// The newest point of the history, in a connection or transaction.
fn head_in(conn: &Connection, identity: StoreIdentity) -> Result<HistoryPoint, SqliteStoreError> {
    let newest: Option<(i64, Vec<u8>)> = conn
        .prepare_cached("SELECT seq, history FROM bloom_changes ORDER BY seq DESC LIMIT 1")?
        .query_row([], |row| Ok((row.get(0)?, row.get(1)?)))
        .optional()?;
    match newest {
        None => Ok(HistoryPoint::genesis(identity)),
        Some((seq, digest)) => Ok(HistoryPoint {
            generation: from_seq(seq),
            digest: HistoryDigest::from_bytes(blob16("history digest", &digest)?),
        }),
    }
}

impl PrimaryStore for SqliteStore {
    type Error = SqliteStoreError;

    fn identity(&self) -> Result<StoreIdentity, SqliteStoreError> {
        Ok(self.identity)
    }

    fn contains(&self, key: &[u8]) -> Result<bool, SqliteStoreError> {
        self.read(|conn| {
            Ok(conn
                .prepare_cached("SELECT 1 FROM keys WHERE key = ?1")?
                .query_row(params![key], |_| Ok(()))
                .optional()?
                .is_some())
        })
    }

    fn head(&self) -> Result<HistoryPoint, SqliteStoreError> {
        self.read(|conn| head_in(conn, self.identity))
    }

    fn history_at(
        &self,
        generation: DatasetGeneration,
    ) -> Result<Option<HistoryDigest>, SqliteStoreError> {
        if generation == DatasetGeneration::ZERO {
            return Ok(Some(history::genesis(self.identity)));
        }
        self.read(|conn| {
            let digest: Option<Vec<u8>> = conn
                .prepare_cached("SELECT history FROM bloom_changes WHERE seq = ?1")?
                .query_row(params![to_seq(generation)], |row| row.get(0))
                .optional()?;
            digest
                .map(|d| blob16("history digest", &d).map(HistoryDigest::from_bytes))
                .transpose()
        })
    }

    fn keys_since(
        &self,
        after: DatasetGeneration,
        visit: &mut dyn FnMut(&[u8]),
    ) -> Result<DatasetGeneration, SqliteStoreError> {
        self.read(|conn| {
            let mut stmt = conn.prepare_cached(
                "SELECT seq, CAST(key AS BLOB) FROM keys WHERE seq > ?1 ORDER BY seq",
            )?;
            let mut rows = stmt.query(params![to_seq(after)])?;
            let mut reached = after;
            while let Some(row) = rows.next()? {
                let seq: i64 = row.get(0)?;
                let key = row.get_ref(1)?.as_blob().map_err(rusqlite::Error::from)?;
                visit(key);
                reached = reached.max(from_seq(seq));
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
            // Each row's digest is checked against the chain as it is read: a row added,
            // edited or reordered by hand (the triggers refuse that, but a database can be
            // edited without them) fails the replay instead of being applied.
            let start: Option<Vec<u8>> = conn
                .prepare_cached(
                    "SELECT history FROM bloom_changes WHERE seq <= ?1 ORDER BY seq DESC LIMIT 1",
                )?
                .query_row(params![to_seq(after)], |row| row.get(0))
                .optional()?;
            let mut digest = match start {
                Some(bytes) => HistoryDigest::from_bytes(blob16("history digest", &bytes)?),
                None => history::genesis(self.identity),
            };
            let mut stmt = conn.prepare_cached(
                "SELECT seq, kind, CAST(key AS BLOB), history FROM bloom_changes WHERE seq > ?1 ORDER BY seq",
            )?;
            let mut rows = stmt.query(params![to_seq(after)])?;
            let mut reached = after;
            while let Some(row) = rows.next()? {
                let seq: i64 = row.get(0)?;
                let kind = match row.get::<_, i64>(1)? {
                    1 => ChangeKind::Inserted,
                    2 => ChangeKind::Removed,
                    other => {
                        return Err(SqliteStoreError::Damaged {
                            what: "change kind",
                            detail: format!("{other} at generation {seq}"),
                        });
                    }
                };
                let key = row.get_ref(2)?.as_blob().map_err(rusqlite::Error::from)?;
                let stored = row.get_ref(3)?.as_blob().map_err(rusqlite::Error::from)?;
                let generation = from_seq(seq);
                digest = history::after_change(digest, generation, kind, key);
                if digest.to_bytes().as_slice() != stored {
                    return Err(SqliteStoreError::Damaged {
                        what: "change log",
                        detail: format!(
                            "the history digest at generation {seq} does not follow from the changes before it"
                        ),
                    });
                }
                visit(Change {
                    generation,
                    kind,
                    key,
                });
                reached = reached.max(generation);
            }
            Ok(reached)
        })
    }

    fn insert(&self, key: &[u8]) -> Result<Option<DatasetGeneration>, SqliteStoreError> {
        Ok(self.change(ChangeKind::Inserted, key)?.map(|(g, _)| g))
    }

    fn remove(&self, key: &[u8]) -> Result<Option<Removal>, SqliteStoreError> {
        Ok(self
            .change(ChangeKind::Removed, key)?
            .map(|(generation, inserted_at)| Removal {
                generation,
                inserted_at,
            }))
    }

    fn claim_key_encoding(&self, proposed: &str) -> Result<String, SqliteStoreError> {
        let mut conn = self.writer();
        let recorded: Option<String> = conn
            .query_row(
                "SELECT CAST(value AS TEXT) FROM bloom_store_meta WHERE name = 'key_encoding'",
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
            "INSERT OR IGNORE INTO bloom_store_meta (name, value) VALUES ('key_encoding', CAST(?1 AS BLOB))",
            params![proposed],
        )?;
        let recorded: String = tx.query_row(
            "SELECT CAST(value AS TEXT) FROM bloom_store_meta WHERE name = 'key_encoding'",
            [],
            |r| r.get(0),
        )?;
        tx.commit()?;
        Ok(recorded)
    }
}
