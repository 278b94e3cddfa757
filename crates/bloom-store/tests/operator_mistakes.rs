//! What an operator or a second program can get wrong around a store, and how it ends: a
//! clear refusal or a correct answer, never a lost record or an overwritten database.

mod support;

use std::sync::mpsc;
use std::time::Duration;

use bloom_core::KeyEncoding;
use bloom_format::WriteError;
use bloom_store::{
    DatasetGeneration, FilteredStore, Lookup, OpenOutcome, PrimaryStore, SnapshotRefresh,
    SqliteStore, SqliteStoreError, StoreError,
};
use support::{Harness, assert_every_committed_key_present, insert_all, named, options};

#[test]
fn a_snapshot_path_naming_the_database_never_overwrites_it() {
    let h = support::Sqlite::new();
    let (w, _) = FilteredStore::open_and_recover(h.open(), options()).unwrap();
    insert_all(&w, &named("k", 0..100));
    drop(w);
    // The arguments mixed up: the database passed as the snapshot path.
    let db = h.db().to_path_buf();
    let (w, outcome) =
        FilteredStore::open_and_recover(h.open(), options().with_snapshot(&db)).unwrap();
    match &outcome {
        OpenOutcome::Rebuilt {
            snapshot: SnapshotRefresh::Failed(e),
            ..
        } => assert!(e.to_string().contains("not a bloom snapshot"), "{e}"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        w.save_snapshot(&db),
        Err(StoreError::Write(WriteError::NotASnapshot { .. }))
    ));
    insert_all(&w, &named("after", 0..1));
    drop(w);
    let store = SqliteStore::open(&db).unwrap();
    assert_eq!(store.key_count().unwrap(), 101);
}

#[test]
fn keys_written_behind_the_wrappers_back_never_poison_a_snapshot() {
    let h = support::Sqlite::new();
    // The wrapper writes; another program writes the same database on its own connection,
    // and one key goes straight in through `store()`.
    let (writer, _) =
        FilteredStore::open_and_recover(h.open(), options().with_snapshot(h.snapshot())).unwrap();
    let other_program = h.open();
    for key in named("behind", 0..40) {
        bloom_store::PrimaryStore::insert(&other_program, key.as_bytes()).unwrap();
    }
    insert_all(&writer, &named("by-writer", 0..10));
    writer.store().insert(b"straight-in").unwrap();
    writer.save_snapshot(h.snapshot()).unwrap();
    drop((writer, other_program));
    let (w, outcome) =
        FilteredStore::open(h.open(), options().with_snapshot(h.snapshot())).unwrap();
    assert!(
        matches!(outcome, OpenOutcome::Trusted { .. }),
        "{outcome:?}"
    );
    assert_eq!(assert_every_committed_key_present(&w), 51);
}

#[test]
fn edits_by_hand_fail_instead_of_breaking_the_history() {
    let h = support::Sqlite::new();
    let (w, _) = FilteredStore::open_and_recover(h.open(), options()).unwrap();
    insert_all(&w, &named("k", 0..3));
    assert!(w.remove("k-1").unwrap());
    drop(w);
    let conn = rusqlite::Connection::open(h.db()).unwrap();
    for sql in [
        // What the first builds (schema 0) ran for every insert: its table is gone since the upgrade.
        "INSERT OR IGNORE INTO keys (key) VALUES (x'01')",
        "UPDATE bloom_changes SET key = x'00' WHERE seq = 1",
        "UPDATE bloom_changes SET history = zeroblob(16) WHERE seq = 3",
        // Un-removing a key, or removing one without logging it.
        "UPDATE bloom_changes SET removed_at = NULL WHERE seq = 2",
        "UPDATE bloom_changes SET removed_at = 4 WHERE seq = 1",
        "DELETE FROM bloom_changes WHERE seq = 4",
        "DELETE FROM bloom_changes",
        // A row in the past, or a second live insert of a key in the store.
        "INSERT INTO bloom_changes (seq, kind, key, history) VALUES (2, 1, x'01', zeroblob(16))",
        "INSERT INTO bloom_changes (seq, kind, key, history) SELECT 5, 1, key, history FROM bloom_changes WHERE seq = 1",
    ] {
        assert!(conn.execute(sql, []).is_err(), "{sql} was accepted");
    }
    drop(conn);
    let (w, _) = FilteredStore::open_and_recover(h.open(), options()).unwrap();
    assert_eq!(assert_every_committed_key_present(&w), 2);
}

