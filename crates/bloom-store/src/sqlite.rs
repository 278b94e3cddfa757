//! A primary store on SQLite: a keys table whose `seq` is the generation and which carries the
//! history digest of every generation, and a metadata table with the store's identity.

use std::path::Path;
use std::sync::{Mutex, MutexGuard, PoisonError};

use bloom_format::{DatasetGeneration, HistoryDigest, StoreIdentity};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use crate::history::{self, HistoryPoint};
use crate::primary::PrimaryStore;

/// The schema version this build writes into the metadata table.
const SCHEMA_VERSION: i64 = 1;

/// The columns of the keys table.
const KEYS_COLUMNS: &str =
    "(seq INTEGER PRIMARY KEY, key BLOB NOT NULL UNIQUE, history BLOB NOT NULL)";

/// A primary store in one SQLite database file (bundled SQLite; nothing to install).
///
/// - Table `bloom_store_meta(name, value)` holds the store's random identity (`identity`,
///   16 bytes) and the schema version (`schema`). Both are written in the transaction that
///   creates the schema, so every database has exactly one identity from its first moment.
/// - Table `keys(seq INTEGER PRIMARY KEY, key BLOB UNIQUE, history BLOB)`: `seq` is the
///   generation, assigned as the previous largest plus one inside the inserting transaction,
///   so a duplicate key consumes no generation; `history` is the history digest at `seq`.
/// - `keys_since` is a range scan of the primary key.
/// - WAL journal mode with `synchronous = NORMAL`: a commit survives a process crash; a power
///   loss may roll back the newest commits. The history digests make that safe: a snapshot
///   taken before the rollback no longer matches the store's history and is not trusted.
/// - A database created by bloom-store 0.1 (no identity, no digests) is upgraded in place
///   the first time it is opened: it gets an identity and the digests of its history, in one
///   transaction.
#[derive(Debug)]
pub struct SqliteStore {
    conn: Mutex<Connection>,
    identity: StoreIdentity,
}

/// A digest column that is not 16 bytes: the database was changed by something else.
#[derive(Debug, thiserror::Error)]
#[error(
    "{what} in the database is {len} bytes long, expected 16; the database was changed outside bloom-store"
)]
struct BadBlob {
    what: &'static str,
    len: usize,
}

fn blob16(what: &'static str, bytes: &[u8]) -> rusqlite::Result<[u8; 16]> {
    <[u8; 16]>::try_from(bytes).map_err(|_| {
        rusqlite::Error::FromSqlConversionFailure(
            0,
            rusqlite::types::Type::Blob,
            Box::new(BadBlob {
                what,
                len: bytes.len(),
            }),
        )
    })
}

impl SqliteStore {
    /// Opens (or creates) the database at `path`.
    ///
    /// # Errors
    /// The SQLite error.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, rusqlite::Error> {
        Self::init(Connection::open(path)?)
    }

    /// An in-memory database.
    ///
    /// # Errors
    /// The SQLite error.
    pub fn open_in_memory() -> Result<Self, rusqlite::Error> {
        Self::init(Connection::open_in_memory()?)
    }

    fn init(mut conn: Connection) -> Result<Self, rusqlite::Error> {
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        // journal_mode returns the resulting mode as a row.
        let _mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
        conn.execute_batch("PRAGMA synchronous = NORMAL;")?;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        tx.execute_batch(
            "CREATE TABLE IF NOT EXISTS bloom_store_meta (
                 name TEXT PRIMARY KEY NOT NULL,
                 value BLOB NOT NULL
             ) WITHOUT ROWID;",
        )?;
        let existing: Option<Vec<u8>> = tx
            .query_row(
                "SELECT value FROM bloom_store_meta WHERE name = 'identity'",
                [],
                |r| r.get(0),
            )
            .optional()?;
        let identity = match existing {
            Some(bytes) => StoreIdentity::from_bytes(blob16("store identity", &bytes)?),
            None => {
                let identity = history::new_identity()
                    .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?;
                tx.execute(
                    "INSERT INTO bloom_store_meta (name, value) VALUES ('identity', ?1)",
                    params![identity.to_bytes().as_slice()],
                )?;
                identity
            }
        };
        let has_keys: bool = tx
            .query_row(
                "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'keys'",
                [],
                |r| r.get::<_, i64>(0),
            )
            .map(|n| n > 0)?;
        let has_history: bool = tx
            .query_row(
                "SELECT COUNT(*) FROM pragma_table_info('keys') WHERE name = 'history'",
                [],
                |r| r.get::<_, i64>(0),
            )
            .map(|n| n > 0)?;
        if !has_keys {
            tx.execute_batch(&format!("CREATE TABLE keys {KEYS_COLUMNS};"))?;
        } else if !has_history {
            upgrade_from_unversioned(&tx, identity)?;
        }
        tx.execute(
            "INSERT OR REPLACE INTO bloom_store_meta (name, value) VALUES ('schema', ?1)",
            params![SCHEMA_VERSION],
        )?;
        tx.commit()?;
        Ok(Self {
            conn: Mutex::new(conn),
            identity,
        })
    }

    /// The number of committed keys.
    ///
    /// # Errors
    /// The SQLite error.
    pub fn key_count(&self) -> Result<u64, rusqlite::Error> {
        self.lock()
            .query_row("SELECT COUNT(*) FROM keys", [], |r| r.get::<_, i64>(0))
            .map(|n| u64::try_from(n).unwrap_or(0))
    }

    fn lock(&self) -> MutexGuard<'_, Connection> {
        // The connection holds no Rust-side state that a panic could leave half-updated.
        self.conn.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Rebuilds a bloom-store 0.1 `keys` table (no history column) into `keys_v1` with the
