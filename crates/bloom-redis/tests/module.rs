//! The `bloom` Redis module (crate `bloom-redis-module`) loaded into real `redis-server`s:
//! the module's commands and the plain `BITFIELD`s write the same bits, answer the same and
//! export the same snapshot, whichever wrote the filter; lost shards are never answered or
//! written; a node or user without the module gets plain commands; replicas and the AOF
//! carry the module's writes.
//!
//! The rest of the Redis suites (faults included: eviction, restarts, failovers, a reshard)
//! run through the module too, in `cargo xtask test`'s second pass
//! (`BLOOM_REDIS_TEST_PATH=module`).

use std::time::Duration;

use bloom_core::{BloomFilter, Filter, FilterConfig, FilterParams, KeyEncoding, Layout};
use bloom_format::DatasetGeneration;
use bloom_redis::{Durability, ModuleUse, RedisFilter, RedisFilterError, shard_key};
use bloom_redis_protocol::config::config_text;
use bloom_testing::redis::{RedisCluster, RedisServer};
use bloom_testing::wait::wait_for;

fn config(shards: u32, items: u64) -> FilterConfig {
    let params = FilterParams::planned(Layout::sharded(shards).unwrap(), items, 0.01).unwrap();
    FilterConfig::new(params).with_encoding(KeyEncoding::Nfc)
}

fn keys(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

/// A user `name` with `rules`, and a target that connects as it.
fn acl_user(server: &RedisServer, name: &str, rules: &[&str]) -> bloom_redis::RedisTarget {
    let password = format!("{name}-pw");
    let pass = format!(">{password}");
    let mut args = vec!["ACL", "SETUSER", name, "on", pass.as_str()];
    args.extend(rules);
    assert_eq!(server.cli(&args).trim(), "OK");
    let url = format!("redis://{name}:{password}@127.0.0.1:{}/", server.port);
    bloom_redis::RedisTarget::single(url).with_timeout(Duration::from_secs(10))
}

/// Every probe's answer, through a handle.
fn answers(filter: &RedisFilter, probes: &[String]) -> Vec<bool> {
    filter.contains_each(probes).unwrap()
}

fn export_bytes(filter: &RedisFilter) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f.bloom");
    filter.export(&path).unwrap();
    std::fs::read(path).unwrap()
}

#[test]
fn both_paths_write_the_same_bits_and_answer_the_same() {
    let server = RedisServer::start_with_module(&[]);
    let plain_target = server.target().with_module(ModuleUse::Never);
    let module_target = server.target().with_module(ModuleUse::Required);
    let (first, second) = (keys("first", 6_000), keys("second", 6_000));
    let probes: Vec<String> = first
        .iter()
        .chain(&second)
        .cloned()
        .chain(keys("absent", 20_000))
        .chain(["café".to_owned(), "cafe\u{301}".to_owned()])
        .collect();
    // Created one way, written both ways, in both orders.
    for (name, create_with, then_with) in [
        ("made-plain", &plain_target, &module_target),
        ("made-module", &module_target, &plain_target),
    ] {
        let config = config(8, 20_000);
        let made = RedisFilter::create(create_with, name, config.clone()).unwrap();
        let other = RedisFilter::open(then_with, name).unwrap();
        let mut local = BloomFilter::new(config).unwrap();
        made.insert_all(&first).unwrap();
        local.insert_all(&first);
        let changed = other.insert_all(&second).unwrap();
        local.insert_all(&second);
        assert!(other.insert("café").unwrap());
        assert!(
            !made.insert("cafe\u{301}").unwrap(),
            "NFC makes them one key"
        );
        local.insert("café");
        assert!(changed > 5_900, "{changed}");

        let expected: Vec<bool> = local.contains_each(&probes).collect();
        assert!(answers(&made, &probes) == expected, "{name}");
        assert!(answers(&other, &probes) == expected, "{name}");
        assert!(expected[..12_000].iter().all(|&maybe| maybe));
        let exported = export_bytes(&made);
        assert!(exported == export_bytes(&other), "{name}");
        assert!(
            exported == local.to_snapshot(0).encode().to_vec(),
            "{name}: the export is the local filter's snapshot"
        );
        // The module's shards are the plain path's, byte for byte and in size: the markers,
        // the bits and the write counter.
        let key = shard_key(name, 3);
        assert_eq!(
            server.cli(&["STRLEN", &key]).trim(),
            (made.config().bits() / 8 / 8 + 24).to_string()
        );
    }
    let usage = |name: &str| -> u64 {
        server
            .cli(&["MEMORY", "USAGE", &shard_key(name, 0)])
            .trim()
            .parse()
            .unwrap()
    };
    assert_eq!(usage("made-plain"), usage("made-module"));
}

