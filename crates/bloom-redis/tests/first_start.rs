//! A fleet's first start on an empty Redis: `open_or_create` makes the shared filter once,
//! builds it from the store, and every other process starting at the same moment waits and
//! attaches; none answers "absent" for a key committed before or during the start.

use std::sync::Barrier;
use std::time::Duration;

use bloom_core::{FilterConfig, FilterParams, KeyEncoding, Layout};
use bloom_redis::{SharedError, SharedFilteredStore, SharedOpen};
use bloom_store::{ClaimStatus, Coalesced, Lookup, PrimaryStore, SqliteStore};
use bloom_testing::redis::RedisServer;
use bloom_testing::wait::wait_for;

fn config(shards: u32) -> FilterConfig {
    let params = FilterParams::planned(Layout::sharded(shards).unwrap(), 20_000, 0.01).unwrap();
    FilterConfig::new(params).with_encoding(KeyEncoding::Nfc)
}

#[test]
fn eight_starting_at_once_create_the_filter_once_and_all_trust_it() {
    let server = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("records.sqlite");
    // Records committed before the fleet had a filter.
    let store = SqliteStore::open(&db).unwrap();
    let before: Vec<String> = (0..500).map(|i| format!("before-{i}")).collect();
    let keys: Vec<&[u8]> = before.iter().map(|k| k.as_bytes()).collect();
    store.insert_all(&keys).unwrap();
    drop(store);

    let start = Barrier::new(8);
    let opened: Vec<(SharedFilteredStore<SqliteStore>, SharedOpen)> = std::thread::scope(|scope| {
        let starts: Vec<_> = (0..8)
            .map(|_| {
                scope.spawn(|| {
                    let store = SqliteStore::open(&db).unwrap();
                    start.wait();
                    SharedFilteredStore::open_or_create_with_grace(
                        store,
                        server.target(),
                        "records",
                        config(8),
                        Duration::from_millis(100),
                    )
                    .unwrap()
                })
            })
            .collect();
        starts.into_iter().map(|s| s.join().unwrap()).collect()
    });
    let created: Vec<&SharedOpen> = opened
        .iter()
        .map(|(_, outcome)| outcome)
        .filter(|outcome| matches!(outcome, SharedOpen::Created { .. }))
        .collect();
    assert_eq!(created.len(), 1, "{opened:?}");
    assert!(
        matches!(created[0], SharedOpen::Created { taken: 500, .. }),
        "{:?}",
        created[0]
    );
    for (wrapper, outcome) in &opened {
        assert!(
            matches!(
                outcome,
                SharedOpen::Created { .. } | SharedOpen::Trusted { .. }
            ),
            "{outcome}"
        );
        assert!(wrapper.is_trusted());
    }
    // Every process answers the records committed before as present, and each sees the
    // others' new records.
    for (i, (wrapper, _)) in opened.iter().enumerate() {
        assert!(wrapper.insert(&format!("from-{i}")).unwrap());
    }
    for (wrapper, _) in &opened {
        for key in before.iter().step_by(7) {
            assert_eq!(wrapper.contains(key).unwrap(), Lookup::Present, "{key}");
        }
        for i in 0..8 {
            assert_eq!(
                wrapper.contains(&format!("from-{i}")).unwrap(),
                Lookup::Present
            );
        }
    }
    // A start after the first ones attaches, and a later open_or_create with another plan
    // is refused rather than answered from a filter it did not ask for.
    let late = SharedFilteredStore::open_or_create_with_grace(
        SqliteStore::open(&db).unwrap(),
        server.target(),
        "records",
        config(8),
        Duration::from_millis(100),
    )
    .unwrap();
    assert!(matches!(late.1, SharedOpen::Trusted { .. }), "{}", late.1);
    let other = SharedFilteredStore::open_or_create(
        SqliteStore::open(&db).unwrap(),
        server.target(),
        "records",
        config(4),
    );
    assert!(
        matches!(other, Err(SharedError::Create(_))),
        "{:?}",
        other.map(|(_, o)| o)
    );
}

