//! A Redis-held filter on a real three-master Redis Cluster: shards spread over the nodes,
//! every key's bits in one slot (no CROSSSLOT), the same answers and snapshot as a local
//! filter, and a node's loss detected.

mod support;

use std::collections::BTreeSet;

use bloom_core::{BloomFilter, FilterConfig, FilterParams, Layout};
use bloom_redis::{RedisFilter, RedisFilterError, shard_key};
use support::RedisCluster;

#[test]
fn a_cluster_holds_the_filter_across_nodes_with_the_same_answers() {
    let cluster = RedisCluster::start();
    let target = cluster.target();
    let params = FilterParams::planned(Layout::sharded(12).unwrap(), 10_000, 0.01, 64).unwrap();
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
        .map(|k| redis.config().encode_str(k).as_bytes().to_vec())
        .collect();
    redis.insert_all_encoded(&encoded).unwrap();
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
        .map(|k| redis.config().encode_str(k).as_bytes().to_vec())
        .collect();
    let answers = redis.contains_each_encoded(&encoded).unwrap();
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
