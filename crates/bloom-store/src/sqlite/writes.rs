//! The store's writes: a batch of inserts in one immediate transaction, a removal, and the
//! generations they are numbered with.

use bloom_format::DatasetGeneration;
use rusqlite::{OptionalExtension, TransactionBehavior, params};

use crate::history::{self, HistoryPoint, Removal};

use super::error::SqliteStoreError;
use super::{LIVE_INSERT, SqliteStore, chain};

impl SqliteStore {
    /// Inserts keys, in order, in one IMMEDIATE transaction: each new one is logged with the
    /// next generation and its digest. A key already in the store (or earlier in the batch)
    /// gets `None`.
    pub(super) fn insert_batch(
        &self,
        keys: &[&[u8]],
    ) -> Result<Vec<Option<DatasetGeneration>>, SqliteStoreError> {
        let mut done = Vec::with_capacity(keys.len());
        if keys.is_empty() {
            return Ok(done);
        }
        let floor = self.seen_floor();
        let mut conn = self.checked_writer()?;
        // IMMEDIATE takes the write lock first, so the head read below is the head this
        // batch extends, even with other connections writing.
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let head = {
            let mut head = chain::head_in(&tx, self.identity)?;
            self.saw(floor, head)?;
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
            head
        };
        self.commit_and_record(tx, floor, head)?;
        Ok(done)
    }

    /// Removes a key in one IMMEDIATE transaction: the removal is logged with the next
    /// generation and its digest, and the insert it undoes is marked removed by it.
    pub(super) fn remove_one(&self, key: &[u8]) -> Result<Option<Removal>, SqliteStoreError> {
        let floor = self.seen_floor();
        let mut conn = self.checked_writer()?;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let inserted_at: Option<i64> = tx
            .prepare_cached(LIVE_INSERT)?
            .query_row(params![key], |row| row.get(0))
            .optional()?;
        let Some(inserted_at) = inserted_at else {
            return Ok(None);
        };
        let head = chain::head_in(&tx, self.identity)?;
        self.saw(floor, head)?;
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
        self.commit_and_record(tx, floor, HistoryPoint { generation, digest })?;
        Ok(Some(Removal {
            generation,
            inserted_at: from_seq(inserted_at),
        }))
    }
}

pub(super) fn next_generation(head: HistoryPoint) -> Result<DatasetGeneration, SqliteStoreError> {
    head.generation.next().ok_or(SqliteStoreError::Damaged {
        what: "generation",
        detail: "at its maximum".into(),
    })
}

/// The error for a generation missing from a scan: the log has a gap, which only an append
/// by hand can make.
pub(super) fn gap(missing: DatasetGeneration) -> SqliteStoreError {
    SqliteStoreError::Damaged {
        what: "change log",
        detail: format!(
            "generation {missing} is missing (a change was appended by hand, skipping generations)"
        ),
    }
}

/// A failure to take the write lock: on a read-only database, say that plainly.
pub(super) fn read_only_or(error: rusqlite::Error) -> SqliteStoreError {
    read_only(SqliteStoreError::Sqlite(error))
}

/// A write refused because the database (or the connection) is read-only, said plainly.
pub(super) fn read_only(error: SqliteStoreError) -> SqliteStoreError {
    match error {
        SqliteStoreError::Sqlite(e)
            if e.sqlite_error_code() == Some(rusqlite::ErrorCode::ReadOnly) =>
        {
            SqliteStoreError::ReadOnly(e.to_string())
        }
        other => other,
    }
}

pub(super) fn to_seq(generation: DatasetGeneration) -> i64 {
    i64::try_from(generation.get()).unwrap_or(i64::MAX)
}

pub(super) fn from_seq(seq: i64) -> DatasetGeneration {
    DatasetGeneration::new(u64::try_from(seq).unwrap_or(0))
}