/// digests of its history, keeping every key's generation, then puts it in its place.
fn upgrade_from_unversioned(
    tx: &rusqlite::Transaction<'_>,
    identity: StoreIdentity,
) -> Result<(), rusqlite::Error> {
    tx.execute_batch(&format!("CREATE TABLE keys_v1 {KEYS_COLUMNS};"))?;
    let mut digest = history::genesis(identity);
    {
        let mut read = tx.prepare("SELECT seq, key FROM keys ORDER BY seq")?;
        let mut write =
            tx.prepare("INSERT INTO keys_v1 (seq, key, history) VALUES (?1, ?2, ?3)")?;
        let mut rows = read.query([])?;
        while let Some(row) = rows.next()? {
            let seq: i64 = row.get(0)?;
            let key = row.get_ref(1)?.as_blob()?;
            digest = history::after_insert(digest, from_seq(seq), key);
            write.execute(params![seq, key, digest.to_bytes().as_slice()])?;
        }
    }
    tx.execute_batch("DROP TABLE keys; ALTER TABLE keys_v1 RENAME TO keys;")
}

fn to_seq(generation: DatasetGeneration) -> i64 {
    i64::try_from(generation.get()).unwrap_or(i64::MAX)
}

fn from_seq(seq: i64) -> DatasetGeneration {
    DatasetGeneration::new(u64::try_from(seq).unwrap_or(0))
}

/// The newest point of the history, in a connection or transaction.
fn head_in(conn: &Connection, identity: StoreIdentity) -> Result<HistoryPoint, rusqlite::Error> {
    let newest = conn
        .prepare_cached("SELECT seq, history FROM keys ORDER BY seq DESC LIMIT 1")?
        .query_row([], |row| {
            let seq: i64 = row.get(0)?;
            let digest = blob16("history digest", row.get_ref(1)?.as_blob()?)?;
            Ok(HistoryPoint {
                generation: from_seq(seq),
                digest: HistoryDigest::from_bytes(digest),
            })
        })
        .optional()?;
    Ok(newest.unwrap_or_else(|| HistoryPoint::genesis(identity)))
}

impl PrimaryStore for SqliteStore {
    type Error = rusqlite::Error;

    fn identity(&self) -> Result<StoreIdentity, rusqlite::Error> {
        Ok(self.identity)
    }

    fn contains(&self, key: &[u8]) -> Result<bool, rusqlite::Error> {
        self.lock()
            .prepare_cached("SELECT 1 FROM keys WHERE key = ?1")?
            .query_row(params![key], |_| Ok(()))
            .optional()
            .map(|row| row.is_some())
    }

    fn head(&self) -> Result<HistoryPoint, rusqlite::Error> {
        head_in(&self.lock(), self.identity)
    }

    fn history_at(
        &self,
        generation: DatasetGeneration,
    ) -> Result<Option<HistoryDigest>, rusqlite::Error> {
        if generation == DatasetGeneration::ZERO {
            return Ok(Some(history::genesis(self.identity)));
        }
        let conn = self.lock();
        let mut stmt = conn.prepare_cached("SELECT history FROM keys WHERE seq = ?1")?;
        stmt.query_row(params![to_seq(generation)], |row| {
            blob16("history digest", row.get_ref(0)?.as_blob()?).map(HistoryDigest::from_bytes)
        })
        .optional()
    }

    fn keys_since(
        &self,
        after: DatasetGeneration,
        visit: &mut dyn FnMut(&[u8]),
    ) -> Result<DatasetGeneration, rusqlite::Error> {
        let conn = self.lock();
        let mut stmt =
            conn.prepare_cached("SELECT seq, key FROM keys WHERE seq > ?1 ORDER BY seq")?;
        let mut rows = stmt.query(params![to_seq(after)])?;
        let mut reached = after;
        while let Some(row) = rows.next()? {
            let seq: i64 = row.get(0)?;
            let key = row.get_ref(1)?.as_blob()?;
            visit(key);
            reached = reached.max(from_seq(seq));
        }
        Ok(reached)
    }

    fn insert(&self, key: &[u8]) -> Result<bool, rusqlite::Error> {
        let mut conn = self.lock();
        // IMMEDIATE takes the write lock first, so the head read below is the head this
        // insert extends, even with other connections writing.
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let exists = tx
            .prepare_cached("SELECT 1 FROM keys WHERE key = ?1")?
            .query_row(params![key], |_| Ok(()))
            .optional()?
            .is_some();
        if exists {
            return Ok(false);
        }
        let head = head_in(&tx, self.identity)?;
        let generation = head
            .generation
            .next()
            .ok_or_else(|| rusqlite::Error::IntegralValueOutOfRange(0, i64::MAX))?;
        let digest = history::after_insert(head.digest, generation, key);
        tx.prepare_cached("INSERT INTO keys (seq, key, history) VALUES (?1, ?2, ?3)")?
            .execute(params![
                to_seq(generation),
                key,
                digest.to_bytes().as_slice()
            ])?;
        tx.commit()?;
        Ok(true)
    }
}
