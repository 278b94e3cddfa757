//! Redis losing acknowledged writes by its own design, against real servers: a restart from
//! an older save, a failover to a replica that missed writes (one server and a cluster), and
//! each persistence mode. Whatever happens, an acknowledged key is never answered "absent":
//! the filter answers "maybe" or refuses (`Unverified`) until it is known whole again.

use std::time::Duration;

use bloom_core::{FilterConfig, FilterParams, Layout};
use bloom_redis::{Durability, RedisFilter, RedisFilterError, RedisTarget};
use bloom_testing::redis::{RedisCluster, RedisServer};
use bloom_testing::wait::wait_for;
use rustix::process::Signal;

fn config(shards: u32, items: u64) -> FilterConfig {
    FilterConfig::new(FilterParams::planned(Layout::sharded(shards).unwrap(), items, 0.01).unwrap())
}

fn keys(prefix: &str, range: std::ops::Range<u32>) -> Vec<String> {
    range.map(|i| format!("{prefix}-{i}")).collect()
}

/// Every acknowledged key is answered "maybe", or the filter refuses: never "absent". Returns
/// how many answers were refusals.
fn assert_never_absent(filter: &RedisFilter, acknowledged: &[String]) -> usize {
    let mut refused = 0;
    for chunk in acknowledged.chunks(1000) {
        match filter.contains_each(chunk) {
            Ok(answers) => {
                let absent: Vec<&String> = chunk
                    .iter()
                    .zip(&answers)
                    .filter(|(_, maybe)| !**maybe)
                    .map(|(k, _)| k)
                    .collect();
                assert!(
                    absent.is_empty(),
                    "{} acknowledged keys answered absent, first {:?}",
                    absent.len(),
                    absent.first()
                );
            }
            Err(e) => {
                assert!(e.is_unverified() || e.is_lost_state(), "{e}");
                refused += chunk.len();
            }
        }
    }
    refused
}

/// A master and a replica of it, in sync.
fn replicated_pair() -> (RedisServer, RedisServer) {
    let primary = RedisServer::start();
    let replica = RedisServer::start();
    replica.cli(&["REPLICAOF", "127.0.0.1", &primary.port.to_string()]);
    wait_for("the replica's first sync", || {
        primary
            .cli(&["INFO", "replication"])
            .contains("state=online")
    });
    (primary, replica)
}

/// A `*_repl_offset:` field of a server's `INFO replication`.
fn repl_offset(server: &RedisServer, field: &str) -> u64 {
    server
        .cli(&["INFO", "replication"])
        .lines()
        .find_map(|l| l.trim().strip_prefix(field)?.parse::<u64>().ok())
        .unwrap_or(0)
}

/// Waits until `replica` has every write `primary` has made so far.
fn wait_caught_up(primary: &RedisServer, replica: &RedisServer) {
    let target = repl_offset(primary, "master_repl_offset:");
    wait_for("the replica to catch up", || {
        repl_offset(replica, "slave_repl_offset:") >= target
    });
}

/// `SAVE`, 5,000 more keys acknowledged, SIGKILL, restart from the save: the last 5,000 are
/// gone from Redis, and the filter says so instead of answering "absent".
#[test]
fn a_restart_from_an_older_save_is_never_answered_absent() {
    let mut server = RedisServer::start();
    let target = server.target();
    let filter = RedisFilter::create(&target, "rdb", config(8, 20_000)).unwrap();
    let first = keys("saved", 0..5000);
    filter.insert_all(&first).unwrap();
    assert_eq!(server.cli(&["SAVE"]).trim(), "OK");
    let second = keys("after-save", 0..5000);
    filter.insert_all(&second).unwrap();
    server.restart();

    let reopened = RedisFilter::open(&target, "rdb").unwrap();
    let acknowledged: Vec<String> = first.iter().chain(&second).cloned().collect();
    let refused = assert_never_absent(&reopened, &acknowledged);
    assert_eq!(refused, acknowledged.len(), "every shard's node restarted");
    // The handle from before the restart reconnects and refuses too.
    assert_never_absent(&filter, &acknowledged);
    let e = reopened.contains("saved-1").unwrap_err();
    assert!(e.to_string().contains("restarted"), "{e}");

    // Adds refuse too (their shards' nodes may have lost writes)...
    assert!(reopened.insert_all(&second).unwrap_err().is_unverified());
    // ...and the way out is every key added again, declaring the filter whole.
    let encoded: Vec<Vec<u8>> = acknowledged
        .iter()
        .map(|k| {
            reopened
                .config()
                .encoding()
                .encode_str(k)
                .as_bytes()
                .to_vec()
        })
        .collect();
    reopened.restore_whole(&encoded, None).unwrap();
    assert_eq!(assert_never_absent(&reopened, &acknowledged), 0);
    reopened.insert("later").unwrap();
}

