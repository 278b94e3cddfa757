//! A primary store on SQLite: a keys table whose `AUTOINCREMENT` rowid is the generation.

use std::path::Path;
use std::sync::{Mutex, MutexGuard, PoisonError};

use rusqlite::{Connection, OptionalExtension, params};

use crate::primary::PrimaryStore;

/// A primary store in one SQLite database file (bundled SQLite; nothing to install).
///
/// - Table `keys(seq INTEGER PRIMARY KEY AUTOINCREMENT, key BLOB NOT NULL UNIQUE)`.
/// - The generation is the largest `seq`: `AUTOINCREMENT` never reuses or lowers it, and
///   SQLite serializes writers, so a key with a smaller `seq` is always committed first.
/// - `keys_since` is a range scan of the rowid (the primary key index).
/// - WAL journal mode with `synchronous = NORMAL`: a commit survives a process crash. After a
///   power loss the last commits may roll back; the store's generation then falls behind a
///   snapshot, which `FilteredStore` detects and answers with a rebuild.
#[derive(Debug)]
pub struct SqliteStore {
    conn: Mutex<Connection>,
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

    fn init(conn: Connection) -> Result<Self, rusqlite::Error> {
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        // journal_mode returns the resulting mode as a row.
        let _mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
        conn.execute_batch(
            "PRAGMA synchronous = NORMAL;
             CREATE TABLE IF NOT EXISTS keys (
                 seq INTEGER PRIMARY KEY AUTOINCREMENT,
                 key BLOB NOT NULL UNIQUE
             );",
        )?;
        Ok(Self {
            conn: Mutex::new(conn),
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

fn to_seq(generation: u64) -> i64 {
    i64::try_from(generation).unwrap_or(i64::MAX)
}

fn from_seq(seq: i64) -> u64 {
    u64::try_from(seq).unwrap_or(0)
}

impl PrimaryStore for SqliteStore {
    type Error = rusqlite::Error;

    fn contains(&self, key: &[u8]) -> Result<bool, rusqlite::Error> {
        self.lock()
            .prepare_cached("SELECT 1 FROM keys WHERE key = ?1")?
            .query_row(params![key], |_| Ok(()))
            .optional()
            .map(|row| row.is_some())
    }

    fn generation(&self) -> Result<u64, rusqlite::Error> {
        self.lock()
            .query_row("SELECT COALESCE(MAX(seq), 0) FROM keys", [], |r| r.get(0))
            .map(from_seq)
    }

    fn keys_since(&self, after: u64, visit: &mut dyn FnMut(&[u8])) -> Result<u64, rusqlite::Error> {
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
        let changed = self
            .lock()
            .prepare_cached("INSERT OR IGNORE INTO keys (key) VALUES (?1)")?
            .execute(params![key])?;
        Ok(changed == 1)
    }
}
