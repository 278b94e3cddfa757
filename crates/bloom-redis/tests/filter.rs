//! A Redis-held filter against a real `redis-server`: the same answers and the same snapshot
//! bytes as a local filter, strict metadata, and lost state never answered from.

use std::time::{Duration, Instant};

use bloom_core::{
    BloomFilter, Filter, FilterConfig, FilterParams, KeyEncoding, Layout, PositionRule, Salt,
};
use bloom_format::{DecodeOptions, Snapshot};
use bloom_redis::{RedisFilter, RedisFilterError, RedisTarget, shard_key};
use bloom_testing::redis::RedisServer;
#[cfg(unix)]
use rustix::process::Signal;

fn config(shards: u32, items: u64) -> FilterConfig {
    let params = FilterParams::planned(Layout::sharded(shards).unwrap(), items, 0.01).unwrap();
    FilterConfig::new(params)
}

fn keys(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

#[test]
fn answers_and_snapshots_equal_a_local_filter() {
    let server = RedisServer::start();
    let target = server.target();
    let dir = tempfile::tempdir().unwrap();
    for (name, config) in [
        ("plain", config(16, 10_000)),
        (
            "salted",
            config(5, 10_000)
                .with_rule(PositionRule::Sha256Double)
                .unwrap()
                .with_salt(Salt::new(b"shared-salt").unwrap())
                .unwrap()
                .with_encoding(KeyEncoding::NfcTrimLowercase),
        ),
    ] {
        let redis = RedisFilter::create(&target, name, config.clone()).unwrap();
        let mut local = BloomFilter::new(config).unwrap();
        let inserted = keys("record", 10_000);
        // Batched, then one at a time (and a repeat, which changes nothing).
        let encoded: Vec<Vec<u8>> = inserted[..9_000]
            .iter()
            .map(|k| redis.config().encoding().encode_str(k).as_bytes().to_vec())
            .collect();
        let changed = redis
            .insert_all(
                encoded
                    .iter()
                    .map(|k| bloom_core::EncodedKey::from_encoded(k.as_ref())),
            )
            .unwrap();
        for key in &inserted[9_000..] {
            redis.insert(key).unwrap();
        }
        assert!(!redis.insert(&inserted[0]).unwrap());
        local.insert_all(&inserted);
        assert!(changed > 8_900, "{changed}");

        let probes: Vec<String> = inserted
            .iter()
            .cloned()
            .chain(keys("absent", 10_000))
            .collect();
        let encoded: Vec<Vec<u8>> = probes
            .iter()
            .map(|k| redis.config().encoding().encode_str(k).as_bytes().to_vec())
            .collect();
        let from_redis = redis
            .contains_each(
                encoded
                    .iter()
                    .map(|k| bloom_core::EncodedKey::from_encoded(k.as_ref())),
            )
            .unwrap();
        let from_local: Vec<bool> = local.contains_each(&probes).collect();
        assert_eq!(from_redis, from_local, "{name}");
        assert!(from_redis[..10_000].iter().all(|&b| b));
        let false_positives = from_redis[10_000..].iter().filter(|&&b| b).count();
        assert!(false_positives < 200, "{false_positives}");

        // Export is the local filter's snapshot, byte for byte; import then export again
        // gives the same bytes.
        let exported = dir.path().join(format!("{name}.bloom"));
        redis.export(&exported).unwrap();
        let bytes = std::fs::read(&exported).unwrap();
        assert!(bytes == local.to_snapshot(0).encode().to_vec(), "{name}");
        let copy = RedisFilter::import(&target, &format!("{name}-copy"), &exported).unwrap();
        let again = dir.path().join(format!("{name}-again.bloom"));
        copy.export(&again).unwrap();
        assert!(std::fs::read(&again).unwrap() == bytes, "{name}");
        let info = copy.info().unwrap();
        assert_eq!(info.set_bits, local.count_ones());
        let restored = BloomFilter::from_snapshot(
            &Snapshot::decode(bytes, &DecodeOptions::unlimited()).unwrap(),
        )
        .unwrap();
        assert!(restored.contains(&inserted[1234]));
    }
}

#[test]
fn metadata_is_checked_and_never_guessed() {
    let server = RedisServer::start();
    let target = server.target();
    assert!(matches!(
        RedisFilter::open(&target, "missing"),
        Err(RedisFilterError::NotFound { .. })
    ));
    for bad in ["", "a b", "x{y}", "a:b", &"n".repeat(201)] {
        assert!(matches!(
            RedisFilter::create(&target, bad, config(2, 100)),
            Err(RedisFilterError::InvalidName { .. })
        ));
    }
    let unsharded = FilterConfig::new(FilterParams::new(1024, 3).unwrap());
    assert!(matches!(
        RedisFilter::create(&target, "flat", unsharded),
        Err(RedisFilterError::NotSharded { .. })
    ));
    RedisFilter::create(&target, "f", config(4, 1000)).unwrap();
    assert!(matches!(
        RedisFilter::create(&target, "f", config(4, 1000)),
        Err(RedisFilterError::AlreadyExists { .. })
    ));
    let meta = bloom_redis::meta_key("f");
    for (field, value, expected) in [
        ("bits", "12345", "Invalid"),
        // Shards of 1 GiB: past what Redis holds per key, so no creation wrote it; a damaged
        // filter (exit 1 in the CLI), not a usage error.
        ("bits", "34359738368", "Metadata"),
        ("rule", "guava-mitz64", "Invalid"),
        ("rule", "sha256-split4", "Config"),
        ("rule", "sha512", "Metadata"),
        ("schema", "bloom-redis/9", "Metadata"),
        ("shards", "0", "Invalid"),
        ("hashes", "-1", "Metadata"),
        ("encoding", "nfc-tomorrow", "Metadata"),
        ("salt", "zz", "Metadata"),
        ("state", "building", "NotReady"),
        ("layout", "standard", "Metadata"),
    ] {
        let original = server.cli(&["HGET", &meta, field]);
        server.cli(&["HSET", &meta, field, value]);
        let result = RedisFilter::open(&target, "f");
        let kind = match &result {
            Err(RedisFilterError::Invalid { .. }) => "Invalid",
            Err(RedisFilterError::Metadata { .. }) => "Metadata",
            Err(RedisFilterError::NotReady { .. }) => "NotReady",
            Err(RedisFilterError::Config { .. }) => "Config",
            other => panic!("{field}={value}: {other:?}"),
        };
        assert_eq!(kind, expected, "{field}={value}: {result:?}");
        server.cli(&["HSET", &meta, field, original.trim_end()]);
    }
    RedisFilter::open(&target, "f").unwrap();
    assert!(RedisFilter::delete(&target, "f").unwrap());
    assert!(!RedisFilter::delete(&target, "f").unwrap());
}

#[test]
fn a_plan_is_recorded_beside_the_filter_checked_and_exported() {
    let server = RedisServer::start();
    let target = server.target();
    let planned = config(4, 1000).with_plan(bloom_core::Plan::new(1000, 0.01));
    let filter = RedisFilter::create(&target, "p", planned).unwrap();
    filter.insert_all(keys("k", 300)).unwrap();
    let opened = RedisFilter::open(&target, "p").unwrap();
    assert_eq!(opened.config().plan(), bloom_core::Plan::new(1000, 0.01));
    let info = opened.info().unwrap();
    let capacity = info.capacity.unwrap();
    assert_eq!((capacity.items, capacity.remaining()), (300, 700));
    assert!(!capacity.is_over());
    // The export is a version 3 snapshot with the plan, judged alike by `bloom inspect`.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.bloom");
    let header = opened.export(&path).unwrap();
    assert_eq!(header.plan, bloom_core::Plan::new(1000, 0.01));
    // The plan is not part of the markers: an open with a config of no plan still matches.
    RedisFilter::open_or_create(&target, "p", config(4, 1000), bloom_redis::Durability::None)
        .unwrap();
    // Damaged plan fields are refused by name, never guessed.
    let meta = bloom_redis::meta_key("p");
    for (capacity, rate) in [
        ("1000", ""),
        ("", "0.01"),
        ("0", "0.01"),
        ("1000", "1.5"),
        ("1000", "0"),
        ("1000", "NaN"),
        ("1000", "0.0100"),
        ("01000", "0.01"),
        ("-5", "0.01"),
    ] {
        server.cli(&["HSET", &meta, "capacity", capacity, "target_fpr", rate]);
        let result = RedisFilter::open(&target, "p");
        assert!(
            matches!(result, Err(RedisFilterError::Metadata { .. })),
            "{capacity:?} {rate:?}: {result:?}"
        );
    }
    // Both empty: a filter without a plan (as filters made before plans were recorded).
    server.cli(&["HSET", &meta, "capacity", "", "target_fpr", ""]);
    let bare = RedisFilter::open(&target, "p").unwrap();
    assert_eq!(bare.config().plan(), None);
    assert!(bare.info().unwrap().capacity.is_none());
}

#[test]
fn lost_state_is_detected_and_never_answered_from() {
    let mut server = RedisServer::start();
    let target = server.target();
    let filter = RedisFilter::create(&target, "lost", config(8, 1000)).unwrap();
    for key in keys("k", 200) {
        filter.insert(&key).unwrap();
    }
    // One shard deleted: keys of that shard fail; others still answer.
    server.cli(&["DEL", &shard_key("lost", 3)]);
    let mut lost = 0;
    for key in keys("k", 200) {
        match filter.contains(&key) {
            Ok(answer) => assert!(answer),
            Err(RedisFilterError::LostState { shard: 3, .. }) => lost += 1,
            Err(other) => panic!("{other}"),
        }
    }
    assert!(lost > 5, "{lost}");
    // An insert into the lost shard fails and leaves it detectably lost.
    let in_shard_3 = keys("k", 200)
        .into_iter()
        .find(|k| filter.contains(k).is_err())
        .unwrap();
    assert!(matches!(
        filter.insert(&in_shard_3),
        Err(RedisFilterError::LostState { .. })
    ));
    assert!(matches!(
        filter.contains(&in_shard_3),
        Err(RedisFilterError::LostState { .. })
    ));
    // Opening reads the metadata only; the shards are checked where they are used, and a
    // full check names the lost one.
    let reopened = RedisFilter::open(&target, "lost").unwrap();
    assert!(matches!(
        reopened.check_shards(),
        Err(RedisFilterError::LostState { shard: 3, .. })
    ));
    assert!(matches!(
        reopened.contains(&in_shard_3),
        Err(RedisFilterError::LostState { shard: 3, .. })
    ));
    // FLUSHALL: everything is lost, and reopening says the filter is gone.
    server.cli(&["FLUSHALL"]);
    assert!(matches!(
        filter.contains("k-1"),
        Err(RedisFilterError::LostState { .. })
    ));
    assert!(matches!(
        RedisFilter::open(&target, "lost"),
        Err(RedisFilterError::NotFound { .. })
    ));
    // Recreated under the same name: an old handle refuses the new filter's shards.
    let recreated = RedisFilter::create(&target, "lost", config(8, 1000)).unwrap();
    recreated.insert("k-1").unwrap();
    assert!(matches!(
        filter.contains("k-1"),
        Err(RedisFilterError::LostState { .. })
    ));
    // Restarted empty (no persistence): the same.
    server.restart_empty();
    assert!(matches!(
        RedisFilter::open(&target, "lost"),
        Err(RedisFilterError::NotFound { .. })
    ));
    let answer = recreated.contains("k-1");
    assert!(answer.is_err(), "{answer:?}");
}

#[cfg(unix)] // SIGSTOP
#[test]
fn a_killed_server_gives_typed_errors_within_the_timeout() {
    let mut server = RedisServer::start();
    let target = server.target();
    let filter = RedisFilter::create(&target, "gone", config(4, 1000)).unwrap();
    filter.insert("a").unwrap();
    server.kill();
    // A killed server refuses connections at once: each operation fails fast, well within
    // the (generous) deadline.
    let started = Instant::now();
    assert!(filter.contains("a").is_err());
    assert!(filter.insert("b").is_err());
    assert!(RedisFilter::open(&target, "gone").is_err());
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );
    // A server that accepts but never answers (SIGSTOP): the operation ends with `Timeout`
    // after its deadline. The filter is created through a generous target; only the handle
    // used against the stopped server has the short one (opened, with retries, while the
    // server still answers).
    let mut server = RedisServer::start();
    RedisFilter::create(&server.target(), "stopped", config(4, 1000)).unwrap();
    let short = server.target().with_timeout(Duration::from_millis(300));
    let deadline = Instant::now() + Duration::from_secs(60);
    let filter = loop {
        match RedisFilter::open(&short, "stopped") {
            Ok(filter) => break filter,
            Err(e) => assert!(Instant::now() < deadline, "never opened: {e}"),
        }
    };
    server.signal(Signal::STOP);
    let started = Instant::now();
    let result = filter.contains("a");
    let elapsed = started.elapsed();
    server.signal(Signal::CONT);
    assert!(
        matches!(result, Err(RedisFilterError::Timeout { .. })),
        "{result:?}"
    );
    // Bounded: far below a hang, whatever the load (the deadline is 300 ms).
    assert!(elapsed < Duration::from_secs(30), "{elapsed:?}");
    server.kill();
}

