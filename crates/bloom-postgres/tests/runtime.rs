//! The blocking API inside an async runtime, and the bounded pool: connecting, every call
//! and dropping from inside tokio (current-thread and multi-thread) work as they do outside
//! it, and the store never opens more connections than it is allowed, waiting for a free one
//! instead, up to a typed error.

use std::sync::Arc;
use std::time::Duration;

use bloom_format::DatasetGeneration;
use bloom_postgres::testing::TempServer;
use bloom_postgres::{DEFAULT_NAMESPACE, PostgresStore, PostgresStoreError, Settings};
use bloom_store::{FilterOptions, FilteredStore, Lookup, PrimaryStore};

fn server_with(settings: &[(&str, &str)]) -> TempServer {
    let mut all = vec![("fsync", "off")];
    all.extend_from_slice(settings);
    TempServer::start_with(&all).expect("a PostgreSQL server (cargo xtask test installs it)")
}

fn runtimes() -> [(&'static str, tokio::runtime::Runtime); 2] {
    [
        (
            "current-thread",
            tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap(),
        ),
        (
            "multi-thread",
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .build()
                .unwrap(),
        ),
    ]
}

/// Every call of the store and of a wrapper over it, from an async task; then the drops.
async fn every_call(params: String, namespace: &str) {
    let config: bloom_postgres::postgres::Config = params.parse().unwrap();
    let store = PostgresStore::open(config, namespace, Settings::default()).unwrap();
    let identity = store.identity().unwrap();
    assert_eq!(store.insert(b"a").unwrap(), Some(DatasetGeneration::new(1)));
    assert_eq!(
        store.insert_all(&[b"b", b"a"]).unwrap(),
        [Some(DatasetGeneration::new(2)), None]
    );
    assert!(store.contains(b"a").unwrap());
    assert_eq!(store.contains_each(&[b"b", b"z"]).unwrap(), [true, false]);
    assert_eq!(store.head().unwrap().generation.get(), 2);
    assert!(
        store
            .history_at(DatasetGeneration::new(1))
            .unwrap()
            .is_some()
    );
    let mut keys = 0;
    store
        .keys_since(DatasetGeneration::ZERO, &mut |_| keys += 1)
        .unwrap();
    assert_eq!(keys, 2);
    let mut changes = 0;
    store
        .changes_since(DatasetGeneration::ZERO, &mut |_| changes += 1)
        .unwrap();
    assert_eq!(changes, 2);
    assert!(store.generation_of(b"b").is_ok());
    assert!(store.remove(b"b").unwrap().is_some());
    assert_eq!(store.key_count().unwrap(), 1);
    assert_eq!(store.verify_history().unwrap().generation.get(), 3);
    // A wrapper: its claim is taken (and its thread started) from the task too.
    let (seen, _) =
        FilteredStore::open_and_recover(&store, FilterOptions::new(1_000, 0.01)).unwrap();
    assert!(seen.insert("c").unwrap());
    assert_eq!(seen.contains("c").unwrap(), Lookup::Present);
    assert!(!seen.contains("never").unwrap().is_present());
    drop(seen);
    assert_eq!(store.identity().unwrap(), identity);
    // The idle connections close from the task as well.
    drop(store);
}

#[test]
fn the_blocking_api_works_and_drops_inside_either_runtime() {
    let server = server_with(&[]);
    for (flavour, runtime) in runtimes() {
        let params = server.params("postgres");
        let namespace = format!("in_{}", flavour.replace('-', "_"));
        runtime.block_on(every_call(params.clone(), &namespace));
        // In a spawned task too (on a worker thread, for the multi-thread flavour).
        let spawned = format!("{namespace}_task");
        runtime
            .block_on(async move {
                tokio::spawn(async move { every_call(params, &spawned).await }).await
            })
            .unwrap_or_else(|e| panic!("{flavour}: {e}"));
    }
}

#[test]
fn a_store_made_outside_a_runtime_is_used_and_dropped_inside_one() {
    let server = server_with(&[]);
    for (flavour, runtime) in runtimes() {
        let store = Arc::new(
            PostgresStore::connect_in(&server.params("postgres"), DEFAULT_NAMESPACE).unwrap(),
        );
        let inside = Arc::clone(&store);
        runtime.block_on(async move {
            inside.insert(flavour.as_bytes()).unwrap();
            assert!(inside.contains(flavour.as_bytes()).unwrap());
        });
        // The last handle goes inside the runtime.
        runtime.block_on(async move { drop(store) });
    }
}

/// A server that allows 8 sessions (with none reserved for superusers): 32 threads inserting
/// through a store allowed 4 connections never meet its limit, and every key is committed.
#[test]
fn the_pool_never_opens_more_than_its_bound() {
    let server = server_with(&[
        ("max_connections", "8"),
        ("superuser_reserved_connections", "0"),
    ]);
    let config: bloom_postgres::postgres::Config = server.params("postgres").parse().unwrap();
    let settings = Settings {
        max_connections: 4,
        ..Settings::default()
    };
    let store = PostgresStore::open(config, DEFAULT_NAMESPACE, settings).unwrap();
    std::thread::scope(|scope| {
        for thread in 0..32 {
            let store = &store;
            scope.spawn(move || {
                for i in 0..20 {
                    let key = format!("{thread}-{i}");
                    assert!(store.insert(key.as_bytes()).unwrap().is_some());
                    assert!(store.contains(key.as_bytes()).unwrap());
                }
            });
        }
    });
    assert_eq!(store.key_count().unwrap(), 32 * 20);
    // The server saw no more than the store's bound (and the one of this query).
    let mut client = server.client("postgres").unwrap();
    let open: i64 = client
        .query_one(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'bloom-postgres'",
            &[],
        )
        .unwrap()
        .get(0);
    assert!(open <= 4, "{open} sessions of the store");
}

/// With every connection busy (a writer waiting for the head another session holds), a
/// caller waits for the pool's timeout and gets `PoolExhausted`, not "unreachable"; once the
/// head is free, the writer commits.
#[test]
fn a_busy_pool_is_exhausted_not_unreachable() {
    let server = server_with(&[]);
    let config: bloom_postgres::postgres::Config = server.params("postgres").parse().unwrap();
    let settings = Settings {
        max_connections: 1,
        pool_timeout: Duration::from_millis(200),
        ..Settings::default()
    };
    let store = PostgresStore::open(config, DEFAULT_NAMESPACE, settings).unwrap();
    let mut holder = server.client("postgres").unwrap();
    let mut tx = holder.transaction().unwrap();
    tx.batch_execute("SELECT * FROM bloom.head FOR UPDATE")
        .unwrap();
    let (taking, taken) = std::sync::mpsc::channel();
    std::thread::scope(|scope| {
        let store = &store;
        let writer = scope.spawn(move || {
            taking.send(()).unwrap();
            store.insert(b"held")
        });
        taken.recv().unwrap();
        // The writer has (or is about to have) the one connection: a caller waits, then fails,
        // and an operator sees it (an event, and a count).
        let (waited, scrape, events) = bloom_testing::telemetry::observed(|| {
            for _ in 0..100 {
                match store.contains(b"x") {
                    Err(e @ PostgresStoreError::PoolExhausted { .. }) => return Some(e),
                    other => assert!(other.is_ok(), "{other:?}"),
                }
            }
            None
        });
        let error = waited.expect("the pool was exhausted while the writer waited");
        assert!(!error.is_connection(), "{error}");
        assert!(error.to_string().contains("max_connections"), "{error}");
        let exhausted = events
            .iter()
            .find(|e| e.message.contains("pool stayed exhausted"))
            .unwrap_or_else(|| panic!("{events:#?}"));
        assert_eq!(exhausted.level, tracing::Level::WARN);
        assert_eq!(exhausted.field("max_connections"), Some("1"));
        let timed_out = scrape.value(
            bloom_store::telemetry::names::POSTGRES_POOL_EXHAUSTED,
            &[("outcome", "timed_out")],
        );
        assert_eq!(timed_out, Some(1.0), "{}", scrape.0);
        tx.rollback().unwrap();
        assert!(writer.join().unwrap().unwrap().is_some());
    });
    assert!(store.contains(b"held").unwrap());
}

/// A server at its limit refuses a new connection with `ServerFull`, not `Unreachable`.
#[test]
fn a_full_server_is_not_unreachable() {
    let server = server_with(&[
        ("max_connections", "3"),
        ("superuser_reserved_connections", "0"),
    ]);
    let others: Vec<_> = (0..3).map(|_| server.client("postgres").unwrap()).collect();
    let error = PostgresStore::connect(&server.params("postgres")).unwrap_err();
    assert!(
        matches!(error, PostgresStoreError::ServerFull(_)),
        "{error:?}"
    );
    assert!(error.to_string().contains("max_connections"), "{error}");
    drop(others);
}

/// The store itself from async code: single keys from many tasks gathered into one
/// transaction, each task told whether its key was new.
#[test]
fn the_store_behind_coalesced_answers_tasks() {
    let server = server_with(&[]);
    let store = PostgresStore::connect(&server.params("postgres")).unwrap();
    let store = bloom_store::Coalesced::new(store).unwrap();
    let runtime = &runtimes()[1].1;
    let tasks: Vec<_> = (0..500)
        .map(|i| runtime.spawn(store.insert(format!("k{}", i % 400).as_bytes())))
        .collect();
    let new = tasks
        .into_iter()
        .map(|t| runtime.block_on(t).unwrap().unwrap())
        .filter(|&new| new)
        .count();
    assert_eq!(new, 400);
    assert_eq!(
        runtime.block_on(store.contains(&b"k7"[..])).unwrap(),
        Lookup::Present
    );
    assert_eq!(
        runtime.block_on(store.contains(&b"never"[..])).unwrap(),
        Lookup::AbsentBypassed
    );
    let count = runtime
        .block_on(store.run(|s| s.key_count()))
        .unwrap()
        .unwrap();
    assert_eq!(count, 400);
    assert_eq!(store.get().head().unwrap().generation.get(), 400);
}
