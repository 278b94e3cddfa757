//! What every `PrimaryStore` promises, checked on both stores: identities, generations that
//! grow by one per change (a new key or a removal; never for a duplicate or a missing key),
//! history digests, the change log, and the upgrades of databases created by its first builds (schema 0)
//! and by schema 1 (no change log).

mod support;

use bloom_store::{
    Change, ChangeKind, DatasetGeneration, PrimaryStore, Removal, SqliteStore, history,
};
use support::Harness;

fn generations_count_new_keys_only<H: Harness>(h: &H) {
    let store = h.open();
    let genesis = store.head().unwrap();
    assert_eq!(genesis.generation, DatasetGeneration::ZERO);
    assert_eq!(genesis.digest, history::genesis(store.identity().unwrap()));
    assert_eq!(
        store.history_at(DatasetGeneration::ZERO).unwrap(),
        Some(genesis.digest)
    );

    let mut expected = genesis.digest;
    for (i, key) in [b"a".as_slice(), b"b", b"a", b"c", b"b", b"c", b"d"]
        .iter()
        .enumerate()
    {
        let before = store.head().unwrap();
        let new = store.insert(key).unwrap();
        let after = store.head().unwrap();
        if let Some(generation) = new {
            assert_eq!(generation, after.generation);
            assert_eq!(
                after.generation.get(),
                before.generation.get() + 1,
                "insert {i}"
            );
            expected = history::after_insert(expected, after.generation, key);
            assert_eq!(after.digest, expected);
        } else {
            assert_eq!(after, before, "a duplicate changes nothing (insert {i})");
        }
    }
    assert_eq!(store.generation().unwrap().get(), 4);
    for g in 0..=4u64 {
        assert!(
            store
                .history_at(DatasetGeneration::new(g))
                .unwrap()
                .is_some()
        );
    }
    assert_eq!(store.history_at(DatasetGeneration::new(5)).unwrap(), None);
    let mut since = Vec::new();
    let reached = store
        .keys_since(DatasetGeneration::new(2), &mut |k| since.push(k.to_vec()))
        .unwrap();
    assert_eq!(since, [b"c".to_vec(), b"d".to_vec()]);
    assert_eq!(reached.get(), 4);
}

fn changes(store: &impl PrimaryStore, after: u64) -> Vec<(u64, ChangeKind, Vec<u8>)> {
    let mut seen = Vec::new();
    store
        .changes_since(DatasetGeneration::new(after), &mut |c: Change<'_>| {
            seen.push((c.generation.get(), c.kind, c.key.to_vec()));
        })
        .unwrap();
    seen
}

fn removals_are_changes_with_their_own_generation_and_digest<H: Harness>(h: &H) {
    use ChangeKind::{Inserted, Removed};
    let store = h.open();
    let genesis = store.head().unwrap().digest;
    assert_eq!(store.remove(b"nothing").unwrap(), None, "a missing key");
    assert_eq!(store.head().unwrap().generation.get(), 0);
    let g = DatasetGeneration::new;
    assert_eq!(store.insert(b"a").unwrap(), Some(g(1)));
    assert_eq!(store.insert(b"b").unwrap(), Some(g(2)));
    let removal = |generation, inserted_at| {
        Some(Removal {
            generation: g(generation),
            inserted_at: g(inserted_at),
        })
    };
    assert_eq!(store.remove(b"a").unwrap(), removal(3, 1));
    assert_eq!(store.remove(b"a").unwrap(), None, "removed already");
    assert!(!store.contains(b"a").unwrap());
    assert_eq!(
        store.insert(b"a").unwrap(),
        Some(g(4)),
        "back, as a new change"
    );
    assert_eq!(store.remove(b"b").unwrap(), removal(5, 2));

    let d1 = history::after_insert(genesis, g(1), b"a");
    let d2 = history::after_insert(d1, g(2), b"b");
    let d3 = history::after_remove(d2, g(3), b"a");
    let d4 = history::after_insert(d3, g(4), b"a");
    let d5 = history::after_remove(d4, g(5), b"b");
    assert_eq!(store.head().unwrap().digest, d5);
    assert_eq!(store.history_at(g(3)).unwrap(), Some(d3));

    assert_eq!(
        changes(&store, 1),
        [
            (2, Inserted, b"b".to_vec()),
            (3, Removed, b"a".to_vec()),
            (4, Inserted, b"a".to_vec()),
            (5, Removed, b"b".to_vec()),
        ]
    );
    // Keys: only those in the store, each once, at its newest insert.
    let mut keys = Vec::new();
    store
        .keys_since(DatasetGeneration::ZERO, &mut |k| keys.push(k.to_vec()))
        .unwrap();
    assert_eq!(keys, [b"a".to_vec()]);
    let mut later = Vec::new();
    store
        .keys_since(g(4), &mut |k| later.push(k.to_vec()))
        .unwrap();
    assert!(later.is_empty());
}