#[test]
fn replica_acknowledgements_gate_inserts() {
    // No delay before the first full sync (Redis 7 waits 5 s by default for more replicas).
    let primary = RedisServer::start_with(&["--repl-diskless-sync-delay", "0"]);
    let mut replica = RedisServer::start_with(&[]);
    replica.cli(&["REPLICAOF", "127.0.0.1", &primary.port.to_string()]);
    let deadline = Instant::now() + Duration::from_secs(120);
    while !primary
        .cli(&["INFO", "replication"])
        .contains("state=online")
    {
        assert!(Instant::now() < deadline, "the replica did not come online");
        std::thread::sleep(Duration::from_millis(50));
    }
    let target = primary.target();
    let mut filter = RedisFilter::create(&target, "acked", config(4, 1000)).unwrap();
    // WAIT returns as soon as the replica acknowledges: a long timeout costs nothing.
    filter.require_replica_acks(1, Duration::from_secs(30));
    filter.insert("a").unwrap();
    replica.kill();
    let deadline = Instant::now() + Duration::from_secs(120);
    while !primary
        .cli(&["INFO", "replication"])
        .contains("connected_slaves:0")
    {
        assert!(Instant::now() < deadline, "the replica did not go away");
        std::thread::sleep(Duration::from_millis(50));
    }
    // No replica left: WAIT can only answer 0, whatever the timeout.
    filter.require_replica_acks(1, Duration::from_millis(200));
    assert!(matches!(
        filter.insert("b"),
        Err(RedisFilterError::NotAcknowledged {
            wanted: 1,
            acked: 0,
            ..
        })
    ));
}

