//! [`SqliteStoreError`]: what can go wrong with the SQLite store.

use std::path::PathBuf;

use crate::history::IdentityError;

/// Errors of [`SqliteStore`](super::SqliteStore).
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
    /// The database has a table `keys` exactly like schema 0's, and no bloom-store
    /// metadata: it may be a schema-0 store, or the application's own table of the
    /// same shape. Nothing was changed.
    #[error(
        "the database has a table `keys` exactly like schema 0's and no bloom-store metadata; open it with LegacyKeys::Adopt if the first builds of bloom-store made it (its keys become the store's), or LegacyKeys::Ignore if it is the application's own"
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
    #[error("cannot lock {path} (the claim of one FilteredStore on the database): {cause}")]
    Lock {
        /// The lock file.
        path: PathBuf,
        /// Why (shown in the message, not returned by `source()`).
        cause: std::io::Error,
    },
    /// The database file is no longer the one the store opened: another file was moved or
    /// copied to its path, it was deleted (and perhaps made again), it holds another store,
    /// or its history went back (a backup put back while the store was open). Every call
    /// fails from then on, and a wrapper's claim is lost for good: open the store again.
    #[error(
        "the database {path} was replaced while the store was open ({why}); nothing is read from or written to it through this handle: open it again"
    )]
    Replaced {
        /// The database file.
        path: PathBuf,
        /// What was found.
        why: String,
    },
    /// The database file is being changed by another program (a copy written over it, say),
    /// or a change to it could not be checked, for longer than a call waits (5 s): nothing
    /// was read or written. Try again; if the file was replaced, the call then fails with
    /// [`SqliteStoreError::Replaced`].
    #[error(
        "the database {path} is being changed by another program and could not be checked in time; nothing was read or written: try again"
    )]
    Unsettled {
        /// The database file.
        path: PathBuf,
    },
    /// The database is read-only and needs an upgrade that writes.
    #[error("the database is read-only and must first be opened once with write access ({0})")]
    ReadOnly(String),
}
