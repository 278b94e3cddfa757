//! The `bloom` module path and the plain path against RedisBloom, on one local
//! `redis-server` (no persistence) with both modules loaded, measured in the same run as
//! paired ratios: each round runs RedisBloom, the module path and the plain path back to back
//! on 10^6 keys, and the report gives the median ratio and its interquartile range.
//!
//! - RedisBloom: `BF.RESERVE rb 0.01 1000000 NONSCALING`, then `BF.MADD` / `BF.MEXISTS` of
//!   1,000 keys per command, 16 commands per pipeline; and its default, a scaling filter,
//!   whose first link works at half the error asked (`ERROR_TIGHTENING_RATIO`). Our filters
//!   are planned for the false-positive rate RedisBloom reaches, measured here first, so that
//!   both are compared at the same rate.
//! - The module path: `RedisFilter::insert_all` / `contains_each` with
//!   `ModuleUse::Required` (16 to 32 shards, as `plan_for_allocator` picks; a batch of about
//!   1,000 keys per shard is one `BLOOM.MADD` per shard).
//! - The plain path: the same with `ModuleUse::Never` (`BITFIELD`s).
//! - Per path: keys per second, Redis CPU per key (`INFO cpu` around each run), the measured
//!   false-positive rate over 10^6 absent keys, and the memory the filter takes
//!   (`used_memory_dataset` after the run less before its creation).
//!
//! Run with `REDISBLOOM_MODULE=/path/to/redisbloom.so cargo bench -p bloom-redis --bench
//! module_ratio`. It loads the release build of the module
//! (`cargo build --release -p bloom-redis-module`; or `$BLOOM_REDIS_MODULE`). RedisBloom
//! v2.8 builds from its public source and loads into Redis 7.0.

use std::path::PathBuf;
use std::time::Instant;

use bloom_core::{FilterConfig, PositionRule};
use bloom_redis::{ModuleUse, RedisFilter, plan_for_allocator};
use bloom_testing::bench::report;
use bloom_testing::redis::{RedisServer, server_cpu};

const KEYS: usize = 1_000_000;
/// The fewest shards; `plan_for_allocator` may pick up to twice as many.
const SHARDS: u32 = 16;
const ROUNDS: usize = 5;
const PER_COMMAND: usize = 1_000;
const PER_PIPELINE: usize = 16;

/// The dataset's bytes as the allocator counts them (`used_memory_dataset`: what Redis
/// allocated, less its own overhead and the clients' buffers). `MEMORY USAGE` of a module's
/// type is what the module reports, not what it allocated, so only this compares the two.
fn dataset(server: &RedisServer) -> i64 {
    server
        .cli(&["INFO", "memory"])
        .lines()
        .find_map(|l| l.trim().strip_prefix("used_memory_dataset:")?.parse().ok())
        .unwrap_or(0)
}

/// One run of a path: keys per second and server CPU per key (µs) for adds and checks, the
/// false-positive rate, and the bytes its keys take.
struct Run {
    add: (f64, f64),
    check: (f64, f64),
    fpr: f64,
    bytes: i64,
}

/// Runs `f` over `n` keys: keys per second and the server's CPU µs per key.
fn timed(server: &RedisServer, n: usize, f: impl FnOnce()) -> (f64, f64) {
    let cpu = server_cpu(server);
    let start = Instant::now();
    f();
    let rate = n as f64 / start.elapsed().as_secs_f64();
    (rate, (server_cpu(server) - cpu) / n as f64 * 1e6)
}

fn redisbloom(server: &RedisServer, scaling: bool, present: &[String], absent: &[String]) -> Run {
    let mut conn = redis::Client::open(server.url())
        .unwrap()
        .get_connection()
        .unwrap();
    let _: () = redis::cmd("DEL").arg("rb").query(&mut conn).unwrap();
    let before = dataset(server);
    let mut reserve = redis::cmd("BF.RESERVE");
    reserve.arg("rb").arg(0.01).arg(KEYS);
    if !scaling {
        reserve.arg("NONSCALING");
    }
    let _: () = reserve.query(&mut conn).unwrap();
    let mut send = |command: &str, keys: &[String]| -> usize {
        let mut hits = 0;
        for pipeline in keys.chunks(PER_COMMAND * PER_PIPELINE) {
            let mut pipe = redis::pipe();
            for chunk in pipeline.chunks(PER_COMMAND) {
                pipe.cmd(command).arg("rb").arg(chunk);
            }
            let replies: Vec<Vec<i64>> = pipe.query(&mut conn).unwrap();
            hits += replies.iter().flatten().filter(|&&v| v == 1).count();
        }
        hits
    };
    let add = timed(server, present.len(), || {
        send("BF.MADD", present);
    });
    let mut found = 0;
    let check = timed(server, present.len() + absent.len(), || {
        assert_eq!(send("BF.MEXISTS", present), present.len());
        found = send("BF.MEXISTS", absent);
    });
    Run {
        add,
        check,
        fpr: found as f64 / absent.len() as f64,
        bytes: dataset(server) - before,
    }
}