#[test]
fn markers_bind_each_shard_to_its_filter_number_and_configuration() {
    let server = RedisServer::start();
    let target = server.target();
    let filter = RedisFilter::create(&target, "m", config(8, 1000)).unwrap();
    for key in keys("k", 300) {
        filter.insert(&key).unwrap();
    }
    let lost = |what: &str| {
        let result = RedisFilter::open(&target, "m").and_then(|f| f.check_shards());
        assert!(
            matches!(result, Err(RedisFilterError::LostState { .. })),
            "{what}: {result:?}"
        );
    };
    // Two shards swapped: each reads the other's marker.
    server.cli(&["RENAME", &shard_key("m", 3), "tmp"]);
    server.cli(&["RENAME", &shard_key("m", 4), &shard_key("m", 3)]);
    server.cli(&["RENAME", "tmp", &shard_key("m", 4)]);
    lost("swapped shards");
    server.cli(&["RENAME", &shard_key("m", 3), "tmp"]);
    server.cli(&["RENAME", &shard_key("m", 4), &shard_key("m", 3)]);
    server.cli(&["RENAME", "tmp", &shard_key("m", 4)]);
    RedisFilter::open(&target, "m")
        .unwrap()
        .check_shards()
        .unwrap();
    // A shard copied over another.
    server.cli(&["RENAME", &shard_key("m", 6), "orig6"]);
    server.cli(&["COPY", &shard_key("m", 5), &shard_key("m", 6)]);
    lost("copied shard");
    server.cli(&["DEL", &shard_key("m", 6)]);
    server.cli(&["RENAME", "orig6", &shard_key("m", 6)]);
    // Edited metadata with valid values: the markers no longer match the configuration.
    let meta = bloom_redis::meta_key("m");
    server.cli(&["HSET", &meta, "hashes", "9"]);
    lost("edited k");
    let k = filter.config().hashes().to_string();
    server.cli(&["HSET", &meta, "hashes", &k]);
    RedisFilter::open(&target, "m")
        .unwrap()
        .check_shards()
        .unwrap();
    // A long-lived handle and truncated shards (the head marker kept, the end marker cut).
    assert!(filter.contains("k-1").unwrap());
    for s in 0..8 {
        server.cli(&[
            "EVAL",
            "local v = redis.call('GET', KEYS[1]) redis.call('SET', KEYS[1], string.sub(v, 1, 108)) return 1",
            "1",
            &shard_key("m", s),
        ]);
    }
    for key in keys("k", 300) {
        assert!(matches!(
            filter.contains(&key),
            Err(RedisFilterError::LostState { .. })
        ));
    }
}

