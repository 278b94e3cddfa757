//! A SQLite database replaced under a running `FilteredStore` is never answered for: another
//! file moved over it, the file deleted and made again (its lock too) with another wrapper
//! committing to it, a diverged copy written over it in place, the claim's lock removed.
//! From the moment of the change, no lookup is answered "absent" from the filter: the claim
//! is unconfirmed (every lookup asks the store, which refuses the replaced file), then lost
//! for good.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bloom_store::{
    BypassReason, ClaimStatus, FilterOptions, FilteredStore, Lookup, Mode, PrimaryStore,
    SqliteStore, SqliteStoreError, StoreError,
};

fn options() -> FilterOptions {
    FilterOptions::new(10_000, 0.01)
}

fn keys(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

/// A database in a directory of its own.
struct Db {
    dir: tempfile::TempDir,
}

impl Db {
    fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn db(&self) -> PathBuf {
        self.path("keys.sqlite")
    }

    /// A wrapper over the database, trusted, with `mine` committed through it.
    fn wrapper(&self, mine: &[String]) -> FilteredStore<SqliteStore> {
        let (w, _) =
            FilteredStore::open_and_recover(SqliteStore::open(self.db()).unwrap(), options())
                .unwrap();
        w.insert_all(mine).unwrap();
        assert!(matches!(w.mode(), Mode::Trusted));
        w
    }
}

/// Another store's database at `path`, holding `theirs`.
fn other_store(path: &Path, theirs: &[String]) {
    let store = SqliteStore::open(path).unwrap();
    let raw: Vec<&[u8]> = theirs.iter().map(String::as_bytes).collect();
    store.insert_all(&raw).unwrap();
}

/// Every one of `keys` is answered present or refused (an error): never "absent".
fn never_absent(w: &FilteredStore<SqliteStore>, keys: &[String]) {
    for key in keys {
        match w.contains(key.as_str()) {
            Ok(Lookup::Present) | Err(_) => {}
            Ok(other) => panic!("{key} answered {other:?} by a wrapper whose store was replaced"),
        }
    }
    if let Ok(answers) = w.contains_each(keys) {
        assert!(
            answers.iter().all(|a| *a == Lookup::Present),
            "a batch answered absent for a replaced store's keys"
        );
    }
}

/// Waits (a deadline bounds a hang only) until the wrapper's claim is lost, and checks that
/// the wrapper is bypassed for good and refuses to be trusted again.
fn lost_for_good(w: &FilteredStore<SqliteStore>, snapshot: &Path) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    let why = loop {
        if let ClaimStatus::Lost { why } = w.claim_status() {
            break why;
        }
        assert!(Instant::now() < deadline, "the claim was never lost");
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(
        matches!(w.mode(), Mode::Bypassed(BypassReason::ClaimLost { .. })),
        "{:?}",
        w.mode()
    );
    assert!(matches!(w.rebuild(), Err(StoreError::ClaimLost { .. })));
    assert!(!snapshot.exists());
    assert!(matches!(
        w.save_snapshot(snapshot),
        Err(StoreError::ClaimLost { .. })
    ));
    assert!(!snapshot.exists());
    why
}

#[test]
fn another_database_moved_over_the_open_one_is_never_answered_for() {
    let db = Db::new();
    let mine = keys("mine", 100);
    let w = db.wrapper(&mine);
    let theirs = keys("theirs", 500);
    other_store(&db.path("other.sqlite"), &theirs);
    std::fs::rename(db.path("other.sqlite"), db.db()).unwrap();
    // At once: no wait between the move and the lookups.
    never_absent(&w, &theirs);
    // The store refuses the file that is no longer the one it opened.
    assert!(matches!(
        w.insert("after"),
        Err(StoreError::Store(SqliteStoreError::Replaced { .. }))
    ));
    assert!(matches!(
        w.store().contains(b"mine-0"),
        Err(SqliteStoreError::Replaced { .. })
    ));
    let why = lost_for_good(&w, &db.path("keys.bloom"));
    assert!(why.contains("replaced"), "{why}");
    never_absent(&w, &theirs);
}

#[test]
fn a_database_deleted_and_made_again_under_a_running_wrapper_is_never_answered_for() {
    let db = Db::new();
    let w = db.wrapper(&keys("mine", 100));
    // The operator removes the database and everything beside it, lock included.
    for entry in std::fs::read_dir(db.dir.path()).unwrap() {
        std::fs::remove_file(entry.unwrap().path()).unwrap();
    }
    // Another wrapper makes it again and commits its keys.
    let theirs = keys("theirs", 500);
    let (second, _) =
        FilteredStore::open_and_recover(SqliteStore::open(db.db()).unwrap(), options()).unwrap();
    second.insert_all(&theirs).unwrap();
    never_absent(&w, &theirs);
    lost_for_good(&w, &db.path("keys.bloom"));
    never_absent(&w, &theirs);
    // The second one answers for its own store.
    assert_eq!(second.contains("theirs-7").unwrap(), Lookup::Present);
}

/// A copy of the store taken now, that goes its own way with `theirs` while the wrapper
/// moves on too: a diverged copy, same identity, another history.
fn diverged_copy(db: &Db, w: &FilteredStore<SqliteStore>, theirs: &[String]) -> PathBuf {
    let copy = db.path("copy.sqlite");
    rusqlite::Connection::open(db.db())
        .unwrap()
        .execute("VACUUM INTO ?1", [copy.to_str().unwrap()])
        .unwrap();
    other_store(&copy, theirs);
    w.insert_all(keys("later", 10)).unwrap();
    copy
}

#[test]
fn a_diverged_copy_written_over_the_open_file_in_place_is_never_answered_for() {
    // A database in rollback-journal mode, on the application's own connection: the copy
    // written over it reads cleanly, as the other store's history.
    let db = Db::new();
    let conn = rusqlite::Connection::open(db.db()).unwrap();
    conn.execute_batch("PRAGMA journal_mode = DELETE;").unwrap();
    let (w, _) =
        FilteredStore::open_and_recover(SqliteStore::from_connection(conn).unwrap(), options())
            .unwrap();
    w.insert_all(keys("mine", 100)).unwrap();
    let theirs = keys("theirs", 500);
    let copy = diverged_copy(&db, &w, &theirs);
    std::fs::write(db.db(), std::fs::read(&copy).unwrap()).unwrap();
    never_absent(&w, &theirs);
    let why = lost_for_good(&w, &db.path("keys.bloom"));
    // Judged once written (another history), or while it was being written (a file SQLite
    // reads torn: no store in it, or not a database): replaced either way.
    assert!(why.contains("replaced"), "{why}");
    never_absent(&w, &theirs);
}

#[test]
fn removing_the_claims_lock_loses_the_claim() {
    let db = Db::new();
    let w = db.wrapper(&keys("mine", 100));
    let mut lock = std::fs::canonicalize(db.db()).unwrap().into_os_string();
    lock.push("-bloom.lock");
    std::fs::remove_file(&lock).unwrap();
    // A second wrapper can claim the database now, and commits keys the first never saw.
    let theirs = keys("theirs", 200);
    let (second, _) =
        FilteredStore::open_and_recover(SqliteStore::open(db.db()).unwrap(), options()).unwrap();
    second.insert_all(&theirs).unwrap();
    never_absent(&w, &theirs);
    let why = lost_for_good(&w, &db.path("keys.bloom"));
    assert!(why.contains("lock"), "{why}");
}

#[test]
fn an_untouched_database_keeps_its_claim_through_other_programs_reads_and_writes() {
    let db = Db::new();
    let mine = keys("mine", 100);
    let w = db.wrapper(&mine);
    // Another program reads the file, and writes a table of its own beside the store's.
    let app = rusqlite::Connection::open(db.db()).unwrap();
    app.execute_batch("CREATE TABLE app_notes (note TEXT); INSERT INTO app_notes VALUES ('x');")
        .unwrap();
    drop(app);
    // The change is checked, and the claim holds again: the filter answers alone.
    let deadline = Instant::now() + Duration::from_secs(30);
    while w.claim_status() != ClaimStatus::Held {
        assert!(Instant::now() < deadline, "{:?}", w.claim_status());
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(matches!(w.mode(), Mode::Trusted));
    let absent = keys("never", 1_000);
    let answers = w.contains_each(&absent).unwrap();
    assert!(answers.contains(&Lookup::AbsentByFilter));
    for key in &mine {
        assert_eq!(w.contains(key.as_str()).unwrap(), Lookup::Present);
    }
}

/// `restore` (SQLite's backup API, as the `sqlite3` shell's `.restore` uses it) of `from`
/// into the database, on a connection that stays open: in WAL mode this writes the log only,
/// and the database file sees no event until that connection closes.
fn restore_live(db: &Db, from: &Path) -> rusqlite::Connection {
    let mut app = rusqlite::Connection::open(db.db()).unwrap();
    app.restore(
        rusqlite::MAIN_DB,
        from,
        None::<fn(rusqlite::backup::Progress)>,
    )
    .unwrap();
    app
}

#[test]
fn another_store_restored_into_the_open_database_through_sqlite_is_never_answered_for() {
    let db = Db::new();
    let w = db.wrapper(&keys("mine", 100));
    let theirs = keys("theirs", 500);
    other_store(&db.path("other.sqlite"), &theirs);
    let app = restore_live(&db, &db.path("other.sqlite"));
    // At once, with the restoring connection still open.
    never_absent(&w, &theirs);
    let why = lost_for_good(&w, &db.path("keys.bloom"));
    assert!(why.contains("another store"), "{why}");
    never_absent(&w, &theirs);
    drop(app);
}

#[test]
fn a_database_without_the_store_restored_over_it_is_replaced_not_retried() {
    let db = Db::new();
    let w = db.wrapper(&keys("mine", 100));
    let empty = db.path("empty.sqlite");
    rusqlite::Connection::open(&empty)
        .unwrap()
        .execute_batch("CREATE TABLE notes (note TEXT)")
        .unwrap();
    let app = restore_live(&db, &empty);
    let why = lost_for_good(&w, &db.path("keys.bloom"));
    assert!(why.contains("no store"), "{why}");
    // Calls fail at once with the reason, never with a wait that runs out.
    assert!(matches!(
        w.store().contains(b"mine-0"),
        Err(SqliteStoreError::Replaced { .. })
    ));
    drop(app);
}

#[test]
fn writes_behind_the_wrappers_back_are_asked_of_the_store_until_a_save_takes_them_in() {
    let db = Db::new();
    let ((), scrape, events) = bloom_testing::telemetry::observed(|| behind_the_back(&db));
    // An operator saw the filter stop answering alone, and why, then start again.
    let stopped = events
        .iter()
        .position(|e| e.message.contains("claim does not hold"))
        .unwrap_or_else(|| panic!("{events:#?}"));
    assert_eq!(events[stopped].level, tracing::Level::WARN);
    let reason = events[stopped].field("reason").unwrap();
    assert_eq!(reason, "claim_behind");
    assert_eq!(events[stopped].field("head"), Some("400"));
    assert!(
        events[stopped..]
            .iter()
            .any(|e| e.message.contains("claim holds again")),
        "{events:#?}"
    );
    let bypasses = scrape.value(
        bloom_store::telemetry::names::BYPASSES,
        &[("filter", "default"), ("reason", reason)],
    );
    assert_eq!(bypasses, Some(1.0), "{}", scrape.0);
    assert_eq!(
        scrape.of("default", bloom_store::telemetry::names::TRUSTED),
        1.0
    );
}

fn behind_the_back(db: &Db) {
    let w = db.wrapper(&keys("mine", 100));
    // Another program writes the store through its own handle, and stays open.
    let other_program = SqliteStore::open(db.db()).unwrap();
    let theirs = keys("theirs", 300);
    let raw: Vec<&[u8]> = theirs.iter().map(String::as_bytes).collect();
    other_program.insert_all(&raw).unwrap();
    // At once: the filter lacks their keys, and does not answer alone.
    never_absent(&w, &theirs);
    let deadline = Instant::now() + Duration::from_secs(30);
    let head = loop {
        match w.claim_status() {
            ClaimStatus::Behind { head } => break head,
            ClaimStatus::Lost { why } => panic!("lost: {why}"),
            _ => {}
        }
        assert!(Instant::now() < deadline, "{:?}", w.claim_status());
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(head.get(), 400);
    never_absent(&w, &theirs);
    // The store is still the store: the wrapper writes on.
    assert!(w.insert("after").unwrap());
    // A save takes the keys in, and the filter answers alone again.
    w.save_snapshot(db.path("keys.bloom")).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while w.claim_status() != ClaimStatus::Held {
        assert!(Instant::now() < deadline, "{:?}", w.claim_status());
        std::thread::sleep(Duration::from_millis(10));
    }
    for key in &theirs {
        assert_eq!(w.contains(key.as_str()).unwrap(), Lookup::Present);
    }
    let answers = w.contains_each(keys("never", 1_000)).unwrap();
    assert!(answers.contains(&Lookup::AbsentByFilter));
}
