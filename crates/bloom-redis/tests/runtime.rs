//! The blocking Redis API inside an async runtime: connecting, every call and dropping, from
//! a task of a current-thread and of a multi-thread tokio runtime, work as outside one (the
//! Redis client here has no runtime of its own to refuse it).

use std::time::Duration;

use bloom_core::{FilterConfig, FilterParams, KeyEncoding, Layout};
use bloom_redis::{Durability, RedisFilter, SharedFilteredStore, SharedOpen};
use bloom_store::{Lookup, SqliteStore};
use bloom_testing::redis::RedisServer;

fn config() -> FilterConfig {
    let params = FilterParams::planned(Layout::sharded(4).unwrap(), 10_000, 0.01).unwrap();
    FilterConfig::new(params).with_encoding(KeyEncoding::Nfc)
}

async fn every_call(target: bloom_redis::RedisTarget, db: std::path::PathBuf, name: String) {
    let filter =
        RedisFilter::open_or_create(&target, &format!("{name}-f"), config(), Durability::None)
            .unwrap();
    filter.insert("a").unwrap();
    assert!(filter.contains("a").unwrap());
    assert_eq!(filter.contains_each(["a", "b"]).unwrap(), [true, false]);
    filter.check_shards().unwrap();
    drop(filter);
    let (seen, opened) = SharedFilteredStore::open_or_create_with_grace(
        SqliteStore::open(&db).unwrap(),
        target.clone(),
        &name,
        config(),
        Duration::from_millis(20),
    )
    .unwrap();
    assert!(matches!(opened, SharedOpen::Created { .. }), "{opened}");
    assert!(seen.insert("k").unwrap());
    assert_eq!(seen.insert_all(["k", "l"]).unwrap(), [false, true]);
    assert_eq!(seen.contains("k").unwrap(), Lookup::Present);
    assert!(!seen.contains("never").unwrap().is_present());
    assert_eq!(seen.rebuild(config()).unwrap().keys_scanned, 2);
    assert!(seen.metrics().trusted);
    drop(seen);
    assert!(RedisFilter::delete(&target, &name).unwrap());
}

#[test]
fn the_blocking_api_works_and_drops_inside_either_runtime() {
    let server = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let runtimes = [
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap(),
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .build()
            .unwrap(),
    ];
    for (i, runtime) in runtimes.iter().enumerate() {
        let db = dir.path().join(format!("{i}.sqlite"));
        runtime.block_on(every_call(server.target(), db.clone(), format!("in-{i}")));
        let spawned = dir.path().join(format!("{i}-task.sqlite"));
        let target = server.target();
        runtime
            .block_on(async move {
                tokio::spawn(async move { every_call(target, spawned, format!("task-{i}")).await })
                    .await
            })
            .unwrap();
        drop(db);
    }
}

/// A `RedisFilter` from async code: its calls on the offloading workers, awaited by tasks.
#[test]
fn a_redis_filter_is_used_from_tasks_through_offloaded() {
    use bloom_store::coalesce::{Offloaded, Options};
    let server = RedisServer::start();
    let filter =
        RedisFilter::open_or_create(&server.target(), "offloaded", config(), Durability::None)
            .unwrap();
    let filter = Offloaded::new(filter, Options::default()).unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let tasks: Vec<_> = (0..100)
        .map(|i| {
            let filter = filter.clone();
            runtime.spawn(async move {
                let key = format!("k{i}");
                let moved = key.clone();
                filter
                    .run(move |f| f.insert(&moved))
                    .await
                    .unwrap()
                    .unwrap();
                filter
                    .run(move |f| f.contains(&key))
                    .await
                    .unwrap()
                    .unwrap()
            })
        })
        .collect();
    for task in tasks {
        assert!(runtime.block_on(task).unwrap());
    }
    assert!(filter.get().contains("k7").unwrap());
}