/// The same with AOF: `appendfsync everysec` may lose the last second, so a restart makes
/// the filter unverified; with `appendfsync always` and the `aof` durability a restart
/// loses nothing, and the filter answers on.
#[test]
fn each_persistence_mode_is_judged_by_what_it_keeps() {
    let mut everysec =
        RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "everysec"]);
    let target = everysec.target();
    let filter = RedisFilter::create(&target, "aof1", config(4, 5000)).unwrap();
    let written = keys("k", 0..2000);
    filter.insert_all(&written).unwrap();
    everysec.restart();
    let reopened = RedisFilter::open(&target, "aof1").unwrap();
    assert_eq!(assert_never_absent(&reopened, &written), written.len());

    let mut always = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let target = always.target();
    let durable = Durability::Aof { timeout_ms: 5000 };
    let filter = RedisFilter::create_with(&target, "aof2", config(4, 5000), durable).unwrap();
    filter.insert_all(&written).unwrap();
    always.restart();
    let reopened = RedisFilter::open(&target, "aof2").unwrap();
    assert_eq!(reopened.durability(), durable);
    assert_eq!(
        assert_never_absent(&reopened, &written),
        0,
        "AOF always keeps every write"
    );

    // The aof durability on a server whose AOF cannot promise it: the creation is refused
    // (and leaves nothing behind); so are the writes of a filter made while it could.
    let plain = RedisServer::start();
    let made = RedisFilter::create_with(&plain.target(), "aof3", config(4, 5000), durable);
    assert!(
        matches!(made, Err(RedisFilterError::NotDurable { .. })),
        "{made:?}"
    );
    assert_eq!(plain.cli(&["DBSIZE"]).trim(), "0");
    plain.cli(&["CONFIG", "SET", "appendonly", "yes"]);
    plain.cli(&["CONFIG", "SET", "appendfsync", "always"]);
    let filter =
        RedisFilter::create_with(&plain.target(), "aof3", config(4, 5000), durable).unwrap();
    plain.cli(&["CONFIG", "SET", "appendfsync", "everysec"]);
    let fresh = RedisFilter::open(&plain.target(), "aof3").unwrap();
    assert!(matches!(
        fresh.insert("x"),
        Err(RedisFilterError::NotDurable { .. })
    ));
    drop(filter);

    // A server restarted without its AOF (from an older RDB): the aof durability does not
    // cover it.
    let mut switched = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let target = switched.target();
    let filter = RedisFilter::create_with(&target, "aof4", config(4, 5000), durable).unwrap();
    filter.insert_all(&written[..1000]).unwrap();
    switched.cli(&["SAVE"]);
    filter.insert_all(&written[1000..]).unwrap();
    switched.cli(&["CONFIG", "SET", "appendonly", "no"]);
    switched.restart_with(&["--appendonly", "no"]);
    let reopened = RedisFilter::open(&target, "aof4").unwrap();
    assert_eq!(
        assert_never_absent(&reopened, &written),
        written.len(),
        "a restart without the AOF is not covered by it"
    );
    // AOF turned on after such a restart is a rewrite of what the server loaded (the old
    // save): still not covered, for this handle and for a new one.
    switched.cli(&["CONFIG", "SET", "appendonly", "yes"]);
    wait_for("the AOF rewrite", || {
        let info = switched.cli(&["INFO", "persistence"]);
        info.contains("aof_enabled:1")
            && info.contains("aof_rewrite_in_progress:0")
            && !info.contains("aof_rewrite_scheduled:1")
    });
    for filter in [&reopened, &RedisFilter::open(&target, "aof4").unwrap()] {
        assert_eq!(
            assert_never_absent(filter, &written),
            written.len(),
            "AOF turned on at run time covers nothing"
        );
    }
}