fn ours(
    server: &RedisServer,
    module: ModuleUse,
    name: &str,
    config: &FilterConfig,
    present: &[String],
    absent: &[String],
) -> Run {
    let target = server.target().with_module(module);
    let _ = RedisFilter::delete(&target, name);
    let before = dataset(server);
    let filter = RedisFilter::create(&target, name, config.clone()).unwrap();
    let add = timed(server, present.len(), || {
        filter.insert_all(present).unwrap();
    });
    let mut found = 0;
    let check = timed(server, present.len() + absent.len(), || {
        assert!(filter.contains_each(present).unwrap().iter().all(|&m| m));
        found = filter
            .contains_each(absent)
            .unwrap()
            .iter()
            .filter(|&&m| m)
            .count();
    });
    Run {
        add,
        check,
        fpr: found as f64 / absent.len() as f64,
        bytes: dataset(server) - before,
    }
}

fn main() {
    let Some(redisbloom_so) = std::env::var_os("REDISBLOOM_MODULE").map(PathBuf::from) else {
        eprintln!(
            "set REDISBLOOM_MODULE to RedisBloom's shared object (v2.8 builds from its public source and loads into Redis 7.0)"
        );
        std::process::exit(2);
    };
    let module = bloom_testing::redis::release_module_path();
    let server = RedisServer::start_with_module_file(
        module,
        &["--loadmodule", redisbloom_so.to_str().unwrap()],
    );
    let present: Vec<String> = (0..KEYS).map(|i| format!("k-{i}")).collect();
    let absent: Vec<String> = (0..KEYS).map(|i| format!("absent-{i}")).collect();
    // RedisBloom's default (a scaling filter, whose first link works at half the error
    // asked) and its NONSCALING filter; ours at the rate each reaches.
    for scaling in [true, false] {
        compare(&server, scaling, &present, &absent);
    }
}

fn compare(server: &RedisServer, scaling: bool, present: &[String], absent: &[String]) {
    let first = redisbloom(server, scaling, present, absent);
    // Our filters at the rate RedisBloom reaches (at least 1 in 10^4), with the shard count
    // from 16 to 32 that wastes least of what jemalloc allocates (as `bloom redis create
    // --items --fpr` plans them).
    let fpr = first.fpr.max(1e-4);
    let params = plan_for_allocator(
        PositionRule::Xxh3_128,
        KEYS as u64,
        fpr,
        SHARDS..=2 * SHARDS,
    )
    .unwrap();
    let config = FilterConfig::new(params);
    let kind = if scaling {
        "default (scaling)"
    } else {
        "NONSCALING"
    };
    println!(
        "==== RedisBloom {kind}, error 0.01, reaches {:.5}; ours planned for it: m = {} bits, k = {}, {} shards",
        first.fpr,
        config.bits(),
        config.hashes(),
        config.layout().shards()
    );

    let mut table: Vec<(&str, Vec<Run>)> = vec![
        ("RedisBloom BF.MADD/BF.MEXISTS", vec![first]),
        ("module BLOOM.MADD/BLOOM.MEXISTS", Vec::new()),
        ("plain BITFIELD", Vec::new()),
    ];
    for round in 0..ROUNDS {
        if round > 0 {
            let run = redisbloom(server, scaling, present, absent);
            table[0].1.push(run);
        }
        let run = ours(
            server,
            ModuleUse::Required,
            "module",
            &config,
            present,
            absent,
        );
        table[1].1.push(run);
        let run = ours(server, ModuleUse::Never, "plain", &config, present, absent);
        table[2].1.push(run);
    }
    for (name, runs) in &table {
        println!("== {name}");
        report("add keys/s", runs.iter().map(|r| r.add.0).collect());
        report("check keys/s", runs.iter().map(|r| r.check.0).collect());
        report(
            "add: Redis CPU per key (us)",
            runs.iter().map(|r| r.add.1).collect(),
        );
        report(
            "check: Redis CPU per key (us)",
            runs.iter().map(|r| r.check.1).collect(),
        );
        report("false-positive rate", runs.iter().map(|r| r.fpr).collect());
        report(
            "Redis memory, used_memory_dataset (bytes)",
            runs.iter().map(|r| r.bytes as f64).collect(),
        );
    }
    let ratio = |path: usize, f: fn(&Run) -> f64| -> Vec<f64> {
        table[path]
            .1
            .iter()
            .zip(&table[0].1)
            .map(|(ours, peer)| f(ours) / f(peer))
            .collect()
    };
    for (path, name) in [(1, "module"), (2, "plain")] {
        println!("== {name} / RedisBloom, paired by round");
        report("add keys/s ratio", ratio(path, |r| r.add.0));
        report("check keys/s ratio", ratio(path, |r| r.check.0));
        report("add CPU per key ratio", ratio(path, |r| r.add.1));
        report("check CPU per key ratio", ratio(path, |r| r.check.1));
        report("memory ratio", ratio(path, |r| r.bytes as f64));
    }
}
