//! The SQLite schema of [`SqliteStore`](super::SqliteStore): its tables and guards, how its
//! version is recorded, and the migrations from every earlier version. `docs/sqlite-schema.md`
//! is the same contract for readers of the database.
//!
//! Everything bloom-store creates is named `bloom_…`, so it lives beside an application's
//! own tables. The version is kept in `bloom_store_meta`, not in `PRAGMA user_version`,
//! which belongs to the application that owns the database.

use rusqlite::{Connection, OptionalExtension, Transaction, params};

use bloom_format::StoreIdentity;

use super::chain::{is_checkpoint, kind_of};
use super::{SqliteStoreError, blob16, to_seq};
use crate::history::{self, ChangeKind};

/// The schema version this build writes, and the newest it reads.
///
/// | version | tables |
/// | --- | --- |
/// | none (schema 0: the first builds) | `keys(seq AUTOINCREMENT, key)`: no identity, no digests |
/// | 1 | `bloom_store_meta`, `keys(seq, key, history)` |
/// | 2 | adds the change log `bloom_changes(seq, kind, key, history)` beside `keys` |
/// | 3 (this build) | `bloom_store_meta` and `bloom_changes(seq, kind, key, history, removed_at, undoes)` only, with the index `bloom_keys` of the keys in the store |
pub(super) const SCHEMA_VERSION: i64 = 3;

