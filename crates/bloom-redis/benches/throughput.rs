//! Keys per second on loopback against a real `redis-server` started here: pipelined batches,
//! one round trip per key, and the naive one `SETBIT`/`GETBIT` per bit, in the same run.
//!
//! `cargo bench -p bloom-redis --bench throughput` (needs `redis-server`; about a minute).

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::Instant;

use bloom_core::{FilterConfig, FilterParams, Layout};
use bloom_redis::{RedisFilter, shard_key};

fn rate(n: usize, started: Instant) -> f64 {
    n as f64 / started.elapsed().as_secs_f64()
}

fn main() {
    let server = support::RedisServer::start();
    let target = server.target();
    let params = FilterParams::planned(Layout::sharded(16).unwrap(), 1_000_000, 0.01, 64).unwrap();
    let filter = RedisFilter::create(&target, "bench", FilterConfig::new(params)).unwrap();
    let keys: Vec<Vec<u8>> = (0..200_000)
        .map(|i| format!("key-{i:012}").into_bytes())
        .collect();

    let started = Instant::now();
    filter.insert_all_encoded(&keys).unwrap();
    let batched_insert = rate(keys.len(), started);
    let started = Instant::now();
    let answers = filter.contains_each_encoded(&keys).unwrap();
    let batched_query = rate(keys.len(), started);
    assert!(answers.iter().all(|&a| a));

    let few = &keys[..10_000];
    let started = Instant::now();
    for key in few {
        filter
            .insert_encoded(&bloom_core::EncodedKey::from_encoded(key))
            .unwrap();
    }
    let single_insert = rate(few.len(), started);
    let started = Instant::now();
    for key in few {
        assert!(
            filter
                .contains_encoded(&bloom_core::EncodedKey::from_encoded(key))
                .unwrap()
        );
    }
    let single_query = rate(few.len(), started);

    // The naive way: one SETBIT / GETBIT round trip per position.
    let client = redis::Client::open(server.url()).unwrap();
    let mut conn = client.get_connection().unwrap();
    let config = filter.config().clone();
    let shard_bits = config.bits() / 16;
    let started = Instant::now();
    for key in few {
        for p in config.positions(&bloom_core::EncodedKey::from_encoded(key)) {
            let _: i64 = redis::cmd("SETBIT")
                .arg(shard_key("bench", (p / shard_bits) as u32))
                .arg(64 + p % shard_bits)
                .arg(1)
                .query(&mut conn)
                .unwrap();
        }
    }
    let per_bit_insert = rate(few.len(), started);
    let started = Instant::now();
    for key in few {
        for p in config.positions(&bloom_core::EncodedKey::from_encoded(key)) {
            let _: i64 = redis::cmd("GETBIT")
                .arg(shard_key("bench", (p / shard_bits) as u32))
                .arg(64 + p % shard_bits)
                .query(&mut conn)
                .unwrap();
        }
    }
    let per_bit_query = rate(few.len(), started);

    println!("| mode | insert keys/s | query keys/s |");
    println!("|---|---|---|");
    println!("| pipelined batches (1024 keys) | {batched_insert:.0} | {batched_query:.0} |");
    println!("| one round trip per key | {single_insert:.0} | {single_query:.0} |");
    println!(
        "| one SETBIT/GETBIT per bit (k = {}) | {per_bit_insert:.0} | {per_bit_query:.0} |",
        config.hashes()
    );
    println!(
        "pipelined / per key: insert {:.1}x, query {:.1}x; per key / per bit: insert {:.1}x, query {:.1}x",
        batched_insert / single_insert,
        batched_query / single_query,
        single_insert / per_bit_insert,
        single_query / per_bit_query
    );
}
