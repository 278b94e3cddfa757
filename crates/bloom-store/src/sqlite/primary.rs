//! [`SqliteStore`] as a [`PrimaryStore`]: lookups, the history and scans of it, commits
//! (made by `writes.rs`), and the claims a wrapper takes.

use std::path::PathBuf;
use std::sync::Arc;

use bloom_format::{DatasetGeneration, HistoryDigest, StoreIdentity};
use rusqlite::{OptionalExtension, TransactionBehavior, params};

use crate::history::{self, Change, HistoryPoint, KeyGeneration, Removal};
use crate::primary::PrimaryStore;

use super::error::SqliteStoreError;
use super::writes::{from_seq, gap, read_only_or, to_seq};
use super::{LIVE_INSERT, SqliteStore, chain};

impl PrimaryStore for SqliteStore {
    type Error = SqliteStoreError;

    fn identity(&self) -> Result<StoreIdentity, SqliteStoreError> {
        Ok(self.identity)
    }

    fn contains(&self, key: &[u8]) -> Result<bool, SqliteStoreError> {
        self.read(|conn| Ok(conn.prepare_cached(LIVE_INSERT)?.exists(params![key])?))
    }

    fn head(&self) -> Result<HistoryPoint, SqliteStoreError> {
        let floor = self.seen_floor();
        let head = self.read(|conn| chain::head_in(conn, self.identity))?;
        self.saw(floor, head)?;
        Ok(head)
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

    /// A file database is claimed by a lock on `PATH-bloom.lock` beside it (the path with
    /// links resolved, so two paths to one file share it): exclusive for
    /// [`ClaimKind::Exclusive`](crate::ClaimKind::Exclusive), shared for
    /// [`ClaimKind::Shared`](crate::ClaimKind::Shared), released when the claim is dropped
    /// or the process ends; an in-memory one by a count. While it is held, a watcher sees the
    /// database file replaced, written by another program, or the lock file removed, as it
    /// happens (inotify on Linux), and the claim is unconfirmed until the store is checked
    /// again, or lost for good.
    fn claim_wrapper(
        &self,
        kind: crate::ClaimKind,
    ) -> Result<Option<crate::StoreClaim>, SqliteStoreError> {
        // The file SQLite opened (a `file:` URI or a relative path resolved), links resolved.
        let (file, read_only) = {
            let conn = self.checked_writer()?;
            let file = conn.path().filter(|p| !p.is_empty()).map(PathBuf::from);
            (file, conn.is_readonly(rusqlite::MAIN_DB)?)
        };
        let (Some(file), Some(guard)) = (file.filter(|_| self.path.is_some()), &self.guard) else {
            return Ok(self.claimed.claim(kind));
        };
        let resolved = std::fs::canonicalize(&file).unwrap_or(file);
        let mut name = resolved.into_os_string();
        name.push("-bloom.lock");
        let lock = PathBuf::from(name);
        let failed = |cause| SqliteStoreError::Lock {
            path: lock.clone(),
            cause,
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
                return Ok(Some(
                    crate::StoreClaim::unenforced().also_watching(guard.watch.clone()),
                ));
            }
            Err(e) => return Err(failed(e)),
        };
        if !file.metadata().is_ok_and(|m| m.is_file()) {
            return Err(not_a_file());
        }
        let locked = match kind {
            crate::ClaimKind::Exclusive => file.try_lock(),
            crate::ClaimKind::Shared => file.try_lock_shared(),
        };
        match locked {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => return Ok(None),
            Err(std::fs::TryLockError::Error(e)) => return Err(failed(e)),
        }
        let watch = crate::ClaimWatch::new();
        let watcher = super::watch::start(Arc::clone(guard), lock.clone(), watch.clone(), kind)
            .map_err(failed)?;
        Ok(Some(
            crate::StoreClaim::holding_while((file, watcher), watch)
                .also_watching(guard.watch.clone()),
        ))
    }

    fn claim_key_encoding(&self, proposed: &str) -> Result<String, SqliteStoreError> {
        let mut conn = self.checked_writer()?;
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