/// Redis down at the first start: the wrapper opens bypassed (the store answers) and
/// refuses inserts it cannot set bits for; once Redis is back, the next insert creates the
/// filter from the store and goes through, and the wrapper trusts it.
#[test]
fn a_first_start_without_redis_creates_the_filter_when_redis_is_back() {
    let mut server = RedisServer::start();
    let target = server.target();
    server.kill();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("records.sqlite");
    let (seen, outcome) = SharedFilteredStore::open_or_create_with_grace(
        SqliteStore::open(&db).unwrap(),
        target,
        "records",
        config(8),
        Duration::from_millis(50),
    )
    .unwrap();
    assert!(matches!(outcome, SharedOpen::Bypassed(_)), "{outcome}");
    assert!(seen.insert("x").is_err());
    assert_eq!(seen.contains("x").unwrap(), Lookup::AbsentBypassed);
    server.restart_empty();
    assert!(seen.insert("x").unwrap());
    // The store's claim watcher judges the commit on its own thread when the store could not
    // take it for its own at once (the claim is unconfirmed, and lookups ask the store, until
    // then): waited for, as an event.
    wait_for("the claim watcher's verdict on the commit", || {
        seen.claim_status() == ClaimStatus::Held
    });
    assert!(seen.is_trusted());
    assert_eq!(seen.contains("x").unwrap(), Lookup::Present);
    // And after Redis restarts empty again, the same.
    server.restart_empty();
    assert!(seen.insert("y").is_ok());
    assert_eq!(seen.contains("x").unwrap(), Lookup::Present);
    assert_eq!(seen.contains("y").unwrap(), Lookup::Present);
}

/// A creation left unfinished (its creator killed after claiming the name) is taken for
/// abandoned after a minute: deleted and made again by the next start. (The test waits out
/// that minute.)
#[test]
fn an_abandoned_creation_is_made_again() {
    let server = RedisServer::start();
    // The name claimed and nothing else, as a creator killed at that moment leaves it.
    server.cli(&[
        "HSET",
        "bloom:{records}:meta",
        "creation",
        "00112233445566778899aabbccddeeff",
    ]);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("records.sqlite");
    let opened = SharedFilteredStore::open_or_create_with_grace(
        SqliteStore::open(&db).unwrap(),
        server.target(),
        "records",
        config(8),
        Duration::from_millis(50),
    );
    let (seen, outcome) = opened.unwrap();
    assert!(matches!(outcome, SharedOpen::Created { .. }), "{outcome}");
    assert!(seen.is_trusted());
    assert!(seen.insert("x").unwrap());
}

/// Many tasks of a service through `Coalesced`, on a multi-thread runtime: every key
/// committed with its bits, answered present by a second process.
#[test]
fn a_coalesced_shared_wrapper_answers_many_tasks() {
    let server = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("records.sqlite");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let (target, path) = (server.target(), db.clone());
    let (seen, outcome) = runtime
        .block_on(Coalesced::open(
            move || {
                SharedFilteredStore::open_or_create_with_grace(
                    SqliteStore::open(&path).map_err(SharedError::Store)?,
                    target,
                    "records",
                    config(8),
                    Duration::from_millis(50),
                )
            },
            bloom_store::coalesce::Options::default(),
        ))
        .unwrap();
    assert!(matches!(outcome, SharedOpen::Created { .. }), "{outcome}");
    let tasks: Vec<_> = (0..2_000)
        .map(|i| runtime.spawn(seen.insert(&format!("task-{}", i % 1_500))))
        .collect();
    let new = tasks
        .into_iter()
        .map(|t| runtime.block_on(t).unwrap().unwrap())
        .filter(|&new| new)
        .count();
    assert_eq!(new, 1_500);
    let (other, _) = SharedFilteredStore::open_or_create(
        SqliteStore::open(&db).unwrap(),
        server.target(),
        "records",
        config(8),
    )
    .unwrap();
    for i in (0..1_500).step_by(11) {
        assert_eq!(
            other.contains(&format!("task-{i}")).unwrap(),
            Lookup::Present
        );
    }
    let metrics = runtime.block_on(seen.run(|s| s.metrics())).unwrap();
    assert!(metrics.queries == 0, "{metrics:?}");
}
