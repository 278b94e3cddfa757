//! What every `PrimaryStore` promises, checked on both stores: identities, generations that
//! grow by one per new key (never for a duplicate), history digests, and the upgrade of a
//! database created by bloom-store 0.1.

mod support;

use bloom_store::{DatasetGeneration, PrimaryStore, SqliteStore, history};
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
        if new {
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

on_every_store!(
    generations_count_new_keys_only,
    identity_survives_reopening_and_backups_and_not_recreation,
);

/// A database written by bloom-store 0.1: `AUTOINCREMENT` with gaps left by duplicate
/// inserts, and no identity. It is upgraded in place on first open and keeps its keys and
/// their generations.
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
    let store = SqliteStore::open(&path).unwrap();
    let id = store.identity().unwrap();
    assert_eq!(store.key_count().unwrap(), 3);
    // The old generations (with the gap a duplicate left) are kept.
    assert_eq!(store.generation().unwrap().get(), 4);
    let g1 = history::after_insert(history::genesis(id), DatasetGeneration::new(1), b"a");
    let g3 = history::after_insert(g1, DatasetGeneration::new(3), b"b");
    assert_eq!(
        store.history_at(DatasetGeneration::new(1)).unwrap(),
        Some(g1)
    );
    assert_eq!(store.history_at(DatasetGeneration::new(2)).unwrap(), None);
    assert_eq!(
        store.history_at(DatasetGeneration::new(3)).unwrap(),
        Some(g3)
    );
    assert!(store.insert(b"d").unwrap());
    assert_eq!(store.generation().unwrap().get(), 5);
    drop(store);
    let again = SqliteStore::open(&path).unwrap();
    assert_eq!(again.identity().unwrap(), id, "upgraded once");
    assert_eq!(again.key_count().unwrap(), 4);
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
