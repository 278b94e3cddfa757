//! A filter on the master that Redis Sentinel names, through a failover: the Sentinels are
//! asked again when the master stops being one, and the filter's durability decides whether
//! the promoted replica is trusted.

use std::time::{Duration, Instant};

use bloom_core::{FilterConfig, FilterParams, Layout};
use bloom_redis::{Durability, RedisFilter, RedisFilterError, RedisTarget};
use bloom_testing::redis::{RedisServer, Sentinel};

const MASTER: &str = "fleet";

fn config() -> FilterConfig {
    FilterConfig::new(FilterParams::planned(Layout::sharded(8).unwrap(), 50_000, 0.01).unwrap())
}

fn encoded(filter: &RedisFilter, prefix: &str, n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            filter
                .config()
                .encoding()
                .encode_str(&format!("{prefix}-{i}"))
                .as_bytes()
                .to_vec()
        })
        .collect()
}

/// A master, a replica in sync with it, and a Sentinel that knows both.
fn watched() -> (RedisServer, RedisServer, Sentinel) {
    let master = RedisServer::start();
    let replica = RedisServer::start_with(&["--replicaof", "127.0.0.1", &master.port.to_string()]);
    let deadline = Instant::now() + Duration::from_secs(120);
    while !replica
        .cli(&["INFO", "replication"])
        .contains("master_link_status:up")
    {
        assert!(Instant::now() < deadline, "the replica never synced");
        std::thread::sleep(Duration::from_millis(20));
    }
    let sentinel = Sentinel::start(MASTER, master.port, 1);
    (master, replica, sentinel)
}