#[test]
fn a_handle_to_a_replaced_filter_never_writes_its_metadata() {
    let server = RedisServer::start();
    let target = server.target();
    let old = RedisFilter::create(&target, "r", config(4, 1000)).unwrap();
    old.insert("a").unwrap();
    RedisFilter::delete(&target, "r").unwrap();
    let new = RedisFilter::create(&target, "r", config(4, 1000)).unwrap();
    let identity = bloom_format::StoreIdentity::from_bytes([7; 16]);
    let binding =
        bloom_format::StoreBinding::new(identity, bloom_format::HistoryDigest::from_bytes([9; 16]));
    assert!(matches!(
        old.set_coverage(bloom_format::DatasetGeneration::new(100), Some(binding)),
        Err(RedisFilterError::LostState { .. })
    ));
    assert!(old.insert("b").is_err());
    let header = new.header().unwrap();
    assert_eq!(header.dataset_generation.get(), 0);
    assert!(header.store.is_none());
    assert_eq!(header.item_count, 0);
}

#[test]
fn a_filter_larger_than_the_server_can_hold_is_refused_before_anything_is_written() {
    let server = RedisServer::start_with(&["--maxmemory", "64mb"]);
    let target = server.target();
    // 1 GiB of bits.
    let params = FilterParams::with_layout(Layout::sharded(16).unwrap(), 1 << 33, 7).unwrap();
    let result = RedisFilter::create(&target, "huge", FilterConfig::new(params));
    assert!(
        matches!(result, Err(RedisFilterError::TooLarge { .. })),
        "{result:?}"
    );
    assert_eq!(server.cli(&["DBSIZE"]).trim(), "0");
}

