//! A Redis-held filter on a real three-master Redis Cluster: shards spread over the nodes,
//! every key's bits in one slot (no CROSSSLOT), the same answers and snapshot as a local
//! filter, and a node's loss detected.

use std::collections::BTreeSet;

use bloom_core::{BloomFilter, Filter, FilterConfig, FilterParams, Layout};
use bloom_redis::{RedisFilter, RedisFilterError, shard_key};
use bloom_testing::redis::RedisCluster;

#[test]
fn a_cluster_holds_the_filter_across_nodes_with_the_same_answers() {
    let cluster = RedisCluster::start();
    let target = cluster.target();
    let params = FilterParams::planned(Layout::sharded(12).unwrap(), 10_000, 0.01).unwrap();
    let config = FilterConfig::new(params);
    let redis = RedisFilter::create(&target, "fleet", config.clone()).unwrap();

    let nodes: BTreeSet<usize> = (0..12)
        .map(|s| cluster.node_of(&shard_key("fleet", s)))
        .collect();
    assert!(nodes.len() >= 2, "all shards on one node: {nodes:?}");

    let mut local = BloomFilter::new(config).unwrap();
    let inserted: Vec<String> = (0..10_000).map(|i| format!("user-{i}")).collect();
    let encoded: Vec<Vec<u8>> = inserted
        .iter()
        .map(|k| redis.config().encoding().encode_str(k).as_bytes().to_vec())
        .collect();
    redis
        .insert_all(
            encoded
                .iter()
                .map(|k| bloom_core::EncodedKey::from_encoded(k.as_ref())),
        )
        .unwrap();
    redis.insert("one-more").unwrap();
    local.insert_all(&inserted);
    local.insert("one-more");

    let probes: Vec<String> = inserted
        .iter()
        .cloned()
        .chain((0..10_000).map(|i| format!("stranger-{i}")))
        .collect();
    let encoded: Vec<Vec<u8>> = probes
        .iter()
        .map(|k| redis.config().encoding().encode_str(k).as_bytes().to_vec())
        .collect();
    let answers = redis
        .contains_each(
            encoded
                .iter()
                .map(|k| bloom_core::EncodedKey::from_encoded(k.as_ref())),
        )
        .unwrap();
    let expected: Vec<bool> = local.contains_each(&probes).collect();
    assert_eq!(answers, expected);

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fleet.bloom");
    redis.export(&path).unwrap();
    assert!(std::fs::read(&path).unwrap() == local.to_snapshot(0).encode().to_vec());

    // Opened through another node: the same filter.
    let other = bloom_redis::RedisTarget::cluster([cluster.nodes[2].url()]);
    let reopened = RedisFilter::open(&other, "fleet").unwrap();
    assert!(reopened.contains("user-77").unwrap());

    // A shard deleted on its node is detected as lost, through the cluster connection too.
    let victim = shard_key("fleet", 5);
    let node = cluster.node_of(&victim);
    cluster.nodes[node].cli(&["DEL", &victim]);
    assert!(matches!(
        RedisFilter::open(&target, "fleet").and_then(|f| f.check_shards()),
        Err(RedisFilterError::LostState { shard: 5, .. })
    ));
}

/// A live reshard (`redis-cli --cluster reshard`) while a writer adds and checks: shard keys
/// move between masters under the calls, which follow `MOVED` and `ASK`, and no call fails:
/// every add is acknowledged, every check answers, and every key added is answered present.
#[test]
fn a_live_reshard_fails_no_call_and_changes_no_answer() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

    let cluster = RedisCluster::start();
    let target = cluster.target();
    let params = FilterParams::planned(Layout::sharded(12).unwrap(), 200_000, 0.01).unwrap();
    let filter = RedisFilter::create(&target, "moving", FilterConfig::new(params)).unwrap();
    filter
        .insert_all((0..2000).map(|i| format!("k-{i}")))
        .unwrap();
    let homes = || -> Vec<usize> {
        (0..12)
            .map(|s| cluster.node_of(&shard_key("moving", s)))
            .collect()
    };
    let before = homes();
    let stop = AtomicBool::new(false);
    let rounds = AtomicU64::new(0);
    let failures = std::sync::Mutex::new(Vec::new());
    let added = std::thread::scope(|scope| {
        let worker = scope.spawn(|| {
            let mut next = 2000u32;
            while !stop.load(Ordering::SeqCst) {
                let batch: Vec<String> = (next..next + 200).map(|i| format!("k-{i}")).collect();
                if let Err(e) = filter.insert_all(&batch) {
                    failures.lock().unwrap().push(format!("add: {e}"));
                } else {
                    next += 200;
                }
                let probe: Vec<String> = (0..next).step_by(7).map(|i| format!("k-{i}")).collect();
                match filter.contains_each(&probe) {
                    Ok(answers) => {
                        if let Some(i) = answers.iter().position(|m| !m) {
                            failures
                                .lock()
                                .unwrap()
                                .push(format!("{} absent", probe[i]));
                        }
                    }
                    Err(e) => failures.lock().unwrap().push(format!("check: {e}")),
                }
                rounds.fetch_add(1, Ordering::SeqCst);
            }
            next
        });
        let wait_rounds = |n: u64| {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(180);
            let start = rounds.load(Ordering::SeqCst);
            while rounds.load(Ordering::SeqCst) < start + n {
                assert!(std::time::Instant::now() < deadline, "the worker stalled");
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        };
        wait_rounds(2);
        let id = |i: usize| cluster.nodes[i].cli(&["CLUSTER", "MYID"]).trim().to_owned();
        let out = std::process::Command::new("redis-cli")
            .args(["--cluster", "reshard"])
            .arg(format!("127.0.0.1:{}", cluster.nodes[0].port))
            .args(["--cluster-from", &id(0), "--cluster-to", &id(1)])
            .args(["--cluster-slots", "4000", "--cluster-yes"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "reshard failed: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        wait_rounds(2);
        stop.store(true, Ordering::SeqCst);
        worker.join().unwrap()
    });
    let moved = before
        .iter()
        .zip(homes())
        .filter(|(a, b)| **a != *b)
        .count();
    assert!(moved > 0, "the reshard moved no shard: {before:?}");
    let failures = failures.into_inner().unwrap();
    assert!(
        failures.is_empty(),
        "{} calls failed: {:?}",
        failures.len(),
        &failures[..failures.len().min(5)]
    );
    let reopened = RedisFilter::open(&cluster.target(), "moving").unwrap();
    let keys: Vec<String> = (0..added).map(|i| format!("k-{i}")).collect();
    assert!(reopened.contains_each(&keys).unwrap().iter().all(|&m| m));
    reopened.check_shards().unwrap();
}
