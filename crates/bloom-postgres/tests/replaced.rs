//! A PostgreSQL store replaced under a running `FilteredStore` is never answered for: the
//! database dropped (`WITH (FORCE)`) and made again, its schema replaced, a diverged copy
//! put back with `pg_restore --clean`, the database renamed and another renamed into its
//! place. Another wrapper commits keys into the new store; the first one never answers
//! "absent" for them, and its claim is lost for good.

use std::path::Path;
use std::time::{Duration, Instant};

use bloom_postgres::testing::TempServer;
use bloom_postgres::{PostgresStore, PostgresStoreError};
use bloom_store::{
    BypassReason, ClaimStatus, FilterOptions, FilteredStore, Lookup, Mode, PrimaryStore, StoreError,
};

fn server() -> TempServer {
    TempServer::start_with(&[("fsync", "off")]).expect("a PostgreSQL server (see INSTALL_HINT)")
}

fn options() -> FilterOptions {
    FilterOptions::new(10_000, 0.01)
}

fn keys(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

type Wrapper = FilteredStore<PostgresStore>;

/// A trusted wrapper over the store in `database`, with `mine` committed through it.
fn wrapper(server: &TempServer, database: &str, mine: &[String]) -> Wrapper {
    let store = PostgresStore::connect(&server.params(database)).unwrap();
    let (w, _) = FilteredStore::open_and_recover(store, options()).unwrap();
    w.insert_all(mine).unwrap();
    assert!(matches!(w.mode(), Mode::Trusted));
    assert_eq!(w.claim_status(), ClaimStatus::Held);
    w
}

/// Another wrapper over the store now in `database` commits `theirs`, and is dropped.
fn commit_elsewhere(server: &TempServer, database: &str, theirs: &[String]) {
    let store = PostgresStore::connect(&server.params(database)).unwrap();
    let (other, _) = FilteredStore::open_and_recover(store, options()).unwrap();
    other.insert_all(theirs).unwrap();
}

/// Every one of `keys` is answered present or refused (an error): never "absent".
fn never_absent(w: &Wrapper, keys: &[String]) {
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

/// Waits (a deadline bounds a hang only) until the claim is lost, and checks that the
/// wrapper is bypassed for good: the store refuses, a rebuild refuses, no snapshot is
/// written.
fn lost_for_good(w: &Wrapper, dir: &Path) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    let why = loop {
        // A lookup makes the store look (a new connection finds another store).
        let _ = w.contains("probe");
        if let ClaimStatus::Lost { why } = w.claim_status() {
            break why;
        }
        assert!(Instant::now() < deadline, "the claim was never lost");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(
        matches!(w.mode(), Mode::Bypassed(BypassReason::ClaimLost { .. })),
        "{:?}",
        w.mode()
    );
    assert!(matches!(w.rebuild(), Err(StoreError::ClaimLost { .. })));
    let snapshot = dir.join("lost.bloom");
    assert!(matches!(
        w.save_snapshot(&snapshot),
        Err(StoreError::ClaimLost { .. })
    ));
    assert!(!snapshot.exists());
    assert!(matches!(
        w.store().contains(b"mine-0"),
        Err(PostgresStoreError::Replaced { .. } | PostgresStoreError::ClaimLost { .. })
    ));
    why
}

#[test]
fn a_database_dropped_and_made_again_is_never_answered_for() {
    let server = server();
    server.create_database("app").unwrap();
    let w = wrapper(&server, "app", &keys("mine", 100));
    server.drop_database("app").unwrap();
    server.create_database("app").unwrap();
    let theirs = keys("theirs", 500);
    commit_elsewhere(&server, "app", &theirs);
    never_absent(&w, &theirs);
    let why = lost_for_good(&w, server.dir());
    assert!(why.contains("another store"), "{why}");
    never_absent(&w, &theirs);
}

#[test]
fn a_schema_replaced_under_a_running_wrapper_is_never_answered_for() {
    let server = server();
    server.create_database("app").unwrap();
    let w = wrapper(&server, "app", &keys("mine", 100));
    // The claim holds the store's tables: the drop waits until the claim has stopped
    // answering from its filter and let them go.
    server
        .client("app")
        .unwrap()
        .batch_execute("DROP SCHEMA bloom CASCADE")
        .unwrap();
    assert_ne!(w.claim_status(), ClaimStatus::Held);
    let theirs = keys("theirs", 500);
    commit_elsewhere(&server, "app", &theirs);
    never_absent(&w, &theirs);
    let why = lost_for_good(&w, server.dir());
    assert!(why.contains("another store"), "{why}");
}

/// A copy of the store in `app`, taken now into `copy`, that goes its own way with
/// `theirs`: same identity, another history. Returns an archive of it.
fn diverged_copy(server: &TempServer, theirs: &[String]) -> std::path::PathBuf {
    let plain = server.dir().join("app.sql");
    server.dump("app", &plain).unwrap();
    server.create_database("copy").unwrap();
    server.restore("copy", &plain).unwrap();
    commit_elsewhere(server, "copy", theirs);
    let archive = server.dir().join("copy.dump");
    server.dump_archive("copy", &archive).unwrap();
    archive
}

#[test]
fn a_diverged_copy_restored_with_pg_restore_clean_is_never_answered_for() {
    let server = server();
    server.create_database("app").unwrap();
    let w = wrapper(&server, "app", &keys("mine", 100));
    let theirs = keys("theirs", 500);
    let archive = diverged_copy(&server, &theirs);
    // This wrapper's history moves on too.
    w.insert_all(keys("later", 10)).unwrap();
    // Restored over the live database, tables dropped and made again, under the wrapper.
    server.restore_clean("app", &archive).unwrap();
    never_absent(&w, &theirs);
    let why = lost_for_good(&w, server.dir());
    assert!(why.contains("history"), "{why}");
    never_absent(&w, &theirs);
}

#[test]
fn a_database_renamed_away_and_another_renamed_into_its_place_is_never_answered_for() {
    let server = server();
    server.create_database("app").unwrap();
    let w = wrapper(&server, "app", &keys("mine", 100));
    let theirs = keys("theirs", 500);
    diverged_copy(&server, &theirs);
    w.insert_all(keys("later", 10)).unwrap();
    // A rename needs the database to itself: the operator ends its sessions first (the
    // wrapper's claim among them), and tries again if one came back in between.
    let mut admin = server.client("postgres").unwrap();
    for (from, to) in [("app", "app_old"), ("copy", "app")] {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let renamed = admin.batch_execute(&format!(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{from}';
                 ALTER DATABASE {from} RENAME TO {to}"
            ));
            if renamed.is_ok() {
                break;
            }
            assert!(Instant::now() < deadline, "{renamed:?}");
        }
    }
    never_absent(&w, &theirs);
    let why = lost_for_good(&w, server.dir());
    assert!(why.contains("history"), "{why}");
    never_absent(&w, &theirs);
}

#[test]
fn a_store_left_alone_keeps_its_claim_through_a_restart_and_other_sessions_reads() {
    let mut server = server();
    let w = wrapper(&server, "postgres", &keys("mine", 100));
    // Another session reads the tables (a dump takes them shared): nothing to yield to.
    let plain = server.dir().join("all.sql");
    server.dump("postgres", &plain).unwrap();
    assert_eq!(w.claim_status(), ClaimStatus::Held);
    // A restart ends the claim's session; the next call takes it again, on the same store.
    server.stop().unwrap();
    server.start_again().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while w.insert("after").is_err() {
        assert!(Instant::now() < deadline);
    }
    assert_eq!(w.claim_status(), ClaimStatus::Held);
    assert!(matches!(w.mode(), Mode::Trusted));
    let answers = w.contains_each(keys("never", 1_000)).unwrap();
    assert!(answers.contains(&Lookup::AbsentByFilter));
    assert_eq!(w.store().head().unwrap().generation.get(), 101);
}

/// Waits (a deadline bounds a hang only) until the claim no longer holds.
fn no_longer_held(w: &Wrapper) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while w.claim_status() == ClaimStatus::Held {
        assert!(Instant::now() < deadline, "the claim still holds");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_schema_renamed_away_and_another_renamed_into_its_place_is_never_answered_for() {
    let server = server();
    server.create_database("app").unwrap();
    let w = wrapper(&server, "app", &keys("mine", 100));
    // Another store in a schema of its own, with keys of its own.
    let theirs = keys("theirs", 500);
    {
        let store = PostgresStore::connect_in(&server.params("app"), "other").unwrap();
        let (other, _) = FilteredStore::open_and_recover(store, options()).unwrap();
        other.insert_all(&theirs).unwrap();
    }
    // Renames take no lock on the tables the claim holds: the claim sees that the store's
    // names lead elsewhere at its next look (every 0.2 s).
    server
        .client("app")
        .unwrap()
        .batch_execute("ALTER SCHEMA bloom RENAME TO bloom_old; ALTER SCHEMA other RENAME TO bloom")
        .unwrap();
    no_longer_held(&w);
    never_absent(&w, &theirs);
    let why = lost_for_good(&w, server.dir());
    assert!(why.contains("another store"), "{why}");
    never_absent(&w, &theirs);
}

#[test]
fn writes_behind_the_wrappers_back_are_asked_of_the_store_until_a_save_takes_them_in() {
    let server = server();
    server.create_database("app").unwrap();
    let w = wrapper(&server, "app", &keys("mine", 100));
    // Another program writes the store through its own handle.
    let theirs = keys("theirs", 300);
    let other = PostgresStore::connect(&server.params("app")).unwrap();
    let raw: Vec<&[u8]> = theirs.iter().map(String::as_bytes).collect();
    other.insert_all(&raw).unwrap();
    // The claim checks the store again when someone waits for its tables (a dump here,
    // which takes them shared, does not; a DDL statement does): it finds history it never
    // saw, and falls behind instead of answering for keys its filter lacks.
    server
        .client("app")
        .unwrap()
        .batch_execute("BEGIN; LOCK TABLE bloom.head IN ACCESS EXCLUSIVE MODE; ROLLBACK")
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
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
    assert!(w.insert("after").unwrap());
    w.save_snapshot(server.dir().join("app.bloom")).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while w.claim_status() != ClaimStatus::Held {
        assert!(Instant::now() < deadline, "{:?}", w.claim_status());
        std::thread::sleep(Duration::from_millis(10));
    }
    for key in &theirs {
        assert_eq!(w.contains(key.as_str()).unwrap(), Lookup::Present);
    }
    let absent = keys("never", 1_000);
    assert!(
        w.contains_each(&absent)
            .unwrap()
            .contains(&Lookup::AbsentByFilter)
    );
}