#[cfg(unix)] // SIGSTOP
#[test]
fn every_operation_has_one_deadline() {
    // A listener that accepts and never answers: the open ends after one deadline (1 s),
    // not one per attempt.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let _hold = std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            held.push(stream);
        }
    });
    let silent = bloom_redis::RedisTarget::single(format!("redis://127.0.0.1:{port}/"))
        .with_timeout(Duration::from_secs(1));
    let started = Instant::now();
    let result = RedisFilter::open(&silent, "x");
    assert!(
        matches!(result, Err(RedisFilterError::Timeout { .. })),
        "{result:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );

    // A server stopped in the middle of a long pipelined insert (400,000 keys, about a
    // hundred batches): once the insert has run its first BITFIELD or BLOOM.MADD (an event
    // Redis counts),
    // and until the insert has returned. The operation's one deadline ends it, however many
    // batches were left: it returns by the deadline, counted from its start.
    let server = RedisServer::start();
    let deadline_per_operation = Duration::from_secs(10);
    let target = server.target().with_timeout(deadline_per_operation);
    RedisFilter::create(&server.target(), "slow", config(16, 1_000_000)).unwrap();
    let filter = RedisFilter::open(&target, "slow").unwrap();
    // One connection of the test's own, polled for the server's BITFIELD counter.
    let mut watcher = redis::Client::open(server.url())
        .unwrap()
        .get_connection_with_timeout(Duration::from_secs(30))
        .unwrap();
    let mut scripts_run = || -> u64 {
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query(&mut watcher)
            .unwrap();
        // BITFIELD, or the module's BLOOM.MADD when the server has it.
        info.lines()
            .filter_map(|l| {
                l.strip_prefix("cmdstat_bitfield:calls=")
                    .or_else(|| l.strip_prefix("cmdstat_bloom.madd:calls="))
            })
            .filter_map(|rest| rest.split(',').next()?.parse::<u64>().ok())
            .sum::<u64>()
    };
    let before = scripts_run();
    let encoded: Vec<Vec<u8>> = (0..400_000)
        .map(|i| format!("p-{i}").into_bytes())
        .collect();
    let (returned, insert_returned) = std::sync::mpsc::channel::<()>();
    let (stopped_at_tx, stopped_at) = std::sync::mpsc::channel::<Option<Instant>>();
    let result = std::thread::scope(|scope| {
        let server = &server;
        scope.spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(300);
            loop {
                if scripts_run() > before {
                    server.signal(Signal::STOP);
                    let _ = stopped_at_tx.send(Some(Instant::now()));
                    // Stopped until the insert returned (bounded only against a hang).
                    let _ = insert_returned.recv_timeout(Duration::from_secs(300));
                    server.signal(Signal::CONT);
                    return;
                }
                // The insert returned before any script ran: nothing was stopped.
                if matches!(
                    insert_returned.try_recv(),
                    Err(std::sync::mpsc::TryRecvError::Disconnected)
                ) || Instant::now() > deadline
                {
                    let _ = stopped_at_tx.send(None);
                    return;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        let started = Instant::now();
        let result = filter.insert_all(
            encoded
                .iter()
                .map(|k| bloom_core::EncodedKey::from_encoded(k.as_ref())),
        );
        let returned_at = Instant::now();
        drop(returned);
        (result, started, returned_at)
    });
    let (result, started, returned_at) = result;
    let stopped = stopped_at
        .recv()
        .unwrap()
        .unwrap_or_else(|| panic!("the insert returned before the server was stopped: {result:?}"));
    assert!(
        matches!(result, Err(RedisFilterError::Timeout { .. })),
        "{result:?}"
    );
    assert!(
        returned_at.saturating_duration_since(started)
            < deadline_per_operation + Duration::from_secs(30),
        "returned {:?} after its start, {:?} after the stop",
        returned_at.saturating_duration_since(started),
        returned_at.saturating_duration_since(stopped)
    );
    // The next operation reconnects. The server first works off what the aborted insert had
    // sent, so the filter is given time to get its answer.
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut answered = filter.contains("p-1");
    while answered.is_err() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        answered = filter.contains("p-1");
    }
    assert!(answered.is_ok(), "{answered:?}");
}

/// Batches are sent ahead of their replies (two in flight). A batch that fails leaves the
/// next one on the wire: its replies must be read and dropped, never taken for the replies of
/// the handle's next command.
#[test]
fn a_failed_batch_leaves_no_reply_behind_for_the_next_command() {
    let server = RedisServer::start();
    let target = server.target();
    let filter = RedisFilter::create(&target, "inflight", config(16, 100_000)).unwrap();
    let keys: Vec<Vec<u8>> = keys("inflight", 40_000)
        .iter()
        .map(|k| filter.config().encoding().encode_str(k).as_bytes().to_vec())
        .collect();
    let client = redis::Client::open(server.url()).unwrap();
    let mut raw = client.get_connection().unwrap();
    let shard = shard_key("inflight", 3);
    let dump: Vec<u8> = redis::cmd("DUMP").arg(&shard).query(&mut raw).unwrap();
    let _: i64 = redis::cmd("DEL").arg(&shard).query(&mut raw).unwrap();
    for _ in 0..3 {
        let error = filter
            .insert_all(
                keys.iter()
                    .map(|k| bloom_core::EncodedKey::from_encoded(k.as_ref())),
            )
            .unwrap_err();
        assert!(
            matches!(error, RedisFilterError::LostState { shard: 3, .. }),
            "{error:?}"
        );
        let error = filter
            .contains_each(
                keys.iter()
                    .map(|k| bloom_core::EncodedKey::from_encoded(k.as_ref())),
            )
            .unwrap_err();
        assert!(
            matches!(error, RedisFilterError::LostState { shard: 3, .. }),
            "{error:?}"
        );
    }
    // (The inserts' BITFIELD made the shard again, zeroed and without its markers.)
    let _: () = redis::cmd("RESTORE")
        .arg(&shard)
        .arg(0)
        .arg(dump)
        .arg("REPLACE")
        .query(&mut raw)
        .unwrap();
    // The same handle, its connection reused: every reply is its own.
    filter
        .insert_all(
            keys.iter()
                .map(|k| bloom_core::EncodedKey::from_encoded(k.as_ref())),
        )
        .unwrap();
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
    filter.check_shards().unwrap();
    let strangers: Vec<Vec<u8>> = (0..40_000)
        .map(|i| format!("stranger-{i}").into_bytes())
        .collect();
    let maybe = filter
        .contains_each(
            strangers
                .iter()
                .map(|k| bloom_core::EncodedKey::from_encoded(k.as_ref())),
        )
        .unwrap();
    assert!(maybe.iter().filter(|&&m| m).count() < 40_000 / 20);
}

#[test]
fn a_password_never_reaches_a_message_or_debug() {
    const GOOD: &str = "G00d-pa55-qrs";
    const WRONG: &str = "Wr0ng-pa55-tuv";
    let server = RedisServer::start_with(&["--requirepass", GOOD]);
    let url = |password: &str| format!("redis://:{password}@127.0.0.1:{}/", server.port);
    let shown = |text: &str| text.contains(GOOD) || text.contains(WRONG);

    let good = RedisTarget::single(url(GOOD));
    let filter = RedisFilter::create(&good, "secret", config(2, 100)).unwrap();
    filter.insert("k").unwrap();
    for target in [
        RedisTarget::single(url(GOOD)),
        RedisTarget::cluster([url(GOOD), url(WRONG)]),
        RedisTarget::sentinel([url(WRONG)], "m"),
    ] {
        assert!(!shown(&format!("{target:?} {target:#?}")), "{target:?}");
    }
    assert!(!shown(&format!("{filter:?}")), "{filter:?}");

    // A refused password, an unreachable server with a password, a Sentinel that is not one:
    // each is an error whose message and `Debug` name no password.
    let unreachable = format!("redis://:{WRONG}@127.0.0.1:1/");
    for target in [
        RedisTarget::single(url(WRONG)),
        RedisTarget::single(unreachable.clone()),
        RedisTarget::cluster([unreachable.clone()]),
        RedisTarget::sentinel([url(GOOD)], "m"),
    ]
    .map(|t| t.with_timeout(Duration::from_secs(5)))
    {
        let err = RedisFilter::open(&target, "secret").unwrap_err();
        let text = format!("{err} {err:?} {err:#?}");
        assert!(!shown(&text), "{text}");
        let mut source = std::error::Error::source(&err);
        while let Some(inner) = source {
            assert!(!shown(&format!("{inner} {inner:?}")), "{inner:?}");
            source = inner.source();
        }
    }
}

/// Reads one RESP command (an array of bulk strings) from `reader`, `None` at its end.
fn read_command(reader: &mut impl std::io::BufRead) -> Option<Vec<Vec<u8>>> {
    let mut line = String::new();
    let mut header = |reader: &mut dyn std::io::BufRead, sigil: char| -> Option<usize> {
        line.clear();
        reader.read_line(&mut line).ok()?;
        line.trim_end().strip_prefix(sigil)?.parse().ok()
    };
    let count = header(reader, '*')?;
    let mut parts = Vec::with_capacity(count.min(64));
    for _ in 0..count {
        let len = header(reader, '$')?;
        let mut part = vec![0; len.min(1 << 20) + 2];
        reader.read_exact(&mut part).ok()?;
        part.truncate(len);
        parts.push(part);
    }
    Some(parts)
}

/// A cluster whose one node claims every slot and answers every other command with a redirect
/// to itself (a slot map that never settles, as in a reshard gone wrong): the open ends by its
/// deadline or its bound on attempts, with an error, never a loop.
#[test]
fn a_cluster_that_redirects_forever_ends_by_the_deadline() {
    use std::io::Write;
    for redirect in ["MOVED", "ASK", "TRYAGAIN"] {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let served = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let counter = served.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let counter = counter.clone();
                std::thread::spawn(move || {
                    let mut writer = stream.try_clone().unwrap();
                    let mut reader = std::io::BufReader::new(stream);
                    while let Some(command) = read_command(&mut reader) {
                        counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        let name = String::from_utf8_lossy(&command[0]).to_ascii_uppercase();
                        let sub = command
                            .get(1)
                            .map(|s| String::from_utf8_lossy(s).to_ascii_uppercase());
                        let reply = match (name.as_str(), sub.as_deref()) {
                            ("CLUSTER", Some("SLOTS")) => format!(
                                "*1\r\n*3\r\n:0\r\n:16383\r\n*2\r\n$9\r\n127.0.0.1\r\n:{port}\r\n"
                            ),
                            ("INFO", _) => {
                                let info = "redis_version:7.0.15\r\nrun_id:fake\r\n\
                                            role:master\r\nmaster_replid:r1\r\n\
                                            master_replid2:0\r\naof_enabled:0\r\n";
                                format!("${}\r\n{info}\r\n", info.len())
                            }
                            ("CONFIG", _) => "*0\r\n".to_owned(),
                            _ if redirect == "TRYAGAIN" => {
                                "-TRYAGAIN Multiple keys request during rehashing of slot\r\n"
                                    .to_owned()
                            }
                            _ => format!("-{redirect} 0 127.0.0.1:{port}\r\n"),
                        };
                        if writer.write_all(reply.as_bytes()).is_err() {
                            return;
                        }
                    }
                });
            }
        });
        let target = RedisTarget::cluster([format!("redis://127.0.0.1:{port}/")])
            .with_timeout(Duration::from_secs(2));
        let started = Instant::now();
        let result = RedisFilter::open(&target, "loop");
        let elapsed = started.elapsed();
        assert!(
            matches!(
                result,
                Err(RedisFilterError::Timeout { .. } | RedisFilterError::Unavailable(_))
            ),
            "{redirect}: {result:?}"
        );
        assert!(
            served.load(std::sync::atomic::Ordering::SeqCst) > 1,
            "{redirect}: the fake was never asked"
        );
        // Far below a hang, whatever the load (the deadline is 2 s).
        assert!(elapsed < Duration::from_secs(30), "{redirect}: {elapsed:?}");
    }
}