/// A row appended by hand past a gap breaks the chain of generations: every scan over it
/// fails with `Damaged`, and the filter is bypassed, never trusted with a key it lacks.
#[test]
fn an_append_by_hand_that_skips_generations_is_refused_by_every_scan() {
    let h = support::Sqlite::new();
    let (w, _) =
        FilteredStore::open_and_recover(h.open(), options().with_snapshot(h.snapshot())).unwrap();
    insert_all(&w, &named("k", 0..3));
    w.save_snapshot(h.snapshot()).unwrap();
    drop(w);
    let conn = rusqlite::Connection::open(h.db()).unwrap();
    conn.execute(
        "INSERT INTO bloom_changes (seq, kind, key, history) VALUES (9, 1, CAST('by-hand' AS BLOB), zeroblob(16))",
        [],
    )
    .unwrap();
    drop(conn);
    let store = h.open();
    assert!(matches!(
        store.keys_since(DatasetGeneration::ZERO, &mut |_| {}),
        Err(SqliteStoreError::Damaged { .. })
    ));
    assert!(matches!(
        store.head(),
        Err(SqliteStoreError::Damaged { .. })
    ));
    // The wrapper cannot open over a history it cannot read: an error, never a filter
    // trusted with a key it lacks. The store itself still answers.
    assert!(store.contains(b"by-hand").unwrap());
    assert!(matches!(
        FilteredStore::open(store, options().with_snapshot(h.snapshot())),
        Err(StoreError::Store(SqliteStoreError::Damaged { .. }))
    ));
}

/// An application's own tables, `keys` among them, are left alone: the store lives beside
/// them under `bloom_…` names.
#[test]
fn an_applications_own_tables_are_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.sqlite");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(
        "CREATE TABLE keys (seq INTEGER PRIMARY KEY, key BLOB NOT NULL UNIQUE, owner TEXT, secret TEXT);
         INSERT INTO keys (key, owner, secret) VALUES (x'61', 'alice', 's3cret');
         CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT);
         INSERT INTO orders (item) VALUES ('book');
         PRAGMA user_version = 41;",
    )
    .unwrap();
    drop(conn);
    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(
        store.key_count().unwrap(),
        0,
        "the app's keys are not the store's"
    );
    store.insert(b"a").unwrap();
    drop(store);
    let conn = rusqlite::Connection::open(&path).unwrap();
    let secret: String = conn
        .query_row("SELECT secret FROM keys", [], |r| r.get(0))
        .unwrap();
    assert_eq!(secret, "s3cret");
    let orders: i64 = conn
        .query_row("SELECT COUNT(*) FROM orders", [], |r| r.get(0))
        .unwrap();
    assert_eq!(orders, 1);
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, 41, "PRAGMA user_version is the application's");
    let ours: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE name NOT IN ('keys', 'orders') AND name NOT LIKE 'sqlite_%' ORDER BY name")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert!(!ours.is_empty());
    assert!(
        ours.iter().all(|name| name.starts_with("bloom_")),
        "{ours:?}"
    );
}

