//! The fleet path from async code, as a service would use it: the README's lines on an empty
//! Redis, and `Coalesced<SharedFilteredStore<PostgresStore>>` under thousands of concurrent
//! tasks while PostgreSQL crashes and Redis restarts empty. No committed key is ever reported
//! new or absent, nothing panics, and no task hangs past its deadline.

use std::collections::HashMap;
use std::time::Duration;

use bloom_core::{FilterConfig, FilterParams, Layout};
use bloom_postgres::PostgresStore;
use bloom_postgres::testing::TempServer;
use bloom_redis::{RedisTarget, SharedError, SharedFilteredStore, SharedOpen};
use bloom_store::coalesce::Options;
use bloom_store::{Coalesced, Lookup, PrimaryStore};
use bloom_testing::redis::RedisServer;

fn postgres() -> TempServer {
    TempServer::start_with(&[("fsync", "off")])
        .expect("a PostgreSQL server (cargo xtask test installs it)")
}

/// The README's fleet lines, on a fresh PostgreSQL and an empty Redis.
#[test]
fn the_readme_fleet_lines_run_on_an_empty_redis() -> Result<(), Box<dyn std::error::Error>> {
    let server = postgres();
    let redis = RedisServer::start();
    let (params, url) = (server.params("postgres"), redis.url());

    let store = PostgresStore::connect(&params)?; // schema `bloom`
    let target = RedisTarget::single(&url);
    let plan = FilterConfig::new(FilterParams::planned(
        Layout::sharded(16)?,
        10_000_000,
        0.01,
    )?);
    let (seen, opened) = SharedFilteredStore::open_or_create(store, target, "seen", plan)?;
    let new = seen.insert_all(["record-1", "record-2"])?; // bits in Redis, then one transaction

    assert!(matches!(opened, SharedOpen::Created { .. }), "{opened}");
    assert_eq!(new, [true, true]);
    assert!(seen.is_trusted());
    Ok(())
}

/// The README's async lines, in a tokio runtime (the same lines, but for the addresses).
#[test]
fn the_readme_async_lines_run_in_tokio() {
    let server = postgres();
    let redis = RedisServer::start();
    let (pg, url) = (server.params("postgres"), redis.url());
    let runtime = tokio::runtime::Builder::new_multi_thread().build().unwrap();
    let answered = runtime.block_on(async move {
        let params = pg;
        let target = RedisTarget::single(&url);
        let plan = FilterConfig::new(FilterParams::planned(
            Layout::sharded(16)?,
            10_000_000,
            0.01,
        )?);
        let kept = plan.clone();
        let (seen, _) = Coalesced::open(
            move || {
                let store = PostgresStore::connect(&params).map_err(SharedError::Store)?;
                SharedFilteredStore::open_or_create(store, target, "seen", kept)
            },
            Options::default(), // 4 workers, batches of up to 1,000 keys
        )
        .await?;
        let new = seen.insert("record-1").await?; // in a handler: seen.clone() per task
        let taken = seen.run(move |s| s.rebuild(plan)).await??; // anything else, off the runtime
        let again = seen.insert("record-1").await?;
        let found = seen.contains("record-1").await?;
        // The last handle dropped inside the runtime: the store closes on a worker.
        drop(seen);
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>((new, taken, again, found))
    });
    let (new, taken, again, found) = answered.unwrap();
    assert!(new);
    assert_eq!(taken.keys_scanned, 1);
    assert!(!again);
    assert_eq!(found, Lookup::Present);
}

fn plan() -> FilterConfig {
    FilterConfig::new(FilterParams::planned(Layout::sharded(8).unwrap(), 100_000, 0.01).unwrap())
}

/// What the tasks were told about a key.
#[derive(Default)]
struct Told {
    new: u32,
    /// Answered "absent" (by the filter or the store) after some insert of it succeeded.
    absent_after_commit: u32,
    inserted: bool,
}