/// An insert reads a shard's markers before its first write to it: metadata edited to claim
/// larger shards, or a deleted shard, gives `LostState` and leaves Redis as it was (no key
/// grown to the claimed size, no key created without markers).
#[test]
fn an_insert_never_writes_to_a_shard_whose_markers_are_not_the_filters() {
    let server = RedisServer::start();
    let target = server.target();
    RedisFilter::create(&target, "grow", config(4, 1000)).unwrap();
    let meta = bloom_redis::meta_key("grow");
    let lengths = || -> Vec<String> {
        (0..4)
            .map(|s| {
                server
                    .cli(&["STRLEN", &shard_key("grow", s)])
                    .trim()
                    .to_owned()
            })
            .collect()
    };
    let before = lengths();
    let bits = server.cli(&["HGET", &meta, "bits"]).trim().to_owned();
    // 4 shards of 2^32 - 256 bits each: valid-looking, and 512 MiB per shard if written.
    server.cli(&["HSET", &meta, "bits", "17179865088"]);
    let edited = RedisFilter::open(&target, "grow").unwrap();
    let keys = keys("k", 64);
    assert!(matches!(
        edited.insert_all(&keys),
        Err(RedisFilterError::LostState { .. })
    ));
    assert_eq!(lengths(), before, "a shard grew");
    server.cli(&["HSET", &meta, "bits", &bits]);
    // A deleted shard is not created again by an insert.
    server.cli(&["DEL", &shard_key("grow", 2)]);
    let filter = RedisFilter::open(&target, "grow").unwrap();
    assert!(matches!(
        filter.insert_all(&keys),
        Err(RedisFilterError::LostState { shard: 2, .. })
    ));
    assert_eq!(server.cli(&["EXISTS", &shard_key("grow", 2)]).trim(), "0");
}