fn identity_survives_reopening_and_backups_and_not_recreation<H: Harness>(h: &H) {
    let id = h.open().identity().unwrap();
    assert!(!id.is_zero());
    assert_eq!(h.open().identity().unwrap(), id);
    let backup = h.backup();
    h.recreate();
    let new_id = h.open().identity().unwrap();
    assert_ne!(new_id, id, "a recreated database is another store");
    h.restore(&backup);
    assert_eq!(
        h.open().identity().unwrap(),
        id,
        "a restored backup is the same store"
    );
}

/// A batch is the same history as its keys inserted one by one: one generation per new key,
/// none for a key already there or repeated in the batch, the same digests.
fn a_batch_is_the_history_of_its_keys_one_by_one<H: Harness>(h: &H) {
    let store = h.open();
    store.insert(b"old").unwrap();
    let g = DatasetGeneration::new;
    let batch: [&[u8]; 5] = [b"a", b"old", b"b", b"a", b"c"];
    assert_eq!(
        store.insert_all(&batch).unwrap(),
        [Some(g(2)), None, Some(g(3)), None, Some(g(4))]
    );
    assert_eq!(store.insert_all(&[]).unwrap(), []);
    let id = store.identity().unwrap();
    let mut digest = history::after_insert(history::genesis(id), g(1), b"old");
    for (n, key) in [(2, b"a"), (3, b"b"), (4, b"c")] {
        digest = history::after_insert(digest, g(n), key);
    }
    assert_eq!(store.head().unwrap().digest, digest);
    assert_eq!(
        store
            .contains_each(&[b"a", b"zzz", b"old", b"c", b"a"])
            .unwrap(),
        [true, false, true, true, true]
    );
    assert_eq!(store.contains_each(&[]).unwrap(), Vec::<bool>::new());
}

on_every_store!(
    a_batch_is_the_history_of_its_keys_one_by_one,
    generations_count_new_keys_only,
    removals_are_changes_with_their_own_generation_and_digest,
    identity_survives_reopening_and_backups_and_not_recreation,
);

/// A database written by the first builds (schema 0): `AUTOINCREMENT` with gaps left by duplicate
/// inserts, and no identity. It is upgraded in place on first open and keeps its keys, in
/// their order, at the generations 1, 2, 3, … (the log of schema 3 has no gaps).
#[test]
fn a_version_0_1_database_is_upgraded_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.sqlite");
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(
            "CREATE TABLE keys (seq INTEGER PRIMARY KEY AUTOINCREMENT, key BLOB NOT NULL UNIQUE);
             INSERT OR IGNORE INTO keys (key) VALUES (x'61');
             INSERT OR IGNORE INTO keys (key) VALUES (x'61');
             INSERT OR IGNORE INTO keys (key) VALUES (x'62');
             INSERT OR IGNORE INTO keys (key) VALUES (x'63');",
        )
        .unwrap();
    }
    // It cannot be told from an application's table of the same shape: refused, untouched,
    // until the caller says which it is.
    assert!(matches!(
        SqliteStore::open(&path),
        Err(bloom_store::SqliteStoreError::LegacyKeysTable)
    ));
    let store = SqliteStore::open_with(&path, bloom_store::LegacyKeys::Adopt).unwrap();
    let id = store.identity().unwrap();
    assert_eq!(store.key_count().unwrap(), 3);
    assert_eq!(store.generation().unwrap().get(), 3);
    let g = DatasetGeneration::new;
    let g1 = history::after_insert(history::genesis(id), g(1), b"a");
    let g2 = history::after_insert(g1, g(2), b"b");
    assert_eq!(store.history_at(g(1)).unwrap(), Some(g1));
    assert_eq!(store.history_at(g(2)).unwrap(), Some(g2));
    assert_eq!(store.insert(b"d").unwrap(), Some(g(4)));
    assert_eq!(
        changes(&store, 0),
        [
            (1, ChangeKind::Inserted, b"a".to_vec()),
            (2, ChangeKind::Inserted, b"b".to_vec()),
            (3, ChangeKind::Inserted, b"c".to_vec()),
            (4, ChangeKind::Inserted, b"d".to_vec()),
        ],
        "the old keys are the log's first changes"
    );
    drop(store);
    let again = SqliteStore::open(&path).unwrap();
    assert_eq!(again.identity().unwrap(), id, "upgraded once");
    assert_eq!(again.key_count().unwrap(), 4);
    // The name `keys` is the application's again.
    let conn = rusqlite::Connection::open(&path).unwrap();
    let tables: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM sqlite_master WHERE name = 'keys'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(tables, 0);
}

