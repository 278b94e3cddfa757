//! A `PrimaryStore` over a table the application already has: `users(email PRIMARY KEY,
//! name)`, the truth a filter of "emails seen" accelerates.
//!
//! What the table needs besides its own rows, and how this example supplies it:
//!
//! - **An identity**: 16 random bytes made once, with the store
//!   (`bloom_store::history::new_identity`), kept in a one-row table next to it, so that a
//!   backup or a copy of the database keeps it and a recreated database gets a new one.
//! - **A history**: every change (a new user, a deleted user) gets the next generation and the
//!   digest `bloom_store::history::after_insert` / `after_remove` computes from the digest
//!   before it. Both are written in the transaction that changes `users`, into an append-only
//!   log `users_history(seq, kind, email, digest)`. The log answers `head`, `history_at`,
//!   `keys_since` and `changes_since`; `users` answers `contains`.
//! - **Keys as the table has them**: the filter uses the `utf8` key encoding (the text's
//!   bytes, no normalization), so a key is exactly the `email` the table holds, rows from
//!   before the filter included. An application that normalizes its emails does it before
//!   it calls the store, as it does before its own queries.
//!
//! The application's own inserts (a user with a name) go through
//! `FilteredStore::insert_with`, which sets the key's bits before calling them. Writes of
//! `users` that bypass the wrapper (another program) must append to the log in the same way,
//! and are writes behind the wrapper's back: taken in at its next save or open.
//!
//! `cargo run -p bloom-store --example own_table`; `cargo test -p bloom-store --example
//! own_table` runs its tests.

use std::path::Path;
use std::sync::{Mutex, MutexGuard, PoisonError};

use bloom_core::KeyEncoding;
use bloom_store::history::{self, Change, ChangeKind, HistoryPoint, Removal};
use bloom_store::{
    ClaimKind, DatasetGeneration, FilterOptions, FilteredStore, HistoryDigest, Lookup, OpenOutcome,
    PrimaryStore, StoreClaim, StoreIdentity,
};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

/// The application's schema, as it was before the filter: only `users`.
const APP_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS users (email TEXT PRIMARY KEY NOT NULL, name TEXT NOT NULL);
";

/// What the store adds beside it: the identity and the history of `users`.
const STORE_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS users_identity (
    one INTEGER PRIMARY KEY CHECK (one = 1),
    identity BLOB NOT NULL CHECK (length(identity) = 16),
    key_encoding TEXT
);
CREATE TABLE IF NOT EXISTS users_history (
    seq INTEGER PRIMARY KEY,
    kind INTEGER NOT NULL CHECK (kind IN (1, 2)),
    email TEXT NOT NULL,
    digest BLOB NOT NULL CHECK (length(digest) = 16)
);
CREATE INDEX IF NOT EXISTS users_history_by_email ON users_history (email, seq);
";