/// A server that announces a reply of 10 GB and keeps sending, or an array without end: the
/// client gives a reply at most 2 MiB of the wire and drops the connection, long before the
/// deadline, instead of holding what the server sends until time runs out.
#[test]
fn a_reply_without_end_is_cut_off_at_its_size_limit() {
    use std::io::Write;
    for (announce, filler) in [
        (&b"$9999999999\r\n"[..], &b"x"[..]),
        (&b"*9999999999\r\n"[..], &b":1\r\n"[..]),
    ] {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                std::thread::spawn(move || {
                    let mut stream = stream;
                    let chunk: Vec<u8> = filler.iter().copied().cycle().take(1 << 16).collect();
                    if stream.write_all(announce).is_err() {
                        return;
                    }
                    while stream.write_all(&chunk).is_ok() {}
                });
            }
        });
        let target = RedisTarget::single(format!("redis://127.0.0.1:{port}/"))
            .with_timeout(Duration::from_secs(600));
        let started = Instant::now();
        let result = RedisFilter::open(&target, "endless");
        assert!(
            matches!(&result, Err(RedisFilterError::Protocol(m)) if m.contains("over 2 MiB")),
            "{result:?}"
        );
        // Cut off by size, not by the (ten-minute) deadline.
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "{:?}",
            started.elapsed()
        );
    }
}