/// A database of schema 1 (keys table with digests, no change log, keys never removed): its
/// keys become the first changes of the log, with their generations and digests, and it can
/// then remove keys.
#[test]
fn a_schema_1_database_is_upgraded_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v1.sqlite");
    let id = [9u8; 16];
    let identity = bloom_store::StoreIdentity::from_bytes(id);
    let g = DatasetGeneration::new;
    let d1 = history::after_insert(history::genesis(identity), g(1), b"a");
    let d2 = history::after_insert(d1, g(2), b"b");
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(
            "CREATE TABLE bloom_store_meta (name TEXT PRIMARY KEY NOT NULL, value BLOB NOT NULL) WITHOUT ROWID;
             CREATE TABLE keys (
                 seq INTEGER PRIMARY KEY CHECK (seq > 0),
                 key BLOB NOT NULL UNIQUE,
                 history BLOB NOT NULL CHECK (length(history) = 16));
             CREATE TRIGGER keys_are_never_deleted BEFORE DELETE ON keys
                 BEGIN SELECT RAISE(ABORT, 'append-only'); END;
             INSERT INTO bloom_store_meta VALUES ('schema', 1);",
        )
        .unwrap();
        conn.execute(
            "INSERT INTO bloom_store_meta VALUES ('identity', ?1)",
            [id.as_slice()],
        )
        .unwrap();
        for (seq, key, digest) in [(1, b"a", d1), (2, b"b", d2)] {
            conn.execute(
                "INSERT INTO keys (seq, key, history) VALUES (?1, ?2, ?3)",
                rusqlite::params![seq, key.as_slice(), digest.to_bytes().as_slice()],
            )
            .unwrap();
        }
    }
    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(store.identity().unwrap(), identity);
    assert_eq!(store.head().unwrap().digest, d2, "the history is unchanged");
    assert_eq!(store.history_at(g(1)).unwrap(), Some(d1));
    assert_eq!(
        changes(&store, 0),
        [
            (1, ChangeKind::Inserted, b"a".to_vec()),
            (2, ChangeKind::Inserted, b"b".to_vec()),
        ]
    );
    assert_eq!(
        store.remove(b"a").unwrap(),
        Some(Removal {
            generation: g(3),
            inserted_at: g(1)
        })
    );
    assert_eq!(
        store.head().unwrap().digest,
        history::after_remove(d2, g(3), b"a")
    );
    assert_eq!(store.key_count().unwrap(), 1);
}

/// Two processes creating the same new database at once agree on one identity: it is
/// written in the transaction that creates the schema.
#[test]
fn concurrent_creation_makes_one_identity() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("new.sqlite");
    let ids: Vec<_> = (0..6)
        .map(|_| {
            let path = path.clone();
            std::thread::spawn(move || SqliteStore::open(path).unwrap().identity().unwrap())
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|t| t.join().unwrap())
        .collect();
    assert!(ids.windows(2).all(|w| w[0] == w[1]), "{ids:?}");
}

#[test]
fn memory_store_rollback_forgets_the_newest_commits() {
    let store = bloom_store::MemoryStore::new();
    for key in [b"a", b"b", b"c"] {
        store.insert(key).unwrap();
    }
    let at_two = store.history_at(DatasetGeneration::new(2)).unwrap();
    store.rollback_to(DatasetGeneration::new(1));
    assert_eq!(store.generation().unwrap().get(), 1);
    assert!(!store.contains(b"b").unwrap());
    store.insert(b"x").unwrap();
    assert_ne!(store.history_at(DatasetGeneration::new(2)).unwrap(), at_two);
}

