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

/// The digest a checkpoint row keeps, if it keeps one.
fn kept(bytes: Option<&[u8]>) -> Result<Option<HistoryDigest>, SqliteStoreError> {
    bytes
        .map(|bytes| Ok(HistoryDigest::from_bytes(blob16("history digest", bytes)?)))
        .transpose()
}

/// The digest at `generation`, or `None` when the log has not reached it: from the newest
/// checkpoint at or before it that keeps its digest (a row appended by hand may keep none),
/// chained over the rows after it.
pub(super) fn digest_at(
    conn: &Connection,
    identity: StoreIdentity,
    generation: DatasetGeneration,
) -> Result<Option<HistoryDigest>, SqliteStoreError> {
    if generation == DatasetGeneration::ZERO {
        return Ok(Some(history::genesis(identity)));
    }
    let base: Option<(i64, Vec<u8>)> = conn
        .prepare_cached(
            "SELECT seq, history FROM main.bloom_changes
             WHERE seq <= ?1 AND seq % ?2 = 0 AND history IS NOT NULL
             ORDER BY seq DESC LIMIT 1",
        )?
        .query_row(params![to_seq(generation), CHECKPOINT.cast_signed()], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .optional()?;
    let (mut reached, mut digest) = match base {
        None => (DatasetGeneration::ZERO, history::genesis(identity)),
        Some((seq, bytes)) => (
            from_seq(seq),
            kept(Some(&bytes))?.unwrap_or_else(|| history::genesis(identity)),
        ),
    };
    let mut stmt = conn.prepare_cached(
        "SELECT seq, kind, CAST(key AS BLOB) FROM main.bloom_changes WHERE seq > ?1 AND seq <= ?2 ORDER BY seq",
    )?;
    let mut rows = stmt.query(params![to_seq(reached), to_seq(generation)])?;
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
    drop(rows);
    if reached == generation {
        return Ok(Some(digest));
    }
    // The rows ran out before `generation`: not reached yet, or missing below a later row.
    let newest: Option<i64> = conn
        .prepare_cached("SELECT MAX(seq) FROM main.bloom_changes")?
        .query_row([], |r| r.get(0))?;
    if newest.is_some_and(|newest| from_seq(newest) >= generation) {
        Err(gap(reached.next().unwrap_or(reached)))
    } else {
        Ok(None)
    }
}

/// The newest point of the history, in a connection or transaction.
pub(super) fn head_in(
    conn: &Connection,
    identity: StoreIdentity,
) -> Result<HistoryPoint, SqliteStoreError> {
    let newest: Option<i64> = conn
        .prepare_cached("SELECT MAX(seq) FROM main.bloom_changes")?
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

/// Checks a row's digest as a replay chains it: a checkpoint row that keeps a digest must
/// keep the one the chain reached (one that keeps none, appended by hand, is not checked).
pub(super) fn check_row(
    computed: HistoryDigest,
    generation: DatasetGeneration,
    kept_bytes: Option<&[u8]>,
) -> Result<(), SqliteStoreError> {
    if !is_checkpoint(generation) {
        return Ok(());
    }
    match kept(kept_bytes)? {
        Some(digest) if digest != computed => Err(SqliteStoreError::Damaged {
            what: "change log",
            detail: format!(
                "the history digest at generation {generation} does not follow from the changes before it"
            ),
        }),
        _ => Ok(()),
    }
}
