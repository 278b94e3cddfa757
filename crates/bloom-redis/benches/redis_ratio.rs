//! The plain-command path against its peers, measured in the same run on one local
//! `redis-server` started here (no persistence), as paired ratios: each round runs the
//! subject and its peer back to back, and the report gives the median ratio and its
//! interquartile range.
//!
//! - `pipelined / one round trip per key`: `RedisFilter::insert_all` and
//!   `contains_each` of 10^6 keys against `insert` / `contains` one
//!   key at a time (10^4 keys; a rate per key).
//! - `pipelined / server ceiling`: the same against `redis-benchmark` sending the very
//!   commands a batch sends (one shard's `BITFIELD` of a real batch, 256 keys), pipelined 16
//!   deep from 50 clients: the most keys per second the server executes that way.
//! - Redis CPU per key, from `INFO cpu` around the pipelined runs.
//! - Memory: `MEMORY USAGE` of every shard against the filter's bits.
//!
//! Run with `cargo bench -p bloom-redis --bench redis_ratio` (needs `redis-server` and
//! `redis-benchmark`, from `redis-tools`; a few minutes).

use std::process::Command;
use std::time::Instant;

use bloom_core::{EncodedKey, FilterConfig, FilterParams, Layout};
use bloom_redis::{RedisFilter, shard_key};
use bloom_testing::bench::report;
use bloom_testing::redis::{RedisServer, server_cpu};

const KEYS: usize = 1_000_000;
const ONE_BY_ONE: usize = 10_000;
const SHARDS: u32 = 16;
const ROUNDS: usize = 5;
/// Keys of one shard's command in a batch of 4096 over 16 shards.
const KEYS_PER_COMMAND: usize = 256;

fn rate(n: usize, f: impl FnOnce()) -> f64 {
    let start = Instant::now();
    f();
    n as f64 / start.elapsed().as_secs_f64()
}

/// Keys per second `redis-benchmark` gets through with `args`, a command of
/// `KEYS_PER_COMMAND` keys.
fn ceiling(server: &RedisServer, args: &[String]) -> f64 {
    let out = Command::new("redis-benchmark")
        .args(["-h", "127.0.0.1", "-p", &server.port.to_string()])
        .args(["-n", "3000", "-P", "16", "-c", "50", "-q", "--csv"])
        .args(args)
        .output()
        .expect("redis-benchmark (redis-tools) must be installed");
    let text = String::from_utf8_lossy(&out.stdout);
    // CSV: a header line, then "name","rps",...
    let rps: f64 = text
        .lines()
        .nth(1)
        .and_then(|l| l.split(',').nth(1))
        .map(|f| f.trim_matches('"'))
        .and_then(|f| f.parse().ok())
        .unwrap_or_else(|| panic!("redis-benchmark gave no rate: {text}"));
    rps * KEYS_PER_COMMAND as f64
}

/// One shard's `BITFIELD` of a real batch: the first `KEYS_PER_COMMAND` keys of shard 0.
fn shard_command(config: &FilterConfig, name: &str, write: bool) -> Vec<String> {
    let shard_bits = config.bits() / u64::from(SHARDS);
    let mut args = vec![
        if write { "BITFIELD" } else { "BITFIELD_RO" }.to_owned(),
        shard_key(name, 0),
    ];
    for offset in [0, 64 + shard_bits] {
        args.extend(["GET".into(), "i64".into(), offset.to_string()]);
    }
    let mut found = 0;
    for i in 0.. {
        let key = format!("key-{i:012}");
        let positions = config.positions(&EncodedKey::from_encoded(key.as_bytes()));
        let positions = positions.as_slice();
        if positions[0] / shard_bits != 0 {
            continue;
        }
        for p in positions {
            let offset = (64 + p % shard_bits).to_string();
            if write {
                args.extend(["SET".into(), "u1".into(), offset, "1".into()]);
            } else {
                args.extend(["GET".into(), "u1".into(), offset]);
            }
        }
        found += 1;
        if found == KEYS_PER_COMMAND {
            break;
        }
    }
    args
}