#[test]
fn databases_this_build_must_not_touch_are_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    // A `bloom_keys` table that bloom-store did not make (its `bloom_keys` is an index).
    let foreign = dir.path().join("foreign.sqlite");
    let conn = rusqlite::Connection::open(&foreign).unwrap();
    conn.execute_batch(
        "CREATE TABLE bloom_keys (seq INTEGER PRIMARY KEY, key BLOB NOT NULL UNIQUE, owner TEXT, secret TEXT);
         INSERT INTO bloom_keys (key, owner, secret) VALUES (x'61', 'alice', 's3cret');",
    )
    .unwrap();
    drop(conn);
    assert!(matches!(
        SqliteStore::open(&foreign),
        Err(SqliteStoreError::ForeignObject {
            name: "bloom_keys",
            ..
        })
    ));
    let conn = rusqlite::Connection::open(&foreign).unwrap();
    let secret: String = conn
        .query_row("SELECT secret FROM bloom_keys", [], |r| r.get(0))
        .unwrap();
    assert_eq!(secret, "s3cret");
    let tables: i64 = conn
        .query_row("SELECT COUNT(*) FROM sqlite_master", [], |r| r.get(0))
        .unwrap();
    assert_eq!(
        tables, 2,
        "nothing was created (the table and its unique index)"
    );
    drop(conn);

    // A database of a newer schema.
    let h = support::Sqlite::new();
    drop(h.open());
    let conn = rusqlite::Connection::open(h.db()).unwrap();
    let newer = SqliteStore::SCHEMA_VERSION + 1;
    conn.execute(
        "UPDATE bloom_store_meta SET value = ?1 WHERE name = 'schema'",
        [newer],
    )
    .unwrap();
    drop(conn);
    assert!(matches!(
        SqliteStore::open(h.db()),
        Err(SqliteStoreError::NewerSchema { found, supported })
            if found == newer && supported == SqliteStore::SCHEMA_VERSION
    ));
}

#[test]
fn a_read_only_database_opens_and_answers() {
    let h = support::Sqlite::new();
    let (w, _) =
        FilteredStore::open_and_recover(h.open(), options().with_snapshot(h.snapshot())).unwrap();
    insert_all(&w, &named("k", 0..20));
    w.save_snapshot(h.snapshot()).unwrap();
    drop(w);
    let uri = format!("file:{}?mode=ro", h.db().display());
    let store = SqliteStore::open(&uri).unwrap();
    let (w, outcome) = FilteredStore::open(store, options().with_snapshot(h.snapshot())).unwrap();
    assert!(
        matches!(outcome, OpenOutcome::Trusted { .. }),
        "{outcome:?}"
    );
    assert_eq!(assert_every_committed_key_present(&w), 20);
    assert!(matches!(w.insert("new"), Err(StoreError::Store(_))));
}

#[test]
fn another_key_encoding_than_the_stores_is_refused() {
    let h = support::Memory::new();
    let (w, _) = FilteredStore::open_and_recover(h.open(), options()).unwrap();
    w.insert("Foo").unwrap();
    drop(w);
    let lower = options().with_encoding(KeyEncoding::NfcTrimLowercase);
    assert!(matches!(
        FilteredStore::open(h.open(), lower),
        Err(StoreError::Options(
            bloom_store::OptionsError::EncodingMismatch { .. }
        ))
    ));
    let (w, _) = FilteredStore::open_and_recover(h.open(), options()).unwrap();
    assert_eq!(w.contains("Foo").unwrap(), Lookup::Present);
}

/// A long scan (a rebuild, a catch-up) runs on its own connection: inserts and lookups go on
/// while it runs. Checked by ordering, not timing: an insert made from inside the scan's
/// callback must complete before the scan does.
#[test]
fn a_scan_does_not_hold_up_inserts() {
    let h = support::Sqlite::new();
    let store = std::sync::Arc::new(h.open());
    for i in 0..100 {
        store.insert(format!("k{i}").as_bytes()).unwrap();
    }
    let mut first = true;
    let other = std::sync::Arc::clone(&store);
    store
        .keys_since(DatasetGeneration::ZERO, &mut |_| {
            if std::mem::take(&mut first) {
                let (tx, rx) = mpsc::channel();
                let other = std::sync::Arc::clone(&other);
                std::thread::spawn(move || {
                    let inserted = other.insert(b"during-the-scan").unwrap().is_some();
                    let found = other.contains(b"during-the-scan").unwrap();
                    let _ = tx.send((inserted, found));
                });
                let done = rx.recv_timeout(Duration::from_secs(120));
                assert_eq!(done, Ok((true, true)), "the insert waited for the scan");
            }
        })
        .unwrap();
    assert_eq!(store.generation().unwrap().get(), 101);
}