/// 2,000 tasks at a time on a multi-thread runtime insert and look up keys (each key many
/// times) through one coalesced shared wrapper, while PostgreSQL is stopped as in a crash and
/// started again, and Redis restarts empty and the filter is rebuilt. Every task ends within
/// its deadline; no key is reported new twice, and none is reported absent once an insert of
/// it was acknowledged; at the end, every committed key is present and not new.
#[test]
fn two_thousand_tasks_through_crashes_never_see_a_committed_key_as_new() {
    let mut server = postgres();
    let mut redis = RedisServer::start();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    let (params, target) = (server.params("postgres"), redis.target());
    let (seen, _) = runtime
        .block_on(Coalesced::open(
            move || {
                let store = PostgresStore::connect(&params).map_err(SharedError::Store)?;
                SharedFilteredStore::open_or_create_with_grace(
                    store,
                    target,
                    "records",
                    plan(),
                    Duration::from_millis(100),
                )
            },
            Options::default(),
        ))
        .unwrap();
    let mut told: HashMap<String, Told> = HashMap::new();
    // One round: 2,000 tasks, each inserting a key (3,000 distinct over the run, so each is
    // inserted several times) and then looking it up.
    let round =
        |runtime: &tokio::runtime::Runtime, round: u32, told: &mut HashMap<String, Told>| {
            let tasks: Vec<_> = (0..2_000u32)
                .map(|i| {
                    let key = format!("k{}", (round * 2_000 + i * 7) % 3_000);
                    let seen = seen.clone();
                    runtime.spawn(async move {
                        let work = async {
                            let inserted = seen.insert(&key).await;
                            let found = seen.contains(&key).await;
                            (inserted, found)
                        };
                        let answered = tokio::time::timeout(Duration::from_secs(180), work).await;
                        (key, answered)
                    })
                })
                .collect();
            for task in tasks {
                let (key, answered) = runtime.block_on(task).expect("no task panicked");
                let (inserted, found) = answered.expect("every task answered within its deadline");
                let entry = told.entry(key).or_default();
                if let Ok(new) = inserted {
                    entry.new += u32::from(new);
                    entry.inserted = true;
                }
                if let Ok(found) = found
                    && entry.inserted
                    && !found.is_present()
                {
                    entry.absent_after_commit += 1;
                }
            }
        };
    round(&runtime, 0, &mut told);
    // PostgreSQL crashes with tasks in flight, and comes back.
    std::thread::scope(|scope| {
        let server = &mut server;
        let crash = scope.spawn(move || {
            server.stop_immediate().unwrap();
            server.start_again().unwrap();
        });
        round(&runtime, 1, &mut told);
        crash.join().unwrap();
    });
    round(&runtime, 2, &mut told);
    // Redis restarts empty with tasks in flight: inserts fail (no bits, no commit) and
    // lookups go to the store, until the filter is rebuilt.
    std::thread::scope(|scope| {
        let redis = &mut redis;
        let restart = scope.spawn(move || redis.restart_empty());
        round(&runtime, 3, &mut told);
        restart.join().unwrap();
    });
    round(&runtime, 4, &mut told);
    runtime
        .block_on(seen.run(|s| s.rebuild(plan())))
        .unwrap()
        .unwrap();
    round(&runtime, 5, &mut told);

    for (key, entry) in &told {
        assert!(entry.new <= 1, "{key} was reported new {} times", entry.new);
        assert_eq!(
            entry.absent_after_commit, 0,
            "{key} was reported absent after its commit"
        );
    }
    // Every key the store holds: present, and not new, through the same handle. (A key may be
    // committed without any task told it was new: its commit's acknowledgement was lost in
    // the crash, and the insert reported failed.)
    let mut committed = Vec::new();
    seen.get()
        .store()
        .keys_since(bloom_store::DatasetGeneration::ZERO, &mut |k| {
            committed.push(String::from_utf8(k.to_vec()).unwrap());
        })
        .unwrap();
    assert!(
        committed.len() > 1_000,
        "{} keys committed",
        committed.len()
    );
    for key in &committed {
        assert!(!runtime.block_on(seen.insert(key)).unwrap(), "{key}");
        assert_eq!(
            runtime.block_on(seen.contains(key)).unwrap(),
            Lookup::Present
        );
    }
}