#[test]
fn the_module_never_answers_or_writes_a_lost_shard() {
    let server = RedisServer::start_with_module(&[]);
    let target = server.target().with_module(ModuleUse::Required);
    let filter = RedisFilter::create(&target, "seen", config(4, 1_000)).unwrap();
    let other = RedisFilter::create(&target, "other", config(4, 1_000)).unwrap();
    let inserted = keys("k", 200);
    filter.insert_all(&inserted).unwrap();
    other.insert_all(&inserted).unwrap();
    let key = shard_key("seen", 1);

    // Another filter's shard under this name: its markers are not this filter's.
    server.cli(&["COPY", &shard_key("other", 1), &key, "REPLACE"]);
    assert!(matches!(
        filter.contains_each(&inserted),
        Err(RedisFilterError::LostState { shard: 1, .. })
    ));
    // Emptied, then deleted: never answered, and an insert creates nothing.
    server.cli(&["SET", &key, ""]);
    assert!(matches!(
        filter.insert_all(&inserted),
        Err(RedisFilterError::LostState { shard: 1, .. })
    ));
    assert_eq!(server.cli(&["STRLEN", &key]).trim(), "0");
    server.cli(&["DEL", &key]);
    let fresh = RedisFilter::open(&target, "seen").unwrap();
    assert!(matches!(
        fresh.insert_all(&inserted),
        Err(RedisFilterError::LostState { shard: 1, .. })
    ));
    assert_eq!(server.cli(&["EXISTS", &key]).trim(), "0");
    // One byte past the shard's end is lost too (BITFIELD would not see it; the module does).
    let shard = shard_key("seen", 2);
    let len: u64 = server.cli(&["STRLEN", &shard]).trim().parse().unwrap();
    server.cli(&["SETRANGE", &shard, &len.to_string(), "x"]);
    assert!(matches!(
        fresh.contains_each(&inserted),
        Err(RedisFilterError::LostState { .. })
    ));
    // A shard turned into another type is refused, not read.
    let shard = shard_key("other", 2);
    server.cli(&["DEL", &shard]);
    server.cli(&["LPUSH", &shard, "x"]);
    assert!(matches!(
        other.contains_each(&inserted),
        Err(RedisFilterError::Server { code, .. }) if code == "WRONGTYPE"
    ));
}

