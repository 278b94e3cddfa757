//! Every state transition of `FilteredStore`, on the in-memory and the SQLite store.

use std::path::Path;

use bloom_core::KeyEncoding;
use bloom_store::{
    BypassReason, FilterOptions, FilteredStore, Lookup, MemoryStore, Mode, OpenOutcome,
    PrimaryStore, SaltPolicy, SqliteStore, StoreError,
};

fn options() -> FilterOptions {
    FilterOptions::new(1_000, 0.01)
}

/// Runs `test` against a fresh store of each kind, with a snapshot path in a fresh directory.
fn for_each_store(test: impl Fn(&dyn DynStore, &Path)) {
    let dir = tempfile::tempdir().unwrap();
    test(&MemoryHolder::default(), &dir.path().join("memory.bloom"));
    let dir = tempfile::tempdir().unwrap();
    let sqlite = SqliteHolder(dir.path().join("keys.sqlite"));
    test(&sqlite, &dir.path().join("sqlite.bloom"));
}

/// Opens a wrapper, inserts `keys` and saves a snapshot that covers them.
fn populate(holder: &dyn DynStore, snapshot: &Path, keys: &[String]) {
    let (store, _) =
        FilteredStore::open_and_recover(holder.fresh(), options(), Some(snapshot)).unwrap();
    for k in keys {
        store.insert(k).unwrap();
    }
    store.save_snapshot(snapshot).unwrap();
}

/// Hands out stores that share their data across "restarts".
trait DynStore {
    fn fresh(&self) -> Shared;
}

#[derive(Default)]
struct MemoryHolder(std::sync::Arc<MemoryStore>);
struct SqliteHolder(std::path::PathBuf);

impl DynStore for MemoryHolder {
    fn fresh(&self) -> Shared {
        Shared::Memory(std::sync::Arc::clone(&self.0))
    }
}
impl DynStore for SqliteHolder {
    fn fresh(&self) -> Shared {
        Shared::Sqlite(SqliteStore::open(&self.0).unwrap())
    }
}

/// Either store, behind one type, so each test is written once.
enum Shared {
    Memory(std::sync::Arc<MemoryStore>),
    Sqlite(SqliteStore),
}

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct AnyError(String);

impl PrimaryStore for Shared {
    type Error = AnyError;
    fn contains(&self, key: &[u8]) -> Result<bool, AnyError> {
        match self {
            Self::Memory(s) => s.contains(key).map_err(|e| AnyError(e.to_string())),
            Self::Sqlite(s) => s.contains(key).map_err(|e| AnyError(e.to_string())),
        }
    }
    fn generation(&self) -> Result<u64, AnyError> {
        match self {
            Self::Memory(s) => s.generation().map_err(|e| AnyError(e.to_string())),
            Self::Sqlite(s) => s.generation().map_err(|e| AnyError(e.to_string())),
        }
    }
    fn keys_since(&self, after: u64, visit: &mut dyn FnMut(&[u8])) -> Result<u64, AnyError> {
        match self {
            Self::Memory(s) => s
                .keys_since(after, visit)
                .map_err(|e| AnyError(e.to_string())),
            Self::Sqlite(s) => s
                .keys_since(after, visit)
                .map_err(|e| AnyError(e.to_string())),
        }
    }
    fn insert(&self, key: &[u8]) -> Result<bool, AnyError> {
        match self {
            Self::Memory(s) => s.insert(key).map_err(|e| AnyError(e.to_string())),
            Self::Sqlite(s) => s.insert(key).map_err(|e| AnyError(e.to_string())),
        }
    }
}

fn keys(range: std::ops::Range<u32>) -> Vec<String> {
    range.map(|i| format!("record-{i}")).collect()
}

fn assert_all_present(store: &FilteredStore<Shared>, keys: &[String]) {
    for key in keys {
        assert_eq!(store.contains(key).unwrap(), Lookup::Present, "{key}");
    }
}