/// A replica that lost its link during the adds is promoted (`REPLICAOF NO ONE`) and the
/// clients pointed at it: the writes it missed are gone, and the filter refuses instead of
/// answering "absent". With the `replicas` durability the adds it missed had failed, and the
/// failover is covered.
#[test]
fn a_failover_to_a_replica_that_missed_writes_is_never_answered_absent() {
    for durability in [
        Durability::None,
        // Generous, so that a busy machine's replica acknowledges the first adds in time;
        // the adds it cannot hear wait this long once.
        Durability::Replicas {
            replicas: 1,
            timeout_ms: 5_000,
        },
    ] {
        let (mut primary, replica) = replicated_pair();
        let filter =
            RedisFilter::create_with(&primary.target(), "fo", config(8, 20_000), durability)
                .unwrap();
        let replicated = keys("replicated", 0..5000);
        filter.insert_all(&replicated).unwrap();
        // The replica caught up with those, then stops hearing from its master.
        wait_caught_up(&primary, &replica);
        replica.signal(Signal::STOP);
        let missed = keys("missed", 0..5000);
        let acked_missed = filter.insert_all(&missed).is_ok();
        primary.kill();
        replica.signal(Signal::CONT);
        replica.cli(&["REPLICAOF", "NO", "ONE"]);

        let at_replica = RedisFilter::open(&replica.target(), "fo").unwrap();
        let mut acknowledged = replicated.clone();
        match durability {
            Durability::None => {
                assert!(acked_missed, "without durability the adds are acknowledged");
                acknowledged.extend(missed.iter().cloned());
                let refused = assert_never_absent(&at_replica, &acknowledged);
                assert_eq!(refused, acknowledged.len());
            }
            _ => {
                assert!(!acked_missed, "no replica acknowledged: the adds failed");
                // The failover is covered: every acknowledged key answers, from the replica.
                assert_eq!(assert_never_absent(&at_replica, &acknowledged), 0);
            }
        }
        drop(primary);
    }
}

/// The same in a cluster of three masters with a replica each, failed over by the cluster
/// itself: the master of some shards is killed while its replica is stopped (so it misses
/// the last adds), and the replica is promoted when it comes back.
#[test]
fn a_cluster_failover_that_missed_writes_is_never_answered_absent() {
    let mut cluster = RedisCluster::start_with(1, 3000);
    let target = cluster.target();
    let filter = RedisFilter::create(&target, "cfo", config(12, 60_000)).unwrap();
    let before = keys("before", 0..20_000);
    filter.insert_all(&before).unwrap();
    let master = (0..cluster.nodes.len())
        .find(|&i| cluster.is_master(i))
        .unwrap();
    let replica = cluster.replica_of(master).expect("a replica of the master");
    cluster.nodes[replica].signal(Signal::STOP);
    let during = keys("during", 0..30_000);
    filter.insert_all(&during).unwrap();
    cluster.nodes[master].kill();
    cluster.nodes[replica].signal(Signal::CONT);
    wait_for("the replica's promotion", || cluster.is_master(replica));
    wait_for("the cluster to be whole again", || {
        cluster.nodes[replica]
            .cli(&["CLUSTER", "INFO"])
            .contains("cluster_state:ok")
    });

    let urls: Vec<String> = (0..cluster.nodes.len())
        .filter(|&i| i != master)
        .map(|i| cluster.nodes[i].url())
        .collect();
    let survivors = RedisTarget::cluster(urls).with_timeout(Duration::from_secs(10));
    let reopened = RedisFilter::open(&survivors, "cfo").unwrap();
    let acknowledged: Vec<String> = before.iter().chain(&during).cloned().collect();
    let refused = assert_never_absent(&reopened, &acknowledged);
    assert!(refused > 0, "the failed-over shards refuse");
    // Key by key, the shards of the other masters still answer.
    let mut answered = 0;
    for key in acknowledged.iter().step_by(25) {
        match reopened.contains(key) {
            Ok(maybe) => {
                assert!(maybe, "{key} answered absent");
                answered += 1;
            }
            Err(e) => assert!(e.is_unverified() || e.is_lost_state(), "{e}"),
        }
    }
    assert!(answered > 0, "shards of the other masters still answer");
}

/// A master demoted under a live connection: it resyncs from a replica that had split off
/// before the last adds (so it drops them), and the handle that made those adds never
/// reconnects. The probe that ends each node's share of a pipeline sees the new history; the
/// reply is not used, and the node as it is now is judged.
#[test]
fn a_master_demoted_under_a_live_connection_is_never_answered_from() {
    let (primary, other) = replicated_pair();
    let filter = RedisFilter::create(&primary.target(), "demoted", config(8, 20_000)).unwrap();
    let before = keys("before", 0..5000);
    filter.insert_all(&before).unwrap();
    wait_caught_up(&primary, &other);
    // The replica splits off; the master acknowledges 5,000 more it never sees.
    other.cli(&["REPLICAOF", "NO", "ONE"]);
    let missed = keys("missed", 0..5000);
    filter.insert_all(&missed).unwrap();
    // The master follows the split-off replica and resyncs from it: the 5,000 are gone.
    primary.cli(&["REPLICAOF", "127.0.0.1", &other.port.to_string()]);
    wait_for("the demoted master to resync", || {
        primary
            .cli(&["INFO", "replication"])
            .contains("master_link_status:up")
    });
    let mut acknowledged = before;
    acknowledged.extend(missed);
    let refused = assert_never_absent(&filter, &acknowledged);
    assert_eq!(
        refused,
        acknowledged.len(),
        "answered from a demoted master"
    );
}