#[test]
fn any_client_can_send_raw_keys_and_bad_arguments_are_refused() {
    let server = RedisServer::start_with_module(&[]);
    let target = server.target().with_module(ModuleUse::Never);
    let config = config(4, 1_000);
    let filter = RedisFilter::create(&target, "seen", config.clone()).unwrap();
    let creation = server.cli(&["HGET", "bloom:{seen}:meta", "creation"]);
    let creation = creation.trim();
    let text = config_text(&config.to_header(DatasetGeneration::ZERO, 0));
    let shard_bits = config.bits() / 4;
    let shard_of = |key: &str| {
        config
            .positions(&config.encoding().encode_str(key))
            .as_slice()[0]
            / shard_bits
    };
    let key = "cafe\u{301}";
    let shard = shard_of(key);
    let shard_name = shard_key("seen", u32::try_from(shard).unwrap());
    let cli = |args: &[&str]| server.cli(args);
    // A command on the key's shard, with this filter's creation and configuration.
    let on_shard = |command: &str, mode: &str, keys: &[&str]| {
        let mut args = vec![command, shard_name.as_str(), creation, text.as_str(), mode];
        args.extend(keys);
        server.cli(&args)
    };

    // A raw key, encoded (NFC) by the module; the plain path then finds it. The reply ends
    // with the shard's write counter, advanced by the command.
    let reply = on_shard("BLOOM.MADD", "RAW", &[key]);
    let lines: Vec<&str> = reply.lines().map(str::trim).collect();
    assert_eq!(lines.len(), 4, "{reply}");
    assert_eq!(lines[2], "0", "new: not all bits were set");
    let count: i64 = lines[3].parse().unwrap();
    let again = on_shard("BLOOM.MADD", "RAW", &[key]);
    assert_eq!(
        again.lines().nth(3).map(str::trim),
        Some((count + 1).to_string().as_str())
    );
    assert!(filter.contains("café").unwrap());
    let reply = on_shard("BLOOM.MEXISTS", "ENCODED", &["café"]);
    assert_eq!(reply.lines().nth(2).map(str::trim), Some("1"));

    // Keys of another shard, bad creations, configurations, modes and types: refused.
    let elsewhere = (0..100)
        .map(|i| format!("x{i}"))
        .find(|k| shard_of(k) != shard)
        .unwrap();
    let reply = on_shard("BLOOM.MADD", "RAW", &[&elsewhere]);
    assert!(reply.starts_with("WRONGSHARD"), "{reply}");
    let reply = cli(&[
        "BLOOM.MADD",
        &shard_name,
        &"0".repeat(32),
        &text,
        "RAW",
        key,
    ]);
    assert!(reply.starts_with("ERR bloom: the creation"), "{reply}");
    let edited = text.replacen("\n7\n", "\n8\n", 1);
    assert_ne!(edited, text);
    let reply = cli(&["BLOOM.MADD", &shard_name, creation, &edited, "RAW", key]);
    assert_eq!(
        reply.lines().count(),
        2,
        "another configuration reads other markers, and writes nothing: {reply}"
    );
    let reply = cli(&["BLOOM.MADD", &shard_name, creation, "1\n2\n", "RAW", key]);
    assert!(reply.starts_with("ERR bloom: the configuration"), "{reply}");
    let reply = on_shard("BLOOM.MADD", "HASHED", &[key]);
    assert!(reply.starts_with("ERR bloom: the mode"), "{reply}");
    let reply = cli(&[
        "BLOOM.MADD",
        "bloom:{seen}:meta",
        creation,
        &text,
        "RAW",
        key,
    ]);
    assert!(
        reply.starts_with("ERR bloom: the key is not a shard key"),
        "{reply}"
    );
    let reply = cli(&[
        "BLOOM.MEXISTS",
        &shard_key("seen", 9),
        creation,
        &text,
        "RAW",
        key,
    ]);
    assert!(reply.starts_with("ERR bloom: shard 9"), "{reply}");
    let reply = on_shard("BLOOM.MADD", "RAW", &["\u{0}ok", "\u{ff}"]);
    assert!(
        !reply.starts_with("ERR"),
        "valid UTF-8 keys are taken: {reply}"
    );
    let reply = cli(&["BLOOM.MADD", &shard_name, creation, &text, "RAW"]);
    assert!(reply.starts_with("ERR wrong number"), "{reply}");
    // A whole shard is never emptied by BLOOM.RESERVE; a command's keys are bounded.
    let reply = cli(&["BLOOM.RESERVE", &shard_name, creation, &text]);
    assert!(reply.starts_with("EXISTS"), "{reply}");
    assert!(filter.contains("café").unwrap());
    let mut conn = redis::Client::open(server.url())
        .unwrap()
        .get_connection()
        .unwrap();
    let many: Vec<String> = (0..200_000).map(|i| i.to_string()).collect();
    let refused: redis::RedisResult<redis::Value> = redis::cmd("BLOOM.MEXISTS")
        .arg(&shard_name)
        .arg(creation)
        .arg(&text)
        .arg("RAW")
        .arg(&many)
        .query(&mut conn);
    let refused = format!("{refused:?}");
    assert!(refused.contains("too many keys"), "{refused}");
    let info = cli(&["BLOOM.INFO"]);
    assert!(
        info.contains("sharded-v2") && info.contains("xxh3-128"),
        "{info}"
    );
    let shard_info = cli(&["BLOOM.SHARD", &shard_name, creation, &text]);
    let fields: Vec<&str> = shard_info.lines().map(str::trim).collect();
    assert_eq!(fields[2], (shard_bits / 8 + 24).to_string(), "{shard_info}");
    assert!(fields[3].parse::<u64>().unwrap() >= u64::from(config.hashes()) - 1);
    // A counted shard: its write counter last.
    assert!(fields[4].parse::<i64>().unwrap() >= 2, "{shard_info}");
    // RESERVE takes COUNTED or nothing.
    let reply = cli(&["BLOOM.RESERVE", "bloom:{spare:0}", creation, &text, "WIDE"]);
    assert!(reply.contains("ERR bloom:"), "{reply}");
}

