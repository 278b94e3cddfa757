//! Stores that survive "restarts" and can have their history damaged the way an operator's
//! database can: lose its newest commits, be restored from a backup, be deleted.
//!
//! Every behaviour test runs once on `MemoryStore` and once on `SqliteStore` (a real database
//! file), through the `Harness` trait.

#![allow(dead_code, unreachable_pub)]

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use bloom_core::KeyEncoding;
use bloom_store::{FilterOptions, FilteredStore, Lookup, MemoryStore, PrimaryStore, SqliteStore};

/// Options used by most tests.
pub fn options() -> FilterOptions {
    FilterOptions::new(1_000, 0.01)
}

/// A database (in memory or on disk) that outlives the `FilteredStore`s opened over it.
pub trait Harness {
    /// A handle on the database, as a restarted process opens it.
    type Store: PrimaryStore;
    /// A saved copy of the database.
    type Backup;

    /// Opens the database.
    fn open(&self) -> Self::Store;
    /// Copies the database as it is now.
    fn backup(&self) -> Self::Backup;
    /// Replaces the database with a copy (a restore, or a power loss that lost every commit
    /// made after the copy).
    fn restore(&self, backup: &Self::Backup);
    /// Deletes the database; the next `open` creates a new, empty one.
    fn recreate(&self);
    /// Where its snapshot lives.
    fn snapshot(&self) -> &Path;
    /// A name for messages.
    fn name(&self) -> &'static str;
}

/// `MemoryStore` behind an `Arc`, swapped as a whole by restores.
pub struct Memory {
    store: Mutex<Arc<MemoryStore>>,
    dir: tempfile::TempDir,
    snapshot: PathBuf,
}

impl Memory {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let snapshot = dir.path().join("memory.bloom");
        Self {
            store: Mutex::new(Arc::new(MemoryStore::new())),
            dir,
            snapshot,
        }
    }
}

impl Harness for Memory {
    type Store = Arc<MemoryStore>;
    type Backup = MemoryStore;

    fn open(&self) -> Arc<MemoryStore> {
        Arc::clone(&self.store.lock().unwrap())
    }
    fn backup(&self) -> MemoryStore {
        (*self.store.lock().unwrap().as_ref()).clone()
    }
    fn restore(&self, backup: &MemoryStore) {
        *self.store.lock().unwrap() = Arc::new(backup.clone());
    }
    fn recreate(&self) {
        *self.store.lock().unwrap() = Arc::new(MemoryStore::new());
    }
    fn snapshot(&self) -> &Path {
        &self.snapshot
    }
    fn name(&self) -> &'static str {
        "memory"
    }
}

/// A SQLite database file; backups are made with `VACUUM INTO` and restored by replacing
/// the files, as an operator would.
pub struct Sqlite {
    dir: tempfile::TempDir,
    db: PathBuf,
    snapshot: PathBuf,
    backups: Mutex<u32>,
}

impl Sqlite {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("keys.sqlite");
        let snapshot = dir.path().join("keys.bloom");
        Self {
            dir,
            db,
            snapshot,
            backups: Mutex::new(0),
        }
    }

    pub fn db(&self) -> &Path {
        &self.db
    }

    fn remove_files(&self) {
        for suffix in ["", "-wal", "-shm"] {
            let mut path = self.db.clone().into_os_string();
            path.push(suffix);
            let _ = std::fs::remove_file(path);
        }
    }
}

impl Harness for Sqlite {
    type Store = SqliteStore;
    type Backup = PathBuf;

    fn open(&self) -> SqliteStore {
        SqliteStore::open(&self.db).unwrap()
    }
    fn backup(&self) -> PathBuf {
        let mut n = self.backups.lock().unwrap();
        *n += 1;
        let path = self.dir.path().join(format!("backup-{n}.sqlite"));
        let conn = rusqlite::Connection::open(&self.db).unwrap();
        conn.execute("VACUUM INTO ?1", [path.to_str().unwrap()])
            .unwrap();
        path
    }
    fn restore(&self, backup: &PathBuf) {
        self.remove_files();
        std::fs::copy(backup, &self.db).unwrap();
    }
    fn recreate(&self) {
        self.remove_files();
    }
    fn snapshot(&self) -> &Path {
        &self.snapshot
    }
    fn name(&self) -> &'static str {
        "sqlite"
    }
}

/// Runs a test against each kind of store.
#[macro_export]
macro_rules! on_every_store {
    ($($name:ident),+ $(,)?) => {$(
        mod $name {
            #[test]
            fn memory() {
                super::$name(&super::support::Memory::new());
            }
            #[test]
            fn sqlite() {
                super::$name(&super::support::Sqlite::new());
            }
        }
    )+};
}

/// Waits (a deadline only bounds a hang) until the wrapper's claim holds: its store's watcher
/// has judged the commits it made (most are accepted as they return; one caught mid-write is
/// judged by the watcher's thread), so that the filter answers alone again.
pub fn claim_held<S: PrimaryStore>(wrapper: &FilteredStore<S>) {
    bloom_testing::wait::wait_for("the claim holding again", || {
        wrapper.claim_status() == bloom_store::ClaimStatus::Held
    });
}

pub fn keys(range: std::ops::Range<u32>) -> Vec<String> {
    range.map(|i| format!("record-{i}")).collect()
}

/// Keys with a prefix, for histories that must not share keys.
pub fn named(prefix: &str, range: std::ops::Range<u32>) -> Vec<String> {
    range.map(|i| format!("{prefix}-{i}")).collect()
}

/// Commits `keys` through a wrapper over `store` (any mode).
pub fn insert_all<S: PrimaryStore>(store: &FilteredStore<S>, keys: &[String]) {
    for k in keys {
        store.insert(k).unwrap();
    }
}

/// Every key the store holds, as encoded bytes.
pub fn committed<S: PrimaryStore>(store: &S) -> Vec<Vec<u8>> {
    let mut keys = Vec::new();
    store
        .keys_since(bloom_store::DatasetGeneration::ZERO, &mut |k| {
            keys.push(k.to_vec())
        })
        .unwrap();
    keys
}

/// Asserts that every key the store holds is reported present; returns how many.
pub fn assert_every_committed_key_present<S: PrimaryStore>(wrapper: &FilteredStore<S>) -> usize {
    let keys = committed(wrapper.store());
    let mut absent = Vec::new();
    for key in &keys {
        let encoded = bloom_core::EncodedKey::from_encoded(key);
        let lookup = wrapper.contains(&encoded).unwrap();
        if lookup != Lookup::Present {
            absent.push(String::from_utf8_lossy(key).into_owned());
        }
    }
    assert!(
        absent.is_empty(),
        "{} of {} committed keys reported absent, first {:?}",
        absent.len(),
        keys.len(),
        absent.first()
    );
    keys.len()
}

/// A store holding only `keys`, encoded as the default options encode them.
pub fn memory_store_with(keys: &[&str]) -> MemoryStore {
    let store = MemoryStore::new();
    for k in keys {
        store
            .insert(KeyEncoding::Nfc.encode_str(k).as_bytes())
            .unwrap();
    }
    store
}