/// The application's connection may shadow bloom-store's tables (a TEMP table of the same
/// name): every statement names `main`, so the writes land where the readers look.
#[test]
fn a_temp_table_on_the_applications_connection_shadows_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.sqlite");
    drop(SqliteStore::open(&path).unwrap());
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(
        "CREATE TEMP TABLE bloom_changes (seq INTEGER PRIMARY KEY, kind INTEGER, key BLOB,
             history BLOB, removed_at INTEGER, undoes INTEGER);",
    )
    .unwrap();
    let store = SqliteStore::from_connection(conn).unwrap();
    assert_eq!(
        store.insert(b"k1").unwrap(),
        Some(DatasetGeneration::new(1))
    );
    assert!(store.contains(b"k1").unwrap());
    drop(store);
    assert!(SqliteStore::open(&path).unwrap().contains(b"k1").unwrap());
}

/// Rows appended by hand: a key as TEXT is refused (it would be another key to SQLite's
/// index than the same bytes as BLOB); a row with no digest at a checkpoint generation is a
/// write behind the wrapper's back, not damage: the store goes on, and the key is present.
#[test]
fn rows_appended_by_hand_are_checked_or_taken_in() {
    let h = support::Sqlite::new();
    let store = h.open();
    for i in 0..63u32 {
        store.insert(format!("k{i}").as_bytes()).unwrap();
    }
    drop(store);
    let conn = rusqlite::Connection::open(h.db()).unwrap();
    assert!(
        conn.execute(
            "INSERT INTO bloom_changes (seq, kind, key) VALUES (64, 1, 'texty')",
            []
        )
        .is_err()
    );
    conn.execute(
        "INSERT INTO bloom_changes (seq, kind, key) VALUES (64, 1, CAST('by-hand' AS BLOB))",
        [],
    )
    .unwrap();
    drop(conn);
    let (w, _) = FilteredStore::open_and_recover(h.open(), options()).unwrap();
    assert_eq!(w.contains("by-hand").unwrap(), Lookup::Present);
    assert!(w.insert("after").unwrap());
    assert_eq!(assert_every_committed_key_present(&w), 65);
}

/// A read-only connection to a database bloom-store would have to write (to create or
/// upgrade its tables) says so, and an identity of the wrong shape is damage.
#[test]
fn read_only_and_misshapen_databases_get_typed_errors() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.sqlite");
    rusqlite::Connection::open(&empty)
        .unwrap()
        .execute_batch("CREATE TABLE app (x);")
        .unwrap();
    let ro =
        rusqlite::Connection::open_with_flags(&empty, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap();
    assert!(matches!(
        SqliteStore::from_connection(ro),
        Err(SqliteStoreError::ReadOnly(_))
    ));
    let odd = dir.path().join("odd.sqlite");
    drop(SqliteStore::open(&odd).unwrap());
    let conn = rusqlite::Connection::open(&odd).unwrap();
    conn.execute_batch("UPDATE bloom_store_meta SET value = 'not-a-blob' WHERE name = 'identity';")
        .unwrap();
    drop(conn);
    assert!(matches!(
        SqliteStore::open(&odd),
        Err(SqliteStoreError::Damaged { .. })
    ));
}

/// A copy of the database file alone, taken after a clean close (the way a backup script or
/// a user copies `keys.sqlite`), holds every committed key: closing checkpoints the
/// write-ahead log into the file and truncates it.
#[test]
fn a_copy_of_a_closed_database_file_alone_holds_every_key() {
    let h = support::Sqlite::new();
    let (w, _) = FilteredStore::open_and_recover(h.open(), options()).unwrap();
    insert_all(&w, &named("k", 0..500));
    // A reader connection open too (lookups use them), closed with the store.
    assert_eq!(assert_every_committed_key_present(&w), 500);
    drop(w);
    let mut wal = h.db().as_os_str().to_owned();
    wal.push("-wal");
    let wal_len = std::fs::metadata(&wal).map_or(0, |m| m.len());
    assert_eq!(wal_len, 0, "the log was left with {wal_len} bytes");
    let copy_dir = tempfile::tempdir().unwrap();
    let copy = copy_dir.path().join("copy.sqlite");
    std::fs::copy(h.db(), &copy).unwrap();
    let copied = SqliteStore::open(&copy).unwrap();
    assert_eq!(copied.key_count().unwrap(), 500);
    // The copy keeps the identity: a snapshot of the original is the copy's too.
    assert_eq!(
        bloom_store::PrimaryStore::identity(&copied).unwrap(),
        bloom_store::PrimaryStore::identity(&h.open()).unwrap()
    );
}