/// An error of [`UsersStore`].
#[derive(Debug, thiserror::Error)]
enum UsersError {
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
    #[error(transparent)]
    Identity(#[from] history::IdentityError),
    #[error("the users history is damaged: {0}")]
    Damaged(String),
    #[error("an email must be UTF-8 text")]
    NotText,
    #[error("cannot lock {path}: {error}")]
    Lock {
        path: std::path::PathBuf,
        error: std::io::Error,
    },
}

/// `users` and its history, behind one connection.
struct UsersStore {
    conn: Mutex<Connection>,
    identity: StoreIdentity,
    /// `DATABASE-users.lock`: the wrappers' claims (see `claim_wrapper`).
    lock: std::path::PathBuf,
}

fn digest_from(bytes: &[u8]) -> Result<HistoryDigest, UsersError> {
    <[u8; 16]>::try_from(bytes)
        .map(HistoryDigest::from_bytes)
        .map_err(|_| UsersError::Damaged(format!("a digest of {} bytes", bytes.len())))
}

fn email(key: &[u8]) -> Result<&str, UsersError> {
    std::str::from_utf8(key).map_err(|_| UsersError::NotText)
}

impl UsersStore {
    /// Opens the application's database, adding the identity and history tables (and the
    /// history of the users already there, as the first changes) on first use.
    fn open(path: &Path) -> Result<Self, UsersError> {
        let mut conn = Connection::open(path)?;
        conn.execute_batch(APP_SCHEMA)?;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        tx.execute_batch(STORE_SCHEMA)?;
        let found: Option<Vec<u8>> = tx
            .query_row("SELECT identity FROM users_identity", [], |r| r.get(0))
            .optional()?;
        let identity = match found {
            Some(bytes) => StoreIdentity::from_bytes(
                <[u8; 16]>::try_from(bytes.as_slice())
                    .map_err(|_| UsersError::Damaged("the identity".into()))?,
            ),
            None => {
                // The store is created now: its identity, and the users it starts with.
                let identity = history::new_identity()?;
                tx.execute(
                    "INSERT INTO users_identity (one, identity) VALUES (1, ?1)",
                    [identity.to_bytes().as_slice()],
                )?;
                let mut point = HistoryPoint::genesis(identity);
                let emails: Vec<String> = tx
                    .prepare("SELECT email FROM users ORDER BY rowid")?
                    .query_map([], |r| r.get(0))?
                    .collect::<Result<_, _>>()?;
                for email in emails {
                    point = append(&tx, point, ChangeKind::Inserted, &email)?;
                }
                identity
            }
        };
        tx.commit()?;
        let mut lock = path.as_os_str().to_os_string();
        lock.push("-users.lock");
        Ok(Self {
            conn: Mutex::new(conn),
            identity,
            lock: lock.into(),
        })
    }

    fn conn(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds a user with a name (`email` is the key, encoded): the application's own insert,
    /// with the same history rules as `PrimaryStore::insert`. Called through
    /// `FilteredStore::insert_with`, so that the filter takes the key's bits first.
    fn add_user(&self, email: &[u8], name: &str) -> Result<Option<DatasetGeneration>, UsersError> {
        let email = self::email(email)?;
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let added = tx.execute(
            "INSERT OR IGNORE INTO users (email, name) VALUES (?1, ?2)",
            params![email, name],
        )? == 1;
        let generation = if added {
            let head = head_in(&tx, self.identity)?;
            Some(append(&tx, head, ChangeKind::Inserted, email)?.generation)
        } else {
            None
        };
        tx.commit()?;
        Ok(generation)
    }
}

/// Appends one change after `head`, in the caller's transaction.
fn append(
    conn: &Connection,
    head: HistoryPoint,
    kind: ChangeKind,
    email: &str,
) -> Result<HistoryPoint, UsersError> {
    let generation = head
        .generation
        .next()
        .ok_or_else(|| UsersError::Damaged("the generation is at its maximum".into()))?;
    let digest = history::after_change(head.digest, generation, kind, email.as_bytes());
    let kind_value = match kind {
        ChangeKind::Inserted => 1,
        ChangeKind::Removed => 2,
    };
    conn.execute(
        "INSERT INTO users_history (seq, kind, email, digest) VALUES (?1, ?2, ?3, ?4)",
        params![
            i64::try_from(generation.get()).unwrap_or(i64::MAX),
            kind_value,
            email,
            digest.to_bytes().as_slice()
        ],
    )?;
    Ok(HistoryPoint { generation, digest })
}

fn head_in(conn: &Connection, identity: StoreIdentity) -> Result<HistoryPoint, UsersError> {
    let newest: Option<(i64, Vec<u8>)> = conn
        .query_row(
            "SELECT seq, digest FROM users_history ORDER BY seq DESC LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    Ok(match newest {
        None => HistoryPoint::genesis(identity),
        Some((seq, digest)) => HistoryPoint {
            generation: DatasetGeneration::new(u64::try_from(seq).unwrap_or(0)),
            digest: digest_from(&digest)?,
        },
    })
}

fn to_seq(generation: DatasetGeneration) -> i64 {
    i64::try_from(generation.get()).unwrap_or(i64::MAX)
}

impl PrimaryStore for UsersStore {
    type Error = UsersError;