/// The tables of schema 3. The change log is the store: a key is in it while its insert's
/// `removed_at` is empty. `history` is the digest at the row's generation, kept at every
/// 64th generation (the others are recomputed from it; see `chain.rs`). Rows are only ever
/// appended (the history digests of every later row depend on each one), except that a
/// removal fills in `removed_at` of the insert it undoes, and names that insert in its own
/// `undoes`. Generations have no gaps: `seq` runs 1, 2, 3, … `STRICT` makes SQLite refuse a
/// key that is not a blob (appended by hand as text, it would be another key to the index
/// than the same bytes as a blob), at no measurable cost to inserts.
const TABLES: &str = "
CREATE TABLE IF NOT EXISTS main.bloom_store_meta (
    name TEXT PRIMARY KEY NOT NULL,
    value BLOB NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS main.bloom_changes (
    seq INTEGER PRIMARY KEY,
    kind INTEGER NOT NULL,
    key BLOB NOT NULL,
    history BLOB,
    removed_at INTEGER,
    undoes INTEGER
) STRICT;
";

/// The index of schema 3: `bloom_keys` holds the keys in the store, one entry each. An
/// insert of a key already there fails on it (which is how a batch finds its duplicates in
/// the same step as it appends), and every membership question is one lookup in it.
const INDEX: &str = "
CREATE UNIQUE INDEX IF NOT EXISTS main.bloom_keys ON bloom_changes (key) WHERE kind = 1 AND removed_at IS NULL;
";

/// The guards of schema 3: a row of the log is never deleted, and never changed but for
/// the one `removed_at` its removal fills in (once, with the newest row, which must be a
/// removal of the same key). An edit by hand fails loudly instead of quietly rewriting the
/// history every snapshot is checked against. Appends need no trigger (which would cost
/// every insert more than the insert itself): a row appended by hand is a write behind
/// the wrapper's back, taken in by the next save; one that skips generations makes every
/// later scan fail with `Damaged`.
const GUARDS: &str = "
CREATE TRIGGER IF NOT EXISTS main.bloom_changes_are_never_deleted BEFORE DELETE ON bloom_changes
    BEGIN SELECT RAISE(ABORT, 'the bloom-store change log is append-only: a deleted row breaks the history every snapshot is checked against'); END;
CREATE TRIGGER IF NOT EXISTS main.bloom_changes_are_never_edited BEFORE UPDATE ON bloom_changes
    WHEN NEW.seq IS NOT OLD.seq OR NEW.kind IS NOT OLD.kind OR NEW.key IS NOT OLD.key
        OR NEW.history IS NOT OLD.history OR OLD.removed_at IS NOT NULL OR OLD.kind <> 1
        OR NOT EXISTS (SELECT 1 FROM bloom_changes r
                       WHERE r.seq = NEW.removed_at AND r.kind = 2 AND r.key = OLD.key
                         AND r.undoes = OLD.seq AND r.seq = (SELECT MAX(seq) FROM bloom_changes))
    BEGIN SELECT RAISE(ABORT, 'the bloom-store change log is append-only: an edited row breaks the history every snapshot is checked against'); END;
";

/// The triggers of schema 2 on `bloom_changes` (those on `keys` go with the table).
const OLD_GUARDS: &str = "
DROP TRIGGER IF EXISTS main.changes_are_never_updated;
DROP TRIGGER IF EXISTS main.changes_are_never_deleted;
DROP TRIGGER IF EXISTS main.changes_follow_the_store;
";

/// The columns of the `keys` table of schemas 1 and 2.
const OLD_KEYS_COLUMNS: &str = "seq,key,history";
/// The columns of the change log of schema 2.
const OLD_CHANGES_COLUMNS: &str = "seq,kind,key,history";
/// The columns of the change log of schema 3.
const CHANGES_COLUMNS: &str = "seq,kind,key,history,removed_at,undoes";

/// The `CREATE TABLE` statement of schema 0's `keys` table, as SQLite keeps it (in
/// lower case, with runs of blanks made one space). A database with no `bloom_store_meta`
/// is upgraded from schema 0 only when its `keys` table is exactly this one: any other `keys`
/// table belongs to the application and is left alone.
const LEGACY_KEYS_SQL: &str =
    "create table keys (seq integer primary key autoincrement, key blob not null unique)";

/// Every object bloom-store creates: its name, type and table.
const OBJECTS: [(&str, &str, &str); 5] = [
    ("bloom_store_meta", "table", "bloom_store_meta"),
    ("bloom_changes", "table", "bloom_changes"),
    ("bloom_keys", "index", "bloom_changes"),
    (
        "bloom_changes_are_never_deleted",
        "trigger",
        "bloom_changes",
    ),
    ("bloom_changes_are_never_edited", "trigger", "bloom_changes"),
];

/// The first object with one of bloom-store's names that is not what bloom-store makes
/// under it (another type, or on another table), as `(name, what it is)`.
fn foreign_object(conn: &Connection) -> Result<Option<(&'static str, String)>, rusqlite::Error> {
    let mut find = conn.prepare("SELECT type, tbl_name FROM main.sqlite_master WHERE name = ?1")?;
    for (name, kind, table) in OBJECTS {
        let found: Option<(String, String)> = find
            .query_row([name], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?;
        if let Some((found_kind, found_table)) = found
            && (found_kind != kind || found_table != table)
        {
            let article = if found_kind.starts_with(['a', 'e', 'i', 'o', 'u']) {
                "an"
            } else {
                "a"
            };
            let on = if found_kind == "table" {
                String::new()
            } else {
                format!(" on {found_table}")
            };
            return Ok(Some((name, format!("{article} {found_kind}{on}"))));
        }
    }
    Ok(None)
}

/// What [`SqliteStore`](super::SqliteStore) does with a table `keys` exactly like bloom-store
/// Schema 0's (`CREATE TABLE keys (seq INTEGER PRIMARY KEY AUTOINCREMENT, key BLOB NOT NULL
/// UNIQUE)`) in a database without bloom-store's metadata. It cannot tell that table from an
/// application's own of the same shape, so it never decides alone.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum LegacyKeys {
    /// Refuse to open ([`SqliteStoreError::LegacyKeysTable`](super::SqliteStoreError::LegacyKeysTable)),
    /// touching nothing: the default.
    #[default]
    Refuse,
    /// It is schema 0's: its keys become the store's first changes, and the table is
    /// dropped.
    Adopt,
    /// It is the application's: leave it alone, and keep the store beside it.
    Ignore,
}

/// What the database holds of bloom-store's, read without writing.
pub(super) struct SchemaState {
    /// The recorded schema version (`None` without `bloom_store_meta` or its row).
    version: Option<i64>,
    /// The recorded identity.
    pub(super) identity: Option<Vec<u8>>,
    /// Whether an identity row is there in another shape than a blob (damaged).
    identity_misshapen: bool,
    /// The columns of the `keys` table, if there is one (bloom-store's before schema 3, or
    /// the application's own).
    old_keys_columns: Option<String>,
    /// Whether the `keys` table is schema 0's (and there is no metadata).
    legacy: bool,
    /// The columns of `bloom_changes`, if there is one.
    changes_columns: Option<String>,
    /// Whether the index exists.
    has_index: bool,
    /// An object with one of bloom-store's names that bloom-store did not make.
    foreign: Option<(&'static str, String)>,
    /// Whether something is named `bloom_changes_v2`, the name schema 2's log takes while
    /// it is migrated.
    v2_name_taken: bool,
    /// The `CREATE` statements of `bloom_changes` and `bloom_keys` as stored, normalized.
    changes_sql: Option<String>,
    index_sql: Option<String>,
}

/// The statement `sql` (one of this schema's `CREATE ... IF NOT EXISTS main.NAME`) as SQLite
/// stores it, normalized: without `IF NOT EXISTS` and the schema name.
fn stored_form(sql: &str) -> String {
    normalized_sql(&sql.replace("IF NOT EXISTS main.", "").replace(';', ""))
}

impl SchemaState {
    /// Whether the database is at this build's schema, with nothing to create.
    pub(super) fn is_current(&self) -> bool {
        self.version == Some(SCHEMA_VERSION)
            && self.identity.is_some()
            && self.changes_columns.as_deref() == Some(CHANGES_COLUMNS)
            && self.has_index
    }
}

fn columns(conn: &Connection, table: &str) -> Result<Option<String>, rusqlite::Error> {
    let names: Vec<String> = conn
        .prepare("SELECT name FROM pragma_table_info(?1, 'main') ORDER BY cid")?
        .query_map([table], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    Ok((!names.is_empty()).then(|| names.join(",")))
}

/// Lower case, one space for every run of blanks, none inside parentheses' edges.
fn normalized_sql(sql: &str) -> String {
    let words: Vec<&str> = sql.split_whitespace().collect();
    words
        .join(" ")
        .to_ascii_lowercase()
        .replace("( ", "(")
        .replace(" )", ")")
        .replace(" ,", ",")
}

fn schema_object_sql(
    conn: &Connection,
    kind: &str,
    name: &str,
) -> Result<Option<String>, rusqlite::Error> {
    conn.query_row(
        "SELECT sql FROM main.sqlite_master WHERE type = ?1 AND name = ?2",
        [kind, name],
        |r| r.get::<_, Option<String>>(0),
    )
    .optional()
    .map(Option::flatten)
}

/// [`read_schema_state`] in a read transaction of its own, so that its several reads see one
/// state of the database (another process may be migrating it meanwhile).
pub(super) fn read_schema_state_consistently(
    conn: &Connection,
) -> Result<SchemaState, rusqlite::Error> {
    let tx = conn.unchecked_transaction()?;
    let state = read_schema_state(&tx)?;
    tx.finish()?;
    Ok(state)
}

pub(super) fn read_schema_state(conn: &Connection) -> Result<SchemaState, rusqlite::Error> {
    let has_meta = schema_object_sql(conn, "table", "bloom_store_meta")?.is_some();
    let (version, identity, identity_misshapen) = if has_meta {
        let get = |name: &str| -> Result<Option<rusqlite::types::Value>, rusqlite::Error> {
            conn.query_row(
                "SELECT value FROM main.bloom_store_meta WHERE name = ?1",
                [name],
                |r| r.get(0),
            )
            .optional()
        };
        let version = match get("schema")? {
            Some(rusqlite::types::Value::Integer(v)) => Some(v),
            _ => None,
        };
        let (identity, misshapen) = match get("identity")? {
            Some(rusqlite::types::Value::Blob(b)) => (Some(b), false),
            Some(_) => (None, true),
            None => (None, false),
        };
        (version, identity, misshapen)
    } else {
        (None, None, false)
    };
    let legacy = !has_meta
        && schema_object_sql(conn, "table", "keys")?
            .is_some_and(|sql| normalized_sql(&sql) == LEGACY_KEYS_SQL);
    let v2_name_taken = conn
        .query_row(
            "SELECT 1 FROM main.sqlite_master WHERE name = 'bloom_changes_v2'",
            [],
            |_| Ok(()),
        )
        .optional()?
        .is_some();
    Ok(SchemaState {
        version,
        identity,
        identity_misshapen,
        v2_name_taken,
        old_keys_columns: columns(conn, "keys")?,
        legacy,
        changes_columns: columns(conn, "bloom_changes")?,
        has_index: schema_object_sql(conn, "index", "bloom_keys")?.is_some(),
        foreign: foreign_object(conn)?,
        changes_sql: schema_object_sql(conn, "table", "bloom_changes")?
            .map(|sql| normalized_sql(&sql)),
        index_sql: schema_object_sql(conn, "index", "bloom_keys")?.map(|sql| normalized_sql(&sql)),
    })
}

/// Whether the `keys` table is bloom-store's (schemas 1 and 2, which the metadata records),
/// and so is to be migrated.
fn owns_old_keys(state: &SchemaState) -> bool {
    matches!(state.version, Some(1 | 2))
}

/// Refuses databases this build must not touch: a newer schema, a bloom-store table with
/// columns bloom-store never gave it, or (unless `legacy` says otherwise) a table that may be
/// schema 0's.
pub(super) fn check_schema(
    state: &mut SchemaState,
    legacy: LegacyKeys,
) -> Result<(), SqliteStoreError> {
    if let Some(found) = state.version
        && found > SCHEMA_VERSION
    {
        return Err(SqliteStoreError::NewerSchema {
            found,
            supported: SCHEMA_VERSION,
        });
    }
    if let Some((name, found)) = &state.foreign {
        return Err(SqliteStoreError::ForeignObject {
            name,
            found: found.clone(),
        });
    }
    if state.identity_misshapen {
        return Err(SqliteStoreError::Damaged {
            what: "store identity",
            detail: "not 16 bytes of blob".into(),
        });
    }
    if state.v2_name_taken {
        return Err(SqliteStoreError::ForeignObject {
            name: "bloom_changes_v2",
            found: "something".into(),
        });
    }
    if state.legacy {
        match legacy {
            LegacyKeys::Refuse => return Err(SqliteStoreError::LegacyKeysTable),
            LegacyKeys::Ignore => state.legacy = false,
            LegacyKeys::Adopt => {}
        }
    }
    let expect = |table: &'static str, found: &Option<String>, wanted: &str| match found {
        Some(columns) if columns != wanted => Err(SqliteStoreError::ForeignTable {
            table,
            columns: columns.clone(),
        }),
        _ => Ok(()),
    };
    let changes_wanted = if state.version == Some(2) {
        OLD_CHANGES_COLUMNS
    } else {
        CHANGES_COLUMNS
    };
    expect("bloom_changes", &state.changes_columns, changes_wanted)?;
    // At this schema, the table and its index are exactly as this build makes them: a table
    // edited through `writable_schema` to drop `STRICT` (so a key can be stored as text, which
    // no lookup by blob finds), or an index no longer unique or partial as it must be, is not
    // the store's.
    if state.version == Some(SCHEMA_VERSION) {
        let table = TABLES
            .split_inclusive(';')
            .find(|statement| statement.contains("bloom_changes"))
            .map(stored_form);
        for (what, found, wanted) in [
            ("bloom_changes", &state.changes_sql, table),
            ("bloom_keys", &state.index_sql, Some(stored_form(INDEX))),
        ] {
            if let (Some(found), Some(wanted)) = (found, wanted)
                && *found != wanted
            {
                return Err(SqliteStoreError::Damaged {
                    what,
                    detail: format!("its definition is not this schema's: {found}"),
                });
            }
        }
    }
    if owns_old_keys(state) {
        expect("keys", &state.old_keys_columns, OLD_KEYS_COLUMNS)?;
    }
    Ok(())
}

/// Creates the schema, or migrates an earlier one to it, inside `tx` (which holds the write
/// lock), and returns the store's identity. `state` was read under the same lock.
///
/// An earlier schema's history (schema 2's change log, schema 1's keys, schema 0's
/// keys) is written into the new log in its order, with the generations 1, 2, 3, … and the
/// digests of the chain. A history without gaps keeps its generations and digests, so a
/// snapshot bound to it stays trusted; one with gaps (schema 0 skipped a number for
/// every duplicate insert, and schemas 1 and 2 kept its numbers) gets a new history, and its
/// snapshots are refused once and rebuilt over.
pub(super) fn create_or_migrate(
    tx: &Transaction<'_>,
    state: &SchemaState,
) -> Result<StoreIdentity, SqliteStoreError> {
    // The earlier history, moved out of the way of the new tables.
    let source = if state.changes_columns.as_deref() == Some(OLD_CHANGES_COLUMNS) {
        tx.execute_batch(OLD_GUARDS)?;
        tx.execute_batch("ALTER TABLE main.bloom_changes RENAME TO bloom_changes_v2;")?;
        Some("SELECT kind, CAST(key AS BLOB) FROM main.bloom_changes_v2 ORDER BY seq")
    } else if (owns_old_keys(state) && state.old_keys_columns.is_some()) || state.legacy {
        // Schema 1's keys, or schema 0's: inserts only.
        Some("SELECT 1, CAST(key AS BLOB) FROM main.keys ORDER BY seq")
    } else {
        None
    };
    tx.execute_batch(TABLES)?;
    tx.execute_batch(INDEX)?;
    let identity = match &state.identity {
        Some(bytes) => StoreIdentity::from_bytes(blob16("store identity", bytes)?),
        None => {
            let identity = history::new_identity()?;
            tx.execute(
                "INSERT INTO main.bloom_store_meta (name, value) VALUES ('identity', ?1)",
                params![identity.to_bytes().as_slice()],
            )?;
            identity
        }
    };
    if let Some(source) = source {
        rewrite_log(tx, identity, source)?;
        if state.changes_columns.as_deref() == Some(OLD_CHANGES_COLUMNS) {
            tx.execute_batch("DROP TABLE main.bloom_changes_v2;")?;
        }
        tx.execute_batch("DROP TABLE IF EXISTS main.keys;")?;
    }
    tx.execute_batch(GUARDS)?;
    tx.execute(
        "INSERT OR REPLACE INTO main.bloom_store_meta (name, value) VALUES ('schema', ?1)",
        params![SCHEMA_VERSION],
    )?;
    Ok(identity)
}

/// Appends the changes `source` selects (`kind, key`, in order) to the new, empty log: the
/// generations 1, 2, 3, …, the chain's digests at the checkpoints, and every removal linked
/// with the insert it undid (found through `bloom_keys`, so memory stays constant).
fn rewrite_log(
    tx: &Transaction<'_>,
    identity: StoreIdentity,
    source: &str,
) -> Result<(), SqliteStoreError> {
    let mut read = tx.prepare(source)?;
    let mut insert = tx.prepare(
        "INSERT INTO main.bloom_changes (seq, kind, key, history) VALUES (?1, 1, ?2, ?3)",
    )?;
    let mut live = tx.prepare(
        "SELECT seq FROM main.bloom_changes WHERE key = ?1 AND kind = 1 AND removed_at IS NULL",
    )?;
    let mut remove = tx.prepare(
        "INSERT INTO main.bloom_changes (seq, kind, key, history, undoes) VALUES (?1, 2, ?2, ?3, ?4)",
    )?;
    let mut removed_at =
        tx.prepare("UPDATE main.bloom_changes SET removed_at = ?1 WHERE seq = ?2")?;
    let mut rows = read.query([])?;
    let mut point = history::HistoryPoint::genesis(identity);
    while let Some(row) = rows.next()? {
        let kind_value: i64 = row.get(0)?;
        let key = row.get_ref(1)?.as_blob().map_err(rusqlite::Error::from)?;
        let generation = point.generation.next().ok_or(SqliteStoreError::Damaged {
            what: "generation",
            detail: "at its maximum".into(),
        })?;
        let seq = to_seq(generation);
        let kind = kind_of(kind_value, seq)?;
        let digest = history::after_change(point.digest, generation, kind, key);
        let kept = is_checkpoint(generation).then(|| digest.to_bytes().to_vec());
        match kind {
            ChangeKind::Inserted => {
                insert
                    .execute(params![seq, key, kept])
                    .map_err(|e| damaged_history(e, seq))?;
            }
            ChangeKind::Removed => {
                let undone: Option<i64> = live.query_row([key], |r| r.get(0)).optional()?;
                let Some(undone) = undone else {
                    return Err(SqliteStoreError::Damaged {
                        what: "change log",
                        detail: format!(
                            "the removal at generation {seq} removes a key that is not in the store"
                        ),
                    });
                };
                remove.execute(params![seq, key, kept, undone])?;
                removed_at.execute(params![seq, undone])?;
            }
        }
        point = history::HistoryPoint { generation, digest };
    }
    Ok(())
}

/// An insert of the earlier history that `bloom_keys` refused: the key was in the store
/// already, which the earlier schema's guards never let happen.
fn damaged_history(error: rusqlite::Error, seq: i64) -> SqliteStoreError {
    match error.sqlite_error_code() {
        Some(rusqlite::ErrorCode::ConstraintViolation) => SqliteStoreError::Damaged {
            what: "change log",
            detail: format!("the insert at generation {seq} inserts a key that is in the store"),
        },
        _ => SqliteStoreError::Sqlite(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_bloom_store_0_1s_own_statement_is_taken_for_its_table() {
        assert_eq!(
            normalized_sql(
                "CREATE TABLE keys (seq INTEGER PRIMARY KEY AUTOINCREMENT, key BLOB NOT NULL UNIQUE)"
            ),
            LEGACY_KEYS_SQL
        );
        assert_eq!(
            normalized_sql(
                "CREATE TABLE keys (\n  seq INTEGER PRIMARY KEY AUTOINCREMENT ,\n  key BLOB NOT NULL UNIQUE\n)"
            ),
            LEGACY_KEYS_SQL
        );
        assert_ne!(
            normalized_sql("CREATE TABLE keys (seq INTEGER PRIMARY KEY, key BLOB NOT NULL UNIQUE)"),
            LEGACY_KEYS_SQL
        );
    }
}