/// An import with the `replicas` durability waits for the replicas after it wrote the
/// snapshot's bits, before the filter is ready: the server's own order of commands
/// (`MONITOR`) shows a `WAIT` after the last `SETRANGE` and before the `ready` state.
#[test]
fn an_import_waits_for_its_durability_after_writing_the_bits() {
    use std::io::BufRead;
    let (primary, _replica) = replicated_pair();
    let dir = tempfile::tempdir().unwrap();
    let snapshot = dir.path().join("s.bloom");
    let local = RedisFilter::create(&primary.target(), "source", config(4, 5000)).unwrap();
    local.insert_all(keys("k", 0..5000)).unwrap();
    local.export(&snapshot).unwrap();

    let mut monitor = std::process::Command::new("redis-cli")
        .args(["-p", &primary.port.to_string(), "MONITOR"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(monitor.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "OK");
    let durable = Durability::Replicas {
        replicas: 1,
        timeout_ms: 5000,
    };
    let imported = RedisFilter::import_with(
        &primary.target(),
        "imp",
        &snapshot,
        &bloom_format::DecodeOptions::default(),
        durable,
    )
    .unwrap();
    // A marker command after the import: the stream is read up to it.
    primary.cli(&["ECHO", "import-returned"]);
    let mut seen = Vec::new();
    for line in lines {
        let line = line.unwrap();
        if line.contains("\"import-returned\"") {
            break;
        }
        seen.push(line);
    }
    monitor.kill().unwrap();
    monitor.wait().unwrap();
    let position = |what: &str| seen.iter().rposition(|l| l.contains(what));
    let last_bits = position("\"SETRANGE\" \"bloom:{imp:").expect("no SETRANGE seen");
    let ready = seen
        .iter()
        .rposition(|l| l.contains("\"ready\""))
        .expect("no ready state seen");
    assert!(
        seen[last_bits..ready]
            .iter()
            .any(|l| l.contains("\"WAIT\" \"1\"")),
        "no WAIT between the last SETRANGE and ready"
    );
    assert_eq!(assert_never_absent(&imported, &keys("k", 0..5000)), 0);
}

/// A server that evicts any key (`allkeys-random`) under memory pressure: shards, epoch
/// records and the metadata go at random. Every acknowledged key is still answered "maybe"
/// or refused, by a handle that was open through it and by one opened after; an insert into
/// a filter that lost a shard or a record never succeeds silently.
#[test]
fn eviction_of_any_of_the_filters_keys_is_never_answered_absent() {
    let server = RedisServer::start_with(&[
        "--maxmemory",
        "3mb",
        "--maxmemory-policy",
        "allkeys-random",
        "--maxmemory-samples",
        "10",
    ]);
    let target = server.target();
    let filter = RedisFilter::create(&target, "evicted", config(32, 20_000)).unwrap();
    let acknowledged = keys("k", 0..20_000);
    filter.insert_all(&acknowledged).unwrap();
    assert_eq!(assert_never_absent(&filter, &acknowledged), 0);
    // Other data pushes the filter's keys out: the event is Redis's own counter.
    let evicted = || -> u64 {
        server
            .cli(&["INFO", "stats"])
            .lines()
            .find_map(|l| l.trim().strip_prefix("evicted_keys:")?.parse().ok())
            .unwrap_or(0)
    };
    let mut conn = redis::Client::open(server.url())
        .unwrap()
        .get_connection_with_timeout(Duration::from_secs(30))
        .unwrap();
    let mut names = vec![bloom_redis::meta_key("evicted")];
    names.extend((0..32).map(|s| bloom_redis::shard_key("evicted", s)));
    let filler = "x".repeat(16 << 10);
    let mut i = 0u32;
    loop {
        let present: u64 = redis::cmd("EXISTS").arg(&names).query(&mut conn).unwrap();
        if present < 33 {
            break;
        }
        let _: () = redis::cmd("SET")
            .arg(format!("filler-{i}"))
            .arg(&filler)
            .query(&mut conn)
            .unwrap();
        i += 1;
        assert!(i < 100_000, "nothing of the filter was evicted");
    }
    assert!(evicted() > 0);
    // The handle that was open, and a new one (which may not open at all without its
    // metadata): "maybe" or a refusal, never "absent".
    assert_never_absent(&filter, &acknowledged);
    match RedisFilter::open(&target, "evicted") {
        Ok(reopened) => {
            assert_never_absent(&reopened, &acknowledged);
            // 2,000 keys touch every shard: an insert that succeeds found them all whole
            // and judged, and then nothing is refused.
            if reopened.insert_all(keys("new", 0..2_000)).is_ok() {
                assert_eq!(assert_never_absent(&reopened, &acknowledged), 0);
            }
        }
        Err(e) => assert!(
            matches!(
                e,
                RedisFilterError::NotFound { .. } | RedisFilterError::Metadata { .. }
            ),
            "{e}"
        ),
    }
}