/// Every form of key goes through the same calls as on a local filter; a byte key the
/// encoding refuses is a typed error before anything is sent.
#[test]
fn every_form_of_key_answers_as_locally() {
    let server = RedisServer::start();
    let target = server.target();
    let redis = RedisFilter::create(&target, "forms", config(4, 1_000)).unwrap();
    let mut local = BloomFilter::new(redis.config().clone()).unwrap();
    assert!(redis.insert("café").unwrap());
    assert!(local.insert("café"));
    assert!(
        !redis.insert("cafe\u{301}".as_bytes()).unwrap(),
        "the NFD bytes: the same key"
    );
    let encoded = redis.config().encoding().encode_str("tea").into_owned();
    assert!(redis.insert(&encoded).unwrap());
    local.insert(&encoded);
    assert_eq!(redis.insert_all(["a", "b", "a"]).unwrap(), 2);
    local.insert_all(["a", "b"]);
    let asked = ["café", "tea", "a", "b", "never"];
    let answers = redis.contains_each(asked).unwrap();
    let expected: Vec<bool> = local.contains_each(asked).collect();
    assert_eq!(answers, expected);
    assert!(answers[..4].iter().all(|a| *a));
    assert!(matches!(
        redis.insert_all([b"ok".as_slice(), b"\xff"]),
        Err(RedisFilterError::Key(
            bloom_core::KeyError::InvalidUtf8 { .. }
        ))
    ));
    assert!(
        !redis.contains("ok").unwrap(),
        "nothing of the refused batch was sent"
    );
    assert!(matches!(
        redis.contains(b"\xff"),
        Err(RedisFilterError::Key(_))
    ));
}

/// A filter of other Unicode tables than this build's (imported from a snapshot another
/// build wrote): ASCII keys change nothing, but the first key outside ASCII records, before
/// its bits, that the keys' tables are mixed (schema 3). Every handle then answers *maybe*
/// for keys outside ASCII, and an export records the tables as not recorded, as a local
/// filter's snapshot does.
#[test]
fn keys_of_other_tables_are_recorded_before_their_bits() {
    use bloom_core::{UnicodeTables, UnicodeVersion};
    let server = RedisServer::start();
    let target = server.target();
    let dir = tempfile::tempdir().unwrap();
    let old = UnicodeVersion::new(15, 0, 0);
    let config = config(4, 1_000).with_tables(UnicodeTables::new(Some(old), None));
    assert!(config.has_foreign_tables());
    let mut local = BloomFilter::new(config).unwrap();
    local.insert("plain");
    let snapshot = dir.path().join("old-tables.bloom");
    std::fs::write(&snapshot, local.to_snapshot(0).encode()).unwrap();
    let redis = RedisFilter::import(&target, "tables", &snapshot).unwrap();
    let schema = || server.cli(&["HGET", &bloom_redis::meta_key("tables"), "schema"]);
    // A handle opened before the filter is marked: its restore must not take the mark back.
    let early = RedisFilter::open(&target, "tables").unwrap();
    redis.insert("ascii-only").unwrap();
    // Schema 4: the shards of every new filter count their writes.
    assert_eq!(
        schema().trim(),
        "bloom-redis/4",
        "ASCII keys are the same under any tables"
    );
    redis.insert("naïve").unwrap();
    assert_eq!(schema().trim(), "bloom-redis/5");
    // Another handle reads it: keys outside ASCII are maybe, ASCII ones exact.
    let other = RedisFilter::open(&target, "tables").unwrap();
    assert!(other.config().has_foreign_tables());
    assert!(other.contains("never-added-é").unwrap());
    assert!(!other.contains("never-added").unwrap());
    assert!(other.contains("plain").unwrap());
    let exported = dir.path().join("exported.bloom");
    let header = other.export(&exported).unwrap();
    assert_eq!(header.key_encoding.normalization_unicode, None);
    let reread =
        Snapshot::decode(std::fs::read(&exported).unwrap(), &DecodeOptions::default()).unwrap();
    assert_eq!(reread.header().key_encoding.normalization_unicode, None);
    // Still marked after its nodes are recorded again, by a handle that knew of the mark
    // and by one opened before it (a restore never takes schema 5 back to 4).
    other
        .restore_whole(["plain", "ascii-only", "naïve"], None)
        .unwrap();
    assert_eq!(schema().trim(), "bloom-redis/5");
    early.restore_whole(["plain", "ascii-only"], None).unwrap();
    assert_eq!(schema().trim(), "bloom-redis/5");
    // A key that is ASCII once encoded, but not as given (the Kelvin sign is K under NFC),
    // marks a filter as a local filter would.
    let kelvin = RedisFilter::import(&target, "kelvin", &snapshot).unwrap();
    let kelvin_schema = || server.cli(&["HGET", &bloom_redis::meta_key("kelvin"), "schema"]);
    kelvin.insert("\u{212a}").unwrap();
    assert_eq!(kelvin_schema().trim(), "bloom-redis/5");
}