    fn identity(&self) -> Result<StoreIdentity, UsersError> {
        Ok(self.identity)
    }

    /// One `FilteredStore` per database, or any number of shared-filter wrappers: a lock on
    /// a file beside it (`flock` through the standard library), exclusive or shared, freed
    /// when the wrapper is dropped or its process dies. Without it (the trait's default,
    /// `StoreClaim::unenforced`), two wrappers could open the same database and each
    /// answer "absent" for the other's keys. This claim does not watch the file as
    /// `SqliteStore`'s does: a database replaced under a running wrapper is caught at its
    /// next save or open, not at once.
    fn claim_wrapper(&self, kind: ClaimKind) -> Result<Option<StoreClaim>, UsersError> {
        let locked = |error| UsersError::Lock {
            path: self.lock.clone(),
            error,
        };
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&self.lock)
            .map_err(locked)?;
        let taken = match kind {
            ClaimKind::Exclusive => file.try_lock(),
            _ => file.try_lock_shared(),
        };
        match taken {
            Ok(()) => Ok(Some(StoreClaim::holding(file))),
            Err(std::fs::TryLockError::WouldBlock) => Ok(None),
            Err(std::fs::TryLockError::Error(e)) => Err(locked(e)),
        }
    }

    fn contains(&self, key: &[u8]) -> Result<bool, UsersError> {
        Ok(self
            .conn()
            .prepare_cached("SELECT 1 FROM users WHERE email = ?1")?
            .exists([email(key)?])?)
    }

    fn head(&self) -> Result<HistoryPoint, UsersError> {
        head_in(&self.conn(), self.identity)
    }

    fn history_at(
        &self,
        generation: DatasetGeneration,
    ) -> Result<Option<HistoryDigest>, UsersError> {
        if generation == DatasetGeneration::ZERO {
            return Ok(Some(history::genesis(self.identity)));
        }
        let digest: Option<Vec<u8>> = self
            .conn()
            .query_row(
                "SELECT digest FROM users_history WHERE seq = ?1",
                [to_seq(generation)],
                |r| r.get(0),
            )
            .optional()?;
        digest.map(|d| digest_from(&d)).transpose()
    }

    fn keys_since(
        &self,
        after: DatasetGeneration,
        visit: &mut dyn FnMut(&[u8]),
    ) -> Result<DatasetGeneration, UsersError> {
        // The users inserted after `after` whose insert is still their newest change.
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT h.seq, h.email FROM users_history h
             WHERE h.seq > ?1 AND h.kind = 1
               AND NOT EXISTS (SELECT 1 FROM users_history l WHERE l.email = h.email AND l.seq > h.seq)
             ORDER BY h.seq",
        )?;
        let mut rows = stmt.query([to_seq(after)])?;
        while let Some(row) = rows.next()? {
            let email: String = row.get(1)?;
            visit(email.as_bytes());
        }
        drop(rows);
        drop(stmt);
        Ok(head_in(&conn, self.identity)?.generation.max(after))
    }

    fn changes_since(
        &self,
        after: DatasetGeneration,
        visit: &mut dyn FnMut(Change<'_>),
    ) -> Result<DatasetGeneration, UsersError> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT seq, kind, email FROM users_history WHERE seq > ?1 ORDER BY seq",
        )?;
        let mut rows = stmt.query([to_seq(after)])?;
        let mut reached = after;
        while let Some(row) = rows.next()? {
            let generation =
                DatasetGeneration::new(u64::try_from(row.get::<_, i64>(0)?).unwrap_or(0));
            let kind = match row.get::<_, i64>(1)? {
                1 => ChangeKind::Inserted,
                _ => ChangeKind::Removed,
            };
            let email: String = row.get(2)?;
            visit(Change {
                generation,
                kind,
                key: email.as_bytes(),
            });
            reached = generation;
        }
        Ok(reached)
    }

    fn insert(&self, key: &[u8]) -> Result<Option<DatasetGeneration>, UsersError> {
        // A user known only by email (the wrapper's `insert` has a key only): no name yet.
        self.add_user(key, "")
    }

    fn remove(&self, key: &[u8]) -> Result<Option<Removal>, UsersError> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let email = email(key)?;
        let inserted_at: Option<i64> = tx
            .query_row(
                "SELECT MAX(seq) FROM users_history WHERE email = ?1 AND kind = 1",
                [email],
                |r| r.get(0),
            )
            .optional()?
            .flatten();
        if tx.execute("DELETE FROM users WHERE email = ?1", [email])? == 0 {
            return Ok(None);
        }
        let head = head_in(&tx, self.identity)?;
        let removed = append(&tx, head, ChangeKind::Removed, email)?;
        tx.commit()?;
        Ok(Some(Removal {
            generation: removed.generation,
            inserted_at: DatasetGeneration::new(
                inserted_at.and_then(|s| u64::try_from(s).ok()).unwrap_or(0),
            ),
        }))
    }

    fn claim_key_encoding(&self, proposed: &str) -> Result<String, UsersError> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        tx.execute(
            "UPDATE users_identity SET key_encoding = ?1 WHERE key_encoding IS NULL",
            [proposed],
        )?;
        let recorded: String =
            tx.query_row("SELECT key_encoding FROM users_identity", [], |r| r.get(0))?;
        tx.commit()?;
        Ok(recorded)
    }
}