fn main() {
    let server = RedisServer::start();
    let target = server.target();
    // Planned as `bloom redis create --items --fpr` plans: each shard fills its allocation.
    let params = bloom_redis::fit_to_allocator(
        FilterParams::planned(Layout::sharded(SHARDS).unwrap(), KEYS as u64, 0.01).unwrap(),
    );
    let keys: Vec<Vec<u8>> = (0..KEYS)
        .map(|i| format!("key-{i:012}").into_bytes())
        .collect();
    let strangers: Vec<Vec<u8>> = (0..KEYS)
        .map(|i| format!("stranger-{i:012}").into_bytes())
        .collect();

    let (mut add_rate, mut check_rate) = (Vec::new(), Vec::new());
    let (mut add_vs_one, mut check_vs_one) = (Vec::new(), Vec::new());
    let (mut add_vs_ceiling, mut check_vs_ceiling) = (Vec::new(), Vec::new());
    let (mut add_cpu, mut check_cpu) = (Vec::new(), Vec::new());
    let mut memory = Vec::new();
    for round in 0..ROUNDS {
        let name = format!("bench{round}");
        let filter = RedisFilter::create(&target, &name, FilterConfig::new(params)).unwrap();
        let write_command = shard_command(filter.config(), &name, true);
        let read_command = shard_command(filter.config(), &name, false);

        let cpu = server_cpu(&server);
        let add = rate(KEYS, || {
            filter
                .insert_all(
                    keys.iter()
                        .map(|k| bloom_core::EncodedKey::from_encoded(k.as_ref())),
                )
                .unwrap();
        });
        add_cpu.push((server_cpu(&server) - cpu) / KEYS as f64 * 1e6);
        let add_ceiling = ceiling(&server, &write_command);
        let cpu = server_cpu(&server);
        let mut answers = Vec::new();
        let check = rate(KEYS, || {
            answers = filter
                .contains_each(
                    strangers
                        .iter()
                        .map(|k| bloom_core::EncodedKey::from_encoded(k.as_ref())),
                )
                .unwrap();
        });
        check_cpu.push((server_cpu(&server) - cpu) / KEYS as f64 * 1e6);
        let check_ceiling = ceiling(&server, &read_command);
        // Every added key is answered maybe; the strangers mostly absent.
        assert!(
            filter
                .contains_each(
                    keys[..10_000]
                        .iter()
                        .map(|k| bloom_core::EncodedKey::from_encoded(k.as_ref()))
                )
                .unwrap()
                .iter()
                .all(|&m| m)
        );
        let maybe = answers.iter().filter(|&&m| m).count();
        assert!(maybe < KEYS / 50, "{maybe} strangers answered maybe");

        let one_add = rate(ONE_BY_ONE, || {
            for key in &strangers[..ONE_BY_ONE] {
                filter.insert(&EncodedKey::from_encoded(key)).unwrap();
            }
        });
        let one_check = rate(ONE_BY_ONE, || {
            for key in &keys[..ONE_BY_ONE] {
                assert!(filter.contains(&EncodedKey::from_encoded(key)).unwrap());
            }
        });

        let used: u64 = (0..SHARDS)
            .map(|s| {
                server
                    .cli(&["MEMORY", "USAGE", &shard_key(&name, s), "SAMPLES", "0"])
                    .trim()
                    .parse::<u64>()
                    .unwrap()
            })
            .sum();
        memory.push(used as f64 / (params.bits() as f64 / 8.0));

        add_rate.push(add);
        check_rate.push(check);
        add_vs_one.push(add / one_add);
        check_vs_one.push(check / one_check);
        add_vs_ceiling.push(add / add_ceiling);
        check_vs_ceiling.push(check / check_ceiling);
        RedisFilter::delete(&target, &name).unwrap();
    }
    println!(
        "10^6 keys, m = {} bits, k = {}, {SHARDS} shards, one local redis-server",
        params.bits(),
        params.hashes()
    );
    report("add keys/s (pipelined)", add_rate);
    report("check keys/s (pipelined)", check_rate);
    report("add: pipelined / one round trip per key", add_vs_one);
    report("check: pipelined / one round trip per key", check_vs_one);
    report("add: pipelined / redis-benchmark ceiling", add_vs_ceiling);
    report(
        "check: pipelined / redis-benchmark ceiling",
        check_vs_ceiling,
    );
    report("add: Redis CPU per key (us)", add_cpu);
    report("check: Redis CPU per key (us)", check_cpu);
    report("Redis memory / filter bits", memory);
}