#[test]
fn no_snapshot_bypasses_then_rebuild_trusts() {
    for_each_store(|holder, snapshot| {
        let (store, outcome) =
            FilteredStore::open(holder.fresh(), options(), Some(snapshot)).unwrap();
        assert_eq!(outcome, OpenOutcome::NeedsRebuild(BypassReason::NoSnapshot));
        assert_eq!(store.mode(), Mode::Bypassed(BypassReason::NoSnapshot));
        assert_eq!(store.contains("x").unwrap(), Lookup::AbsentBypassed);
        assert!(matches!(
            store.save_snapshot(snapshot),
            Err(StoreError::NotTrusted(_))
        ));
        for k in keys(0..50) {
            assert!(store.insert(&k).unwrap());
        }
        assert!(!store.insert("record-0").unwrap());
        let report = store.rebuild().unwrap();
        assert_eq!((report.keys_scanned, report.generation), (50, 50));
        assert_eq!(store.mode(), Mode::Trusted);
        assert_all_present(&store, &keys(0..50));
        let absent: Vec<Lookup> = keys(1000..1200)
            .iter()
            .map(|k| store.contains(k).unwrap())
            .collect();
        assert!(
            absent
                .iter()
                .all(|l| matches!(l, Lookup::AbsentByFilter | Lookup::FalsePositive))
        );
        assert!(absent.contains(&Lookup::AbsentByFilter));
        let m = store.metrics();
        assert_eq!(m.queries, 1 + 50 + 200);
        assert_eq!(m.lookups_avoided + m.false_positives, 200);
        assert_eq!(m.store_lookups, 1 + 50 + m.false_positives);
    });
}

#[test]
fn same_generation_is_trusted_and_older_catches_up() {
    for_each_store(|holder, snapshot| {
        populate(holder, snapshot, &keys(0..30));

        let (store, outcome) =
            FilteredStore::open(holder.fresh(), options(), Some(snapshot)).unwrap();
        assert_eq!(outcome, OpenOutcome::Trusted);
        assert_all_present(&store, &keys(0..30));
        for k in keys(30..45) {
            store.insert(&k).unwrap();
        }
        drop(store); // no new snapshot: it is now 15 keys behind

        let (store, outcome) =
            FilteredStore::open(holder.fresh(), options(), Some(snapshot)).unwrap();
        assert_eq!(
            outcome,
            OpenOutcome::CaughtUp {
                from: 30,
                to: 45,
                keys: 15
            }
        );
        assert_eq!(store.mode(), Mode::Trusted);
        assert_all_present(&store, &keys(0..45));
    });
}

#[test]
fn snapshot_newer_than_the_store_is_bypassed_and_rebuilt() {
    for_each_store(|holder, snapshot| {
        populate(holder, snapshot, &keys(0..10));

        // The same snapshot against a different, smaller store (as after restoring a backup).
        let (store, outcome) =
            FilteredStore::open(fresh_store_with(&["only-this"]), options(), Some(snapshot))
                .unwrap();
        assert_eq!(
            outcome,
            OpenOutcome::NeedsRebuild(BypassReason::NewerThanStore {
                snapshot: 10,
                store: 1
            })
        );
        assert_eq!(store.contains("only-this").unwrap(), Lookup::Present);
        assert_eq!(store.contains("record-3").unwrap(), Lookup::AbsentBypassed);
        store.rebuild().unwrap();
        assert_eq!(store.mode(), Mode::Trusted);
        assert_eq!(store.contains("only-this").unwrap(), Lookup::Present);
    });
}

fn fresh_store_with(keys: &[&str]) -> Shared {
    let store = MemoryStore::new();
    for k in keys {
        store
            .insert(KeyEncoding::Nfc.encode_str(k).as_bytes())
            .unwrap();
    }
    Shared::Memory(std::sync::Arc::new(store))
}