/// The filter's options: keys are the table's emails as they are (`utf8`).
fn users_options() -> FilterOptions {
    FilterOptions::new(10_000, 0.01).with_encoding(KeyEncoding::Utf8)
}

/// Prints the error and its causes in words, as a program for people should.
fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            let mut source = e.source();
            while let Some(cause) = source {
                eprintln!("  caused by: {cause}");
                source = cause.source();
            }
            std::process::ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("app.sqlite");
    let snapshot = dir.path().join("users.bloom");
    // The application's database, with users from before the filter.
    let conn = Connection::open(&db)?;
    conn.execute_batch(APP_SCHEMA)?;
    conn.execute(
        "INSERT INTO users (email, name) VALUES ('ada@example.com', 'Ada')",
        [],
    )?;
    drop(conn);

    let (users, outcome) = FilteredStore::open_and_recover(
        UsersStore::open(&db)?,
        users_options().with_snapshot(&snapshot),
    )?;
    println!("open: {outcome}");
    // The application's own insert (a name besides the key), with the filter in step.
    users.insert_with("grace@example.com", |store, email| {
        store.add_user(email, "Grace")
    })?;
    users.insert("linus@example.com")?;
    for email in ["ada@example.com", "grace@example.com", "nobody@example.com"] {
        println!("{email}: {}", users.contains(email)?);
    }
    users.save_snapshot(&snapshot)?;
    drop(users);

    let (users, outcome) = FilteredStore::open(
        UsersStore::open(&db)?,
        users_options().with_snapshot(&snapshot),
    )?;
    println!("reopen: {outcome}");
    assert!(matches!(outcome, OpenOutcome::Trusted { .. }));
    assert_eq!(users.contains("grace@example.com")?, Lookup::Present);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options() -> FilterOptions {
        users_options()
    }

    /// One wrapper per database: a second one is refused while the first is open, and
    /// opens once it is dropped.
    #[test]
    fn a_second_wrapper_over_the_same_database_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("app.sqlite");
        let (first, _) =
            FilteredStore::open_and_recover(UsersStore::open(&db).unwrap(), options()).unwrap();
        let second = FilteredStore::open_and_recover(UsersStore::open(&db).unwrap(), options());
        assert!(matches!(second, Err(bloom_store::StoreError::InUse)));
        drop(first);
        assert!(FilteredStore::open_and_recover(UsersStore::open(&db).unwrap(), options()).is_ok());
    }

    /// Users from before the filter, users the app adds itself, users the wrapper adds: all
    /// present, through restarts; a removed user is absent.
    #[test]
    fn every_user_is_present_across_restarts() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("app.sqlite");
        let snapshot = dir.path().join("users.bloom");
        let conn = Connection::open(&db).unwrap();
        conn.execute_batch(APP_SCHEMA).unwrap();
        conn.execute("INSERT INTO users VALUES ('old@example.com', 'Old')", [])
            .unwrap();
        drop(conn);
        let (users, _) = FilteredStore::open_and_recover(
            UsersStore::open(&db).unwrap(),
            options().with_snapshot(&snapshot),
        )
        .unwrap();
        users
            .insert_with("app@example.com", |store, email| {
                store.add_user(email, "App")
            })
            .unwrap();
        assert_eq!(
            users
                .insert_all(["a@example.com", "b@example.com"])
                .unwrap(),
            [true, true]
        );
        assert!(users.remove("b@example.com").unwrap());
        users.save_snapshot(&snapshot).unwrap();
        // One more after the save, written behind the wrapper's back: taken in (caught up)
        // at the next open.
        users.store().add_user(b"late@example.com", "Late").unwrap();
        drop(users);

        let (users, outcome) = FilteredStore::open(
            UsersStore::open(&db).unwrap(),
            options().with_snapshot(&snapshot),
        )
        .unwrap();
        assert!(
            matches!(outcome, OpenOutcome::CaughtUp { keys: 1, .. }),
            "{outcome:?}"
        );
        for email in [
            "old@example.com",
            "app@example.com",
            "a@example.com",
            "late@example.com",
        ] {
            assert_eq!(users.contains(email).unwrap(), Lookup::Present, "{email}");
        }
        assert!(!users.contains("b@example.com").unwrap().is_present());
    }

    /// Rows from before the filter in any spelling (an NFD email, as macOS types it) are keys
    /// as they are: present, and never inserted twice.
    #[test]
    fn rows_from_before_the_filter_are_found_as_they_are() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("app.sqlite");
        let conn = Connection::open(&db).unwrap();
        conn.execute_batch(APP_SCHEMA).unwrap();
        conn.execute(
            "INSERT INTO users VALUES ('zoe\u{301}@example.com', 'Zoe')",
            [],
        )
        .unwrap();
        drop(conn);
        let (users, _) =
            FilteredStore::open_and_recover(UsersStore::open(&db).unwrap(), options()).unwrap();
        assert_eq!(
            users.contains("zoe\u{301}@example.com").unwrap(),
            Lookup::Present
        );
        assert!(!users.insert("zoe\u{301}@example.com").unwrap());
        let rows: i64 = users
            .store()
            .conn()
            .query_row("SELECT COUNT(*) FROM users", [], |r| r.get(0))
            .unwrap();
        assert_eq!(rows, 1);
    }

    /// The database restored from a copy older than the snapshot, then written to: the
    /// snapshot's history is gone, so it is refused and rebuilt over, never trusted.
    #[test]
    fn a_restored_database_never_trusts_a_newer_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("app.sqlite");
        let backup = dir.path().join("backup.sqlite");
        let snapshot = dir.path().join("users.bloom");
        let (users, _) = FilteredStore::open_and_recover(
            UsersStore::open(&db).unwrap(),
            options().with_snapshot(&snapshot),
        )
        .unwrap();
        users.insert("before@example.com").unwrap();
        drop(users);
        std::fs::copy(&db, &backup).unwrap();
        let (users, _) = FilteredStore::open(UsersStore::open(&db).unwrap(), options()).unwrap();
        users.rebuild().unwrap();
        users.insert("after-backup@example.com").unwrap();
        users.save_snapshot(&snapshot).unwrap();
        drop(users);
        std::fs::copy(&backup, &db).unwrap();
        let store = UsersStore::open(&db).unwrap();
        store.add_user(b"other@example.com", "Other").unwrap();
        let (users, outcome) =
            FilteredStore::open(store, options().with_snapshot(&snapshot)).unwrap();
        assert!(!outcome.is_trusted(), "{outcome:?}");
        users.rebuild().unwrap();
        assert_eq!(
            users.contains("other@example.com").unwrap(),
            Lookup::Present
        );
        assert!(
            !users
                .contains("after-backup@example.com")
                .unwrap()
                .is_present()
        );
    }
}