/// A database written by the last release with schema 2 (a frozen file, with a snapshot
/// bound to it) is upgraded in place: its keys move to `bloom_keys`, its identity and history
/// are unchanged, so the snapshot saved before the upgrade is still trusted.
#[test]
fn a_schema_2_database_of_the_last_release_is_upgraded_in_place() {
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("schema-2.sqlite");
    let snapshot = dir.path().join("schema-2.bloom");
    std::fs::copy(fixtures.join("schema-2.sqlite"), &db).unwrap();
    std::fs::copy(fixtures.join("schema-2.bloom"), &snapshot).unwrap();
    let before: Vec<u8> = {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.query_row(
            "SELECT value FROM bloom_store_meta WHERE name = 'identity'",
            [],
            |r| r.get(0),
        )
        .unwrap()
    };

    let store = SqliteStore::open(&db).unwrap();
    assert_eq!(store.identity().unwrap().to_bytes().as_slice(), before);
    assert_eq!(store.generation().unwrap().get(), 52);
    assert_eq!(store.key_count().unwrap(), 50);
    assert!(!store.contains(b"record-7").unwrap());
    assert!(store.contains("café".as_bytes()).unwrap());
    // The removal is still a change of the store (linked to the insert it undid), and every
    // digest of the chain still follows.
    let log = changes(&store, 0);
    assert_eq!(log.len(), 52);
    assert_eq!(log[50], (51, ChangeKind::Removed, b"record-7".to_vec()));
    let (w, outcome) = bloom_store::FilteredStore::open(
        store,
        bloom_store::FilterOptions::new(1000, 0.01).with_snapshot(&snapshot),
    )
    .unwrap();
    assert!(
        matches!(outcome, bloom_store::OpenOutcome::Trusted { generation } if generation.get() == 52),
        "{outcome:?}"
    );
    for i in (0..50).filter(|&i| i != 7) {
        assert!(w.contains(&format!("record-{i}")).unwrap().is_present());
    }
    assert!(w.contains("cafe\u{301}").unwrap().is_present());
    assert!(!w.contains("record-7").unwrap().is_present());
    drop(w);

    let conn = rusqlite::Connection::open(&db).unwrap();
    let names: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY name")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert!(names.iter().all(|n| n.starts_with("bloom_")), "{names:?}");
    assert!(names.contains(&"bloom_keys".to_owned()), "{names:?}");
    let schema: i64 = conn
        .query_row(
            "SELECT value FROM bloom_store_meta WHERE name = 'schema'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(schema, SqliteStore::SCHEMA_VERSION);
}

/// A batch is one transaction: when SQLite refuses one of its keys (here a trigger the test
/// adds), none of the batch is committed and the history is unchanged.
#[test]
fn a_sqlite_batch_is_committed_whole_or_not_at_all() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("batch.sqlite");
    let store = SqliteStore::open(&path).unwrap();
    store.insert(b"before").unwrap();
    let head = store.head().unwrap();
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch(
            "CREATE TRIGGER refuse_poison BEFORE INSERT ON bloom_changes WHEN NEW.key = x'706f69736f6e'
             BEGIN SELECT RAISE(ABORT, 'poison'); END;",
        )
        .unwrap();
    let batch: [&[u8]; 3] = [b"a", b"poison", b"b"];
    assert!(matches!(
        store.insert_all(&batch),
        Err(bloom_store::SqliteStoreError::Sqlite(_))
    ));
    assert_eq!(store.head().unwrap(), head);
    assert_eq!(store.contains_each(&batch).unwrap(), [false, false, false]);
    assert_eq!(store.key_count().unwrap(), 1);
    // The store goes on: the same batch without the refused key commits.
    assert_eq!(store.insert_all(&[b"a", b"b"]).unwrap().len(), 2);
    assert_eq!(store.generation().unwrap().get(), 3);
}

/// An application's own `keys` table that happens to have schema 0's exact shape:
/// with `LegacyKeys::Ignore` the store lives beside it and never reads or drops it.
#[test]
fn a_table_shaped_like_0_1s_can_be_declared_the_applications() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.sqlite");
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch(
            "CREATE TABLE keys (seq INTEGER PRIMARY KEY AUTOINCREMENT, key BLOB NOT NULL UNIQUE);
             INSERT INTO keys (key) VALUES (CAST('appdata' AS BLOB));",
        )
        .unwrap();
    let store = SqliteStore::open_with(&path, bloom_store::LegacyKeys::Ignore).unwrap();
    assert_eq!(store.key_count().unwrap(), 0);
    assert!(!store.contains(b"appdata").unwrap());
    drop(store);
    // Bound to a store now: plain `open` works, and the app's table is still there.
    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(store.key_count().unwrap(), 0);
    drop(store);
    let kept: i64 = rusqlite::Connection::open(&path)
        .unwrap()
        .query_row("SELECT COUNT(*) FROM keys", [], |r| r.get(0))
        .unwrap();
    assert_eq!(kept, 1);
}
