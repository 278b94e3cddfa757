//! The history digests of a SQLite store's change log. Every row's digest follows from the
//! one before it (see `crate::history`); a row keeps its own only at every
//! [`CHECKPOINT`]th generation, and the digest at any other generation is recomputed from
//! the checkpoint before it (at most `CHECKPOINT - 1` steps of SHA-256). Rows stay small,
//! which is most of what an insert costs.

use bloom_format::{DatasetGeneration, HistoryDigest, StoreIdentity};
use rusqlite::{Connection, OptionalExtension, params};

use super::{SqliteStoreError, blob16, from_seq, gap, to_seq};
use crate::history::{self, ChangeKind, HistoryPoint};

/// Rows whose generation is a multiple of this keep their digest.
pub(super) const CHECKPOINT: u64 = 64;

/// Whether the row of `generation` keeps its digest.
pub(super) fn is_checkpoint(generation: DatasetGeneration) -> bool {
    generation.get().is_multiple_of(CHECKPOINT)
}

/// The kind of a row, as stored.
pub(super) fn kind_of(value: i64, seq: i64) -> Result<ChangeKind, SqliteStoreError> {
    match value {
        1 => Ok(ChangeKind::Inserted),
        2 => Ok(ChangeKind::Removed),
        other => Err(SqliteStoreError::Damaged {
            what: "change kind",
            detail: format!("{other} at generation {seq}"),
        }),
    }
}

/// The digest a checkpoint row keeps.
fn stored(
    bytes: Option<&[u8]>,
    generation: DatasetGeneration,
) -> Result<HistoryDigest, SqliteStoreError> {
    match bytes {
        Some(bytes) => Ok(HistoryDigest::from_bytes(blob16("history digest", bytes)?)),
        None => Err(SqliteStoreError::Damaged {
            what: "change log",
            detail: format!("the history digest of generation {generation} is missing"),
        }),
    }
}

/// The digest at `generation`, or `None` when the log has not reached it: from the
/// checkpoint at or before it, chained over the rows after the checkpoint.
pub(super) fn digest_at(
    conn: &Connection,
    identity: StoreIdentity,
    generation: DatasetGeneration,
) -> Result<Option<HistoryDigest>, SqliteStoreError> {
    let g = generation.get();
    if g == 0 {
        return Ok(Some(history::genesis(identity)));
    }
    let base = g - g % CHECKPOINT;
    let mut digest = if base == 0 {
        history::genesis(identity)
    } else {
        let row: Option<Option<Vec<u8>>> = conn
            .prepare_cached("SELECT history FROM bloom_changes WHERE seq = ?1")?
            .query_row(params![to_seq(DatasetGeneration::new(base))], |r| r.get(0))
            .optional()?;
        match row {
            None => return Ok(None),
            Some(bytes) => stored(bytes.as_deref(), DatasetGeneration::new(base))?,
        }
    };
    let mut stmt = conn.prepare_cached(
        "SELECT seq, kind, CAST(key AS BLOB) FROM bloom_changes WHERE seq > ?1 AND seq <= ?2 ORDER BY seq",
    )?;
    let mut rows = stmt.query(params![
        to_seq(DatasetGeneration::new(base)),
        to_seq(generation)
    ])?;
    let mut reached = DatasetGeneration::new(base);
    while let Some(row) = rows.next()? {
        let seq: i64 = row.get(0)?;
        let at = from_seq(seq);
        let expected = reached.next().unwrap_or(reached);
        if at != expected {
            return Err(gap(expected));
        }
        let kind = kind_of(row.get(1)?, seq)?;
        let key = row.get_ref(2)?.as_blob().map_err(rusqlite::Error::from)?;
        digest = history::after_change(digest, at, kind, key);
        reached = at;
    }
    Ok((reached == generation).then_some(digest))
}

/// The newest point of the history, in a connection or transaction.
pub(super) fn head_in(
    conn: &Connection,
    identity: StoreIdentity,
) -> Result<HistoryPoint, SqliteStoreError> {
    let newest: Option<i64> = conn
        .prepare_cached("SELECT MAX(seq) FROM bloom_changes")?
        .query_row([], |row| row.get(0))?;
    let Some(newest) = newest else {
        return Ok(HistoryPoint::genesis(identity));
    };
    let generation = from_seq(newest);
    let digest = digest_at(conn, identity, generation)?.ok_or(SqliteStoreError::Damaged {
        what: "change log",
        detail: format!("generation {generation} vanished while it was read"),
    })?;
    Ok(HistoryPoint { generation, digest })
}

/// Checks a row's digest as a replay chains it: a checkpoint row's kept digest must be the
/// one the chain reached.
pub(super) fn check_row(
    computed: HistoryDigest,
    generation: DatasetGeneration,
    kept: Option<&[u8]>,
) -> Result<(), SqliteStoreError> {
    if !is_checkpoint(generation) {
        return Ok(());
    }
    if stored(kept, generation)? == computed {
        Ok(())
    } else {
        Err(SqliteStoreError::Damaged {
            what: "change log",
            detail: format!(
                "the history digest at generation {generation} does not follow from the changes before it"
            ),
        })
    }
}
