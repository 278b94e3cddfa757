//! The values the store reads and writes: generations, digests, hex text, and columns read
//! without a panic.

use bloom_format::{DatasetGeneration, HistoryDigest, StoreIdentity};
use bloom_store::HistoryPoint;

use crate::PostgresStoreError;

/// Column `i` of `row`, or `Damaged` when it has another type or is NULL where a value
/// must be (a column changed by hand): never a panic.
pub(crate) fn field<'a, T: postgres::types::FromSql<'a>>(
    row: &'a postgres::Row,
    i: usize,
    what: &'static str,
) -> Result<T, PostgresStoreError> {
    row.try_get(i).map_err(|e| PostgresStoreError::Damaged {
        what,
        detail: e.to_string(),
    })
}

/// The newest point of the history read from the head row.
pub(crate) fn point(
    identity: StoreIdentity,
    seq: i64,
    digest: &[u8],
) -> Result<HistoryPoint, PostgresStoreError> {
    let generation = from_seq(seq);
    if generation == DatasetGeneration::ZERO
        && digest16(digest)? != bloom_store::history::genesis(identity)
    {
        return Err(PostgresStoreError::Damaged {
            what: "the head of the change log",
            detail: "its digest at generation 0 is not this store's".into(),
        });
    }
    Ok(HistoryPoint {
        generation,
        digest: digest16(digest)?,
    })
}

pub(crate) fn digest16(bytes: &[u8]) -> Result<HistoryDigest, PostgresStoreError> {
    <[u8; 16]>::try_from(bytes)
        .map(HistoryDigest::from_bytes)
        .map_err(|_| PostgresStoreError::Damaged {
            what: "a history digest",
            detail: format!("{} bytes, expected 16", bytes.len()),
        })
}

pub(crate) fn to_seq(generation: DatasetGeneration) -> i64 {
    i64::try_from(generation.get()).unwrap_or(i64::MAX)
}

pub(crate) fn from_seq(seq: i64) -> DatasetGeneration {
    DatasetGeneration::new(u64::try_from(seq).unwrap_or(0))
}

/// Bytes from the hex text PostgreSQL's `encode(…, 'hex')` gives.
pub(crate) fn from_hex(text: &str) -> Option<Vec<u8>> {
    let digit = |c: u8| (c as char).to_digit(16).and_then(|d| u8::try_from(d).ok());
    text.as_bytes()
        .chunks(2)
        .map(|pair| match pair {
            [hi, lo] => Some(digit(*hi)? << 4 | digit(*lo)?),
            _ => None,
        })
        .collect()
}