/// Asks the Sentinel to fail over, and waits until it names the replica, the replica is a
/// master and the old master follows it (events; the deadline bounds a hang).
fn fail_over(sentinel: &Sentinel, master: &RedisServer, replica: &RedisServer) {
    let reply = sentinel.cli(&["SENTINEL", "FAILOVER", MASTER]);
    assert!(reply.contains("OK"), "SENTINEL FAILOVER: {reply}");
    let deadline = Instant::now() + Duration::from_secs(120);
    while sentinel.master_port(MASTER) != Some(replica.port)
        || !replica
            .cli(&["INFO", "replication"])
            .contains("role:master")
        || !master.cli(&["INFO", "replication"]).contains("role:slave")
    {
        assert!(Instant::now() < deadline, "the failover did not finish");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn target(sentinel: &Sentinel) -> RedisTarget {
    RedisTarget::sentinel([sentinel.url()], MASTER).with_timeout(Duration::from_secs(20))
}

#[test]
fn a_failover_with_replica_acknowledged_writes_keeps_every_key_and_the_filter_verified() {
    let (master, replica, sentinel) = watched();
    let target = target(&sentinel);
    let filter = RedisFilter::create_with(
        &target,
        "orders",
        config(),
        Durability::Replicas {
            replicas: 1,
            timeout_ms: 10_000,
        },
    )
    .unwrap();
    let before = encoded(&filter, "before", 5_000);
    filter
        .insert_all(
            before
                .iter()
                .map(|k| bloom_core::EncodedKey::from_encoded(k.as_ref())),
        )
        .unwrap();

    fail_over(&sentinel, &master, &replica);

    // The same handle finds the new master through the Sentinel (its old connection was
    // closed, or its writes are refused as READONLY): every acknowledged key is there, and
    // the filter answers (the promoted replica had every write, WAIT said so).
    let deadline = Instant::now() + Duration::from_secs(60);
    let answers = loop {
        match filter.contains_each(
            before
                .iter()
                .map(|k| bloom_core::EncodedKey::from_encoded(k.as_ref())),
        ) {
            Ok(answers) => break answers,
            Err(e) if !e.is_unverified() && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => panic!("{e}"),
        }
    };
    assert!(answers.iter().all(|&maybe| maybe));
    // Writes go to the new master (a write in flight when the Sentinel closed the old
    // connections fails, and is made again, as a caller would), and a fresh process opens
    // the filter there.
    let after = encoded(&filter, "after", 2_000);
    let deadline = Instant::now() + Duration::from_secs(60);
    while let Err(e) = filter.insert_all(
        after
            .iter()
            .map(|k| bloom_core::EncodedKey::from_encoded(k.as_ref())),
    ) {
        assert!(!e.is_unverified() && Instant::now() < deadline, "{e}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let reopened = RedisFilter::open(&target, "orders").unwrap();
    let all: Vec<Vec<u8>> = before.iter().chain(&after).cloned().collect();
    assert!(
        reopened
            .contains_each(
                all.iter()
                    .map(|k| bloom_core::EncodedKey::from_encoded(k.as_ref()))
            )
            .unwrap()
            .iter()
            .all(|&m| m)
    );
    assert_eq!(
        replica.cli(&["EXISTS", "bloom:{orders}:meta"]).trim(),
        "1",
        "the filter lives on the promoted replica"
    );
}

#[test]
fn a_failover_without_durability_makes_the_filter_unverified_until_restored() {
    let (master, replica, sentinel) = watched();
    let target = target(&sentinel);
    let filter = RedisFilter::create(&target, "events", config()).unwrap();
    let keys = encoded(&filter, "event", 5_000);
    filter
        .insert_all(
            keys.iter()
                .map(|k| bloom_core::EncodedKey::from_encoded(k.as_ref())),
        )
        .unwrap();

    fail_over(&sentinel, &master, &replica);

    // Nothing said the replica had every write: the filter answers nothing.
    let deadline = Instant::now() + Duration::from_secs(60);
    let error = loop {
        match filter.contains_each(
            keys.iter()
                .map(|k| bloom_core::EncodedKey::from_encoded(k.as_ref())),
        ) {
            Err(e) if e.is_unverified() => break e,
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            Ok(answers) => panic!(
                "answered ({} of {} maybe) from a filter a failover may have cut short",
                answers.iter().filter(|&&m| m).count(),
                answers.len()
            ),
            Err(e) => panic!("{e}"),
        }
    };
    assert!(
        matches!(error, RedisFilterError::Unverified { .. }),
        "{error:?}"
    );
    // Every key added again: whole, and answering.
    filter.restore_whole(&keys, None).unwrap();
    assert!(
        filter
            .contains_each(
                keys.iter()
                    .map(|k| bloom_core::EncodedKey::from_encoded(k.as_ref()))
            )
            .unwrap()
            .iter()
            .all(|&m| m)
    );
}

/// The URL's database is the master's: the Sentinel (which has none) is never sent `SELECT`,
/// and the filter lives in that database of the master.
#[test]
fn the_urls_database_is_the_masters_not_the_sentinels() {
    let (master, _replica, sentinel) = watched();
    let url = format!("{}3", sentinel.url());
    let target = RedisTarget::sentinel([url], MASTER).with_timeout(Duration::from_secs(20));
    let filter = RedisFilter::create(&target, "in-db-3", config()).unwrap();
    filter.insert("k").unwrap();
    assert!(filter.contains("k").unwrap());
    let meta = bloom_redis::meta_key("in-db-3");
    assert_eq!(master.cli(&["-n", "3", "EXISTS", &meta]).trim(), "1");
    assert_eq!(master.cli(&["EXISTS", &meta]).trim(), "0");
    // A Sentinel that accepts and never answers, listed first: it gets its share of the
    // deadline, and the next Sentinel answers within the rest.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_url = format!(
        "redis://127.0.0.1:{}/3",
        silent.local_addr().unwrap().port()
    );
    let _held = std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in silent.incoming().flatten() {
            held.push(stream);
        }
    });
    let behind_a_silent_one =
        RedisTarget::sentinel([silent_url, format!("{}3", sentinel.url())], MASTER)
            .with_timeout(Duration::from_secs(20));
    let through = RedisFilter::open(&behind_a_silent_one, "in-db-3").unwrap();
    assert!(through.contains("k").unwrap());
    // A master no Sentinel knows: the target cannot serve now (exit 3 in the CLI), typed.
    let unknown =
        RedisTarget::sentinel([sentinel.url()], "nobody").with_timeout(Duration::from_secs(20));
    assert!(matches!(
        RedisFilter::open(&unknown, "in-db-3"),
        Err(RedisFilterError::Unavailable(_))
    ));
}