/// A database file damaged on disk (here a page of the index `bloom_keys` overwritten, as a
/// flipped sector would): SQLite could answer "not there" for a key the table holds, so the
/// store refuses to open instead of being trusted. The fuzzer found such a file.
#[test]
fn a_database_file_damaged_on_disk_is_refused() {
    let h = support::Sqlite::new();
    let (w, _) = FilteredStore::open_and_recover(h.open(), options()).unwrap();
    insert_all(&w, &named("k", 0..3000));
    drop(w);
    let conn = rusqlite::Connection::open(h.db()).unwrap();
    let (root, page_size): (i64, i64) = (
        conn.query_row(
            "SELECT rootpage FROM sqlite_master WHERE name = 'bloom_keys'",
            [],
            |r| r.get(0),
        )
        .unwrap(),
        conn.query_row("PRAGMA page_size", [], |r| r.get(0))
            .unwrap(),
    );
    drop(conn);
    let mut bytes = std::fs::read(h.db()).unwrap();
    let start = usize::try_from((root - 1) * page_size).unwrap();
    for byte in &mut bytes[start + 8..start + 64] {
        *byte = 0xff;
    }
    std::fs::write(h.db(), &bytes).unwrap();
    let Err(err) = SqliteStore::open(h.db()) else {
        panic!("a damaged file opened");
    };
    assert!(
        matches!(
            err,
            SqliteStoreError::Damaged {
                what: "database file",
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("database file"), "{err}");
    // Without the check the damage goes unseen: it is the check that refuses.
    assert!(SqliteStore::open_without_check(h.db()).is_ok());
    // The file is left as it was, for the operator to restore.
    assert_eq!(std::fs::read(h.db()).unwrap(), bytes);

    // One byte of one key changed where it is stored twice (its row, and its index entry),
    // the pages still well formed: the index no longer matches the table, and a lookup
    // through it could miss the key. Refused too.
    let h = support::Sqlite::new();
    let (w, _) = FilteredStore::open_and_recover(h.open(), options()).unwrap();
    insert_all(&w, &named("k", 0..3000));
    drop(w);
    let mut bytes = std::fs::read(h.db()).unwrap();
    let needle = b"k-1234";
    let at = bytes
        .windows(needle.len())
        .rposition(|w| w == needle)
        .expect("the key is in the file");
    bytes[at + needle.len() - 1] = b'9';
    std::fs::write(h.db(), &bytes).unwrap();
    assert!(matches!(
        SqliteStore::open(h.db()),
        Err(SqliteStoreError::Damaged {
            what: "database file",
            ..
        })
    ));
}

/// The table or its index redefined through `writable_schema` (well-formed pages, so the
/// integrity check passes): without `STRICT` a key can be stored as text, which no lookup by
/// blob finds; an index no longer unique or partial misleads every lookup. Refused.
#[test]
fn a_redefined_table_or_index_is_refused() {
    for (name, from, to) in [
        ("bloom_changes", ") STRICT", ")"),
        ("bloom_keys", "UNIQUE INDEX", "INDEX"),
        ("bloom_keys", "AND removed_at IS NULL", ""),
    ] {
        let h = support::Sqlite::new();
        let (w, _) = FilteredStore::open_and_recover(h.open(), options()).unwrap();
        insert_all(&w, &named("k", 0..10));
        drop(w);
        let conn = rusqlite::Connection::open(h.db()).unwrap();
        conn.execute_batch("PRAGMA writable_schema = ON").unwrap();
        let changed = conn
            .execute(
                "UPDATE sqlite_master SET sql = replace(sql, ?1, ?2) WHERE name = ?3",
                [from, to, name],
            )
            .unwrap();
        assert_eq!(changed, 1, "{name}");
        conn.execute_batch("PRAGMA writable_schema = OFF").unwrap();
        drop(conn);
        let Err(err) = SqliteStore::open(h.db()) else {
            panic!("{name} redefined ({from:?} -> {to:?}) opened");
        };
        assert!(
            matches!(&err, SqliteStoreError::Damaged { what, .. } if *what == name),
            "{err:?}"
        );
    }
}