#[test]
fn corrupt_and_incompatible_snapshots_are_bypassed_never_trusted() {
    for_each_store(|holder, snapshot| {
        let inserted = keys(0..200);
        populate(holder, snapshot, &inserted);
        let good = std::fs::read(snapshot).unwrap();

        // One flipped byte anywhere: bypass, correct answers, rebuild, correct answers.
        for at in [0, 9, 20, 60, good.len() / 2, good.len() - 1] {
            let mut bad = good.clone();
            bad[at] ^= 0x20;
            std::fs::write(snapshot, &bad).unwrap();
            let (store, outcome) =
                FilteredStore::open(holder.fresh(), options(), Some(snapshot)).unwrap();
            assert!(
                matches!(
                    outcome,
                    OpenOutcome::NeedsRebuild(BypassReason::Unreadable(_))
                ),
                "byte {at}: {outcome:?}"
            );
            assert_all_present(&store, &inserted);
            store.rebuild().unwrap();
            assert_all_present(&store, &inserted);
        }
        // Truncated.
        std::fs::write(snapshot, &good[..good.len() - 3]).unwrap();
        let (_, outcome) = FilteredStore::open(holder.fresh(), options(), Some(snapshot)).unwrap();
        assert!(matches!(
            outcome,
            OpenOutcome::NeedsRebuild(BypassReason::Unreadable(_))
        ));

        // Valid snapshot, but other rules than configured.
        std::fs::write(snapshot, &good).unwrap();
        for other in [
            FilterOptions {
                encoding: KeyEncoding::Utf8,
                ..options()
            },
            FilterOptions {
                rule: bloom_core::PositionRule::Sha256Split4,
                ..options()
            },
            FilterOptions {
                salt: SaltPolicy::Fixed(bloom_core::Salt::new(b"other").unwrap()),
                ..options()
            },
        ] {
            let (store, outcome) =
                FilteredStore::open(holder.fresh(), other, Some(snapshot)).unwrap();
            assert!(
                matches!(
                    outcome,
                    OpenOutcome::NeedsRebuild(BypassReason::Incompatible(_))
                ),
                "{outcome:?}"
            );
            assert_eq!(store.contains("record-7").unwrap(), Lookup::Present);
        }
    });
}

#[test]
fn store_errors_propagate_and_never_become_wrong_answers() {
    let memory = std::sync::Arc::new(MemoryStore::new());
    let (store, _) = FilteredStore::open_and_recover(
        Shared::Memory(std::sync::Arc::clone(&memory)),
        options(),
        None,
    )
    .unwrap();
    store.insert("kept").unwrap();
    memory.set_failing(true);
    assert!(matches!(store.insert("lost"), Err(StoreError::Store(_))));
    assert!(matches!(store.contains("kept"), Err(StoreError::Store(_))));
    assert!(matches!(store.rebuild(), Err(StoreError::Store(_))));
    assert_eq!(
        store.mode(),
        Mode::Trusted,
        "a failed growth rebuild keeps the trusted filter"
    );
    memory.set_failing(false);
    assert_eq!(store.contains("kept").unwrap(), Lookup::Present);
    // "lost" had its bits set before the failed commit: at worst a false positive.
    assert_eq!(store.contains("lost").unwrap(), Lookup::FalsePositive);
}

#[test]
fn a_filter_past_capacity_reports_it_and_a_rebuild_grows_it() {
    let (store, _) =
        FilteredStore::open_and_recover(fresh_store_with(&[]), FilterOptions::new(100, 0.01), None)
            .unwrap();
    for k in keys(0..400) {
        store.insert(&k).unwrap();
    }
    let before = store.metrics();
    assert!(before.over_capacity, "{before:?}");
    assert!(before.predicted_false_positive_rate > 0.05);
    let report = store.rebuild().unwrap();
    assert!(report.capacity >= 700, "{report:?}");
    let after = store.metrics();
    assert!(!after.over_capacity);
    assert!(after.bits > before.bits);
    assert!(after.predicted_false_positive_rate < 0.01);
    assert_all_present(&store, &keys(0..400));
}

#[test]
fn byte_keys_and_text_keys_share_one_encoding() {
    let (store, _) =
        FilteredStore::open_and_recover(fresh_store_with(&[]), options(), None).unwrap();
    store.insert("cafe\u{301}").unwrap();
    assert_eq!(store.contains("caf\u{e9}").unwrap(), Lookup::Present);
    assert_eq!(
        store.contains_bytes("caf\u{e9}".as_bytes()).unwrap(),
        Lookup::Present
    );
    assert!(matches!(
        store.contains_bytes(b"\xff"),
        Err(StoreError::Key(_))
    ));
}