/// Waits until `replica` has everything `master` sent.
fn caught_up(master: &RedisServer, replica: &RedisServer) {
    let offset = |s: &RedisServer, field: &str| -> u64 {
        s.cli(&["INFO", "replication"])
            .lines()
            .find_map(|l| l.trim().strip_prefix(field)?.parse().ok())
            .unwrap_or(0)
    };
    wait_for("the replica to catch up", || {
        offset(replica, "slave_repl_offset:") >= offset(master, "master_repl_offset:")
    });
}

/// The module's writes reach replicas and the AOF as plain commands: a replica *without* the
/// module holds the same bytes, and after a failover to it (covered by `--replicas`) every
/// acknowledged key is still there; an AOF written through the module loads in a server
/// without it.
#[test]
fn replicas_and_the_aof_need_no_module() {
    let mut master =
        RedisServer::start_with_module(&["--appendonly", "yes", "--appendfsync", "always"]);
    let replica = RedisServer::start();
    replica.cli(&["REPLICAOF", "127.0.0.1", &master.port.to_string()]);
    wait_for("the replica to sync", || {
        replica
            .cli(&["INFO", "replication"])
            .contains("master_link_status:up")
    });
    let target = master.target().with_module(ModuleUse::Required);
    let filter = RedisFilter::create_with(
        &target,
        "seen",
        config(4, 5_000),
        Durability::Replicas {
            replicas: 1,
            timeout_ms: 5_000,
        },
    )
    .unwrap();
    let inserted = keys("k", 3_000);
    filter.insert_all(&inserted).unwrap();
    caught_up(&master, &replica);
    for s in 0..4 {
        let shard = shard_key("seen", s);
        assert!(
            replica.cli(&["GET", &shard]) == master.cli(&["GET", &shard]),
            "shard {s}: the replica without the module has the module's writes"
        );
    }
    assert!(
        !replica.cli(&["INFO", "commandstats"]).contains("bloom."),
        "the replica never ran a module command"
    );
    // A failover to it: the filter's durability covers it, and it answers every key.
    replica.cli(&["REPLICAOF", "NO", "ONE"]);
    let promoted = RedisFilter::open(&replica.target(), "seen").unwrap();
    assert!(
        promoted
            .contains_each(&inserted)
            .unwrap()
            .iter()
            .all(|&maybe| maybe)
    );
    drop((filter, promoted));

    // Killed, and started from its AOF without the module: the same bytes, and the filter
    // judges the restart as one (it asked for replicas, not the AOF).
    let before: Vec<String> = (0..4)
        .map(|s| master.cli(&["GET", &shard_key("seen", s)]))
        .collect();
    master.restart_without_module();
    for (s, bytes) in before.iter().enumerate() {
        let shard = shard_key("seen", u32::try_from(s).unwrap());
        assert!(!bytes.is_empty());
        assert!(
            master.cli(&["GET", &shard]) == *bytes,
            "shard {s}: the AOF replayed the module's writes without the module"
        );
    }
    let filter = RedisFilter::open(&master.target().with_module(ModuleUse::Never), "seen").unwrap();
    assert!(matches!(
        filter.contains_each(&inserted),
        Err(RedisFilterError::Unverified { .. })
    ));
}

#[test]
fn a_node_or_a_user_without_the_module_gets_plain_commands() {
    // Node 0 has no module; Auto finds shards on it and sends them plain commands.
    let cluster = RedisCluster::start_loading(0, 15_000, |i| i != 0);
    let probes: Vec<String> = keys("k", 3_000)
        .into_iter()
        .chain(keys("absent", 3_000))
        .collect();
    let mut expected = None;
    for module in [ModuleUse::Never, ModuleUse::Auto] {
        let name = format!("mixed-{module:?}");
        let target = cluster.target().with_module(module);
        let filter = RedisFilter::create(&target, &name, config(16, 5_000)).unwrap();
        filter.insert_all(&probes[..3_000]).unwrap();
        let got = answers(&filter, &probes);
        assert!(got[..3_000].iter().all(|&maybe| maybe));
        match &expected {
            None => expected = Some((got, export_bytes(&filter))),
            Some((answers, exported)) => {
                assert!(got == *answers, "both paths answer alike");
                // Same configuration and keys: the creation is no part of a snapshot.
                assert!(export_bytes(&filter) == *exported);
            }
        }
    }
    let required = cluster.target().with_module(ModuleUse::Required);
    let refused = RedisFilter::create(&required, "required", config(16, 5_000))
        .and_then(|f| f.insert_all(&probes[..3_000]));
    assert!(matches!(refused, Err(RedisFilterError::ModuleMissing)));

    // A user that may run the plain commands but not the module's.
    let server = RedisServer::start_with_module(&[]);
    let target = acl_user(
        &server,
        "plain",
        &[
            "~*",
            "&*",
            "+@all",
            "-bloom.madd",
            "-bloom.mexists",
            "-bloom.reserve",
        ],
    );
    let filter = RedisFilter::create(&target, "acl", config(4, 5_000)).unwrap();
    filter.insert_all(&probes[..3_000]).unwrap();
    let mut local = BloomFilter::new(config(4, 5_000)).unwrap();
    local.insert_all(&probes[..3_000]);
    let expected: Vec<bool> = local.contains_each(&probes).collect();
    assert!(answers(&filter, &probes) == expected);
    // A reader whose keys are read-only: Redis 7.0 takes the module's commands for writers
    // of their key and refuses them; the plain BITFIELD_RO answers instead.
    let reader = acl_user(
        &server,
        "reader",
        &[
            "resetkeys",
            "%R~*",
            "-@all",
            "+ping",
            "+info",
            "+hgetall",
            "+hmget",
            "+bitfield_ro",
            "+module|list",
            "+bloom.mexists",
        ],
    );
    let read = RedisFilter::open(&reader, "acl").unwrap();
    assert!(answers(&read, &probes) == expected);
    let strict =
        RedisFilter::open(&target.clone().with_module(ModuleUse::Required), "acl").unwrap();
    assert!(matches!(
        strict.contains_each(&probes),
        Err(RedisFilterError::ModuleMissing)
    ));

    // A deletion some of whose DELs are refused still deletes the rest, the metadata last,
    // and says it was refused.
    RedisFilter::create(&target, "wide", config(16, 5_000)).unwrap();
    let partial = acl_user(
        &server,
        "partial",
        &[
            "resetkeys",
            "~bloom:{wide}:meta",
            "~bloom:{wide:?}",
            "~bloom:{wide:?}:epoch",
            "-@all",
            "+ping",
            "+info",
            "+hget",
            "+del",
        ],
    );
    assert!(matches!(
        RedisFilter::delete(&partial, "wide"),
        Err(RedisFilterError::Server { code, .. }) if code == "NOPERM"
    ));
    assert_eq!(server.cli(&["EXISTS", "bloom:{wide}:meta"]).trim(), "0");
    assert_eq!(server.cli(&["EXISTS", &shard_key("wide", 3)]).trim(), "0");
    assert_eq!(server.cli(&["EXISTS", &shard_key("wide", 12)]).trim(), "1");
}
