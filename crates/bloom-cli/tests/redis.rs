//! `bloom redis` against real `redis-server` processes (and a three-node cluster): answers
//! as `bloom check` gives them for the exported snapshot, and errors that name their cause.

mod common;

use bloom_testing::redis::{RedisCluster, RedisServer};
use common::{bloom, run, stdout};

fn at(url: &str, name: &str) -> Vec<String> {
    vec!["--url".into(), url.into(), "--name".into(), name.into()]
}

#[test]
fn create_add_check_export_import_info_delete() {
    let server = RedisServer::start();
    let url = server.url();
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys.txt");
    let inserted: String = (0..2000).map(|i| format!("order-{i}\n")).collect();
    std::fs::write(&keys, &inserted).unwrap();
    let probes = dir.path().join("probes.txt");
    let probe_keys: String = (1500..4000).map(|i| format!("order-{i}\n")).collect();
    std::fs::write(&probes, &probe_keys).unwrap();

    bloom()
        .args(["redis", "create"])
        .args(at(&url, "orders"))
        .args(["--items", "5000", "--fpr", "0.01", "--shards", "8"])
        .assert()
        .success();
    bloom()
        .args(["redis", "add"])
        .args(at(&url, "orders"))
        .arg("--keys")
        .arg(&keys)
        .assert()
        .success();
    let from_redis = stdout(
        bloom()
            .args(["redis", "check"])
            .args(at(&url, "orders"))
            .arg("--keys")
            .arg(&probes),
    );
    assert_eq!(from_redis.lines().count(), 2500);
    assert!(
        from_redis
            .lines()
            .take(500)
            .all(|l| l.starts_with("maybe\t"))
    );

    let snapshot = dir.path().join("orders.bloom");
    bloom()
        .args(["redis", "export"])
        .args(at(&url, "orders"))
        .arg("-o")
        .arg(&snapshot)
        .assert()
        .success();
    // To standard output: the same bytes, and no file named `-`.
    let piped = bloom()
        .current_dir(dir.path())
        .args(["redis", "export"])
        .args(at(&url, "orders"))
        .args(["-o", "-"])
        .output()
        .unwrap();
    assert!(piped.status.success());
    assert_eq!(piped.stdout, std::fs::read(&snapshot).unwrap());
    assert!(!dir.path().join("-").exists());
    let from_file = stdout(
        bloom()
            .arg("check")
            .arg(&snapshot)
            .arg("--keys")
            .arg(&probes),
    );
    assert_eq!(from_redis, from_file);

    bloom()
        .args(["redis", "import"])
        .arg(&snapshot)
        .args(at(&url, "orders-copy"))
        .assert()
        .success();
    let json: serde_json::Value = serde_json::from_str(&stdout(
        bloom()
            .args(["redis", "info", "--json"])
            .args(at(&url, "orders-copy")),
    ))
    .unwrap();
    // The layout is the object `inspect` shows; the estimates have its names too.
    assert_eq!(
        json["layout"],
        serde_json::json!({"id": 5, "name": "sharded-v2", "parameter": 8})
    );
    assert_eq!(json["item_count"], 2000);
    let inspected: serde_json::Value =
        serde_json::from_str(&stdout(bloom().arg("inspect").arg(&snapshot).arg("--json"))).unwrap();
    for key in [
        "layout",
        "position_rule",
        "key_encoding",
        "bit_count",
        "hash_count",
        "set_bits",
        "fill_ratio",
        "estimated_items",
        "estimated_false_positive_rate",
        "item_count",
        "unicode_version_normalization",
        "unicode_version_casing",
        "unicode_tables_match_this_build",
        "planned_capacity",
        "target_false_positive_rate",
        "false_positive_rate_limit",
        "remaining_capacity",
        "over_capacity",
    ] {
        assert_eq!(json[key], inspected[key], "{key}");
    }
    // The plan of `create --items --fpr` went along through export and import.
    assert_eq!(json["planned_capacity"], 5000);
    assert_eq!(json["remaining_capacity"], 3000);
    assert_eq!(json["over_capacity"], false);
    // No process measured the new filter yet.
    assert_eq!(json["observed_absent_queries"], 0);
    assert_eq!(
        json["observed_false_positive_rate"],
        serde_json::Value::Null
    );
    assert_eq!(json["observed_over_target"], false);
    // What the processes sharing it measure (`SharedFilteredStore::metrics` records each
    // one's), judged against the plan: 120 of 10,000 is chance at 1 %, 900 of 30,000 is not.
    let filter =
        bloom_redis::RedisFilter::open(&bloom_redis::RedisTarget::single(&url), "orders-copy")
            .unwrap();
    filter.record_observed(120, 10_000).unwrap();
    let info = |name: &str| -> (serde_json::Value, String) {
        let json = serde_json::from_str(&stdout(
            bloom()
                .args(["redis", "info", "--json"])
                .args(at(&url, name)),
        ))
        .unwrap();
        (
            json,
            stdout(bloom().args(["redis", "info"]).args(at(&url, name))),
        )
    };
    let (json, text) = info("orders-copy");
    assert_eq!(json["observed_false_positives"], 120);
    assert_eq!(json["observed_absent_queries"], 10_000);
    assert_eq!(json["observed_false_positive_rate"], 0.012);
    assert_eq!(json["observed_over_target"], false);
    assert!(
        text.contains("measured false-positive rate: 0.012 (120 false positives of 10000 queries for absent keys, by every process): within chance of the target"),
        "{text}"
    );
    filter.record_observed(780, 20_000).unwrap();
    let (json, text) = info("orders-copy");
    assert_eq!(json["observed_false_positives"], 900);
    assert_eq!(json["observed_over_target"], true);
    assert!(text.contains("OVER THE TARGET"), "{text}");
    // A snapshot on standard input imports as the file does.
    bloom()
        .args(["redis", "import", "-"])
        .args(at(&url, "orders-stdin"))
        .write_stdin(std::fs::read(&snapshot).unwrap())
        .assert()
        .success();
    let piped: serde_json::Value = serde_json::from_str(&stdout(
        bloom()
            .args(["redis", "info", "--json"])
            .args(at(&url, "orders-stdin")),
    ))
    .unwrap();
    assert_eq!(piped["set_bits"], json["set_bits"]);
    let (code, out, _) = run(bloom()
        .args(["redis", "check", "--exit-status"])
        .args(at(&url, "orders-copy"))
        .args(["order-1", "never-seen-1", "never-seen-2"]));
    assert_eq!(code, 4, "{out}");

    bloom()
        .args(["redis", "delete"])
        .args(at(&url, "orders-copy"))
        .assert()
        .success();
    let (code, _, err) = run(bloom()
        .args(["redis", "check"])
        .args(at(&url, "orders-copy"))
        .arg("x"));
    assert_eq!(code, 1);
    assert!(err.contains("no filter named orders-copy"), "{err}");
}

#[test]
fn errors_name_their_cause_and_never_answer() {
    let server = RedisServer::start();
    let url = server.url();
    bloom()
        .args(["redis", "create"])
        .args(at(&url, "f"))
        .args(["--bits", "8192", "--hashes", "4", "--shards", "4"])
        .assert()
        .success();
    // A shard lost: no answer, exit 1, the shard named.
    server.cli(&["DEL", "bloom:{f:2}"]);
    let (code, out, err) = run(bloom()
        .args(["redis", "check"])
        .args(at(&url, "f"))
        .arg("k"));
    assert_eq!((code, out.as_str()), (1, ""), "{err}");
    assert!(err.contains("shard 2") && err.contains("lost"), "{err}");
    // Metadata claiming shards past what Redis holds per key (1 GiB each): a damaged filter
    // (exit 1), never a usage error with advice on how many shards to create.
    server.cli(&["HSET", "bloom:{f}:meta", "bits", "34359738368"]);
    let (code, out, err) = run(bloom()
        .args(["redis", "check"])
        .args(at(&url, "f"))
        .arg("k"));
    assert_eq!((code, out.as_str()), (1, ""), "{err}");
    assert!(
        err.contains("damaged") && !err.contains("use at least"),
        "{err}"
    );
    server.cli(&["HSET", "bloom:{f}:meta", "bits", "8192"]);
    // Shards retyped by hand: damaged (exit 1), not Redis failing.
    for s in 0..4 {
        let shard = format!("bloom:{{f:{s}}}");
        server.cli(&["DEL", &shard]);
        server.cli(&["LPUSH", &shard, "x"]);
    }
    let (code, out, err) = run(bloom()
        .args(["redis", "add"])
        .args(at(&url, "f"))
        .args(["k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8"]));
    assert_eq!((code, out.as_str()), (1, ""), "{err}");
    assert!(
        err.contains("another type") && err.contains("damaged"),
        "{err}"
    );
    // A scalable chain has no sharded form: refused by name, and no filter is made.
    let chain = common::fixtures("v3").join("scalable-xxh3.bloom");
    let (code, _, err) = run(bloom()
        .args(["redis", "import"])
        .args(at(&url, "chain"))
        .arg(&chain));
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("cannot be held in Redis"), "{err}");
    assert_eq!(server.cli(&["EXISTS", "bloom:{chain}:meta"]).trim(), "0");
    // Nothing listening: the environment failed (exit 3).
    let (code, out, err) = run(bloom()
        .args(["redis", "check", "--timeout", "30"])
        .args(at("redis://127.0.0.1:1/", "f"))
        .arg("k"));
    assert_eq!((code, out.as_str()), (3, ""), "{err}");
    assert!(err.to_lowercase().contains("refused"), "{err}");
    // Usage errors.
    for args in [
        vec![
            "redis", "create", "--url", &url, "--name", "bad name", "--bits", "1024", "--hashes",
            "2",
        ],
        vec![
            "redis", "create", "--url", &url, "--name", "g", "--bits", "1000", "--hashes", "2",
        ],
        vec!["redis", "check", "--url", &url, "--name", "f"],
        vec![
            "redis",
            "check",
            "--url",
            &url,
            "--name",
            "f",
            "--timeout",
            "0",
            "k",
        ],
    ] {
        let (code, _, err) = run(bloom().args(&args));
        assert_eq!(code, 2, "{args:?}: {err}");
    }
    // A URL that is not one is a usage error, and its password is not shown.
    let (code, out, err) = run(bloom()
        .args(["redis", "check"])
        .args(at("redis://:s3cret-pw@127.0.0.1:notaport/", "f"))
        .arg("k"));
    assert_eq!((code, out.as_str()), (2, ""), "{err}");
    assert!(
        err.contains("not a Redis URL") && !err.contains("s3cret-pw"),
        "{err}"
    );
    // A URL given where no argument is expected: a usage error that quotes it without its
    // password.
    let (code, _, err) = run(bloom().args([
        "redis",
        "info",
        "--name",
        "f",
        "redis://:s3cret-pw@127.0.0.1:1/",
    ]));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("redis://***@127.0.0.1:1/") && !err.contains("s3cret-pw"),
        "{err}"
    );
    // The password in a URL is never printed.
    let (_, _, err) = run(bloom()
        .args(["redis", "check", "--timeout", "30"])
        .args(at("redis://:s3cret-pw@127.0.0.1:1/", "f"))
        .arg("k"));
    assert!(!err.contains("s3cret-pw"), "{err}");
}

#[test]
fn a_cluster_through_any_node() {
    let cluster = RedisCluster::start();
    let url = cluster.nodes[0].url();
    let other = cluster.nodes[1].url();
    bloom()
        .args(["redis", "create", "--cluster"])
        .args(at(&url, "c"))
        .args(["--items", "1000", "--fpr", "0.01", "--shards", "6"])
        .assert()
        .success();
    bloom()
        .args(["redis", "add", "--cluster"])
        .args(at(&other, "c"))
        .args(["x", "y", "z"])
        .assert()
        .success();
    let out = stdout(
        bloom()
            .args(["redis", "check", "--cluster"])
            .args(at(&url, "c"))
            .args(["x", "y", "z"]),
    );
    assert_eq!(out.lines().filter(|l| l.starts_with("maybe\t")).count(), 3);
}

/// `--module`: the module's commands and the plain ones answer alike on one filter, and a
/// server without the module refuses `--module required` (exit 3) without touching Redis's
/// data.
#[test]
fn the_module_and_plain_commands_answer_alike() {
    let with = RedisServer::start_with_module(&[]);
    let url = with.url();
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys.txt");
    std::fs::write(
        &keys,
        (0..3000).map(|i| format!("id-{i}\n")).collect::<String>(),
    )
    .unwrap();
    let probes = dir.path().join("probes.txt");
    std::fs::write(
        &probes,
        (2000..6000)
            .map(|i| format!("id-{i}\n"))
            .collect::<String>(),
    )
    .unwrap();
    let redis = |command: &str, module: &str| {
        let mut cmd = bloom();
        cmd.args(["redis", command])
            .args(at(&url, "ids"))
            .args(["--module", module]);
        cmd
    };
    redis("create", "required")
        .args(["--items", "5000", "--fpr", "0.01", "--shards", "4"])
        .assert()
        .success();
    redis("add", "required")
        .arg("--keys")
        .arg(&keys)
        .assert()
        .success();
    let module = stdout(redis("check", "required").arg("--keys").arg(&probes));
    let plain = stdout(redis("check", "never").arg("--keys").arg(&probes));
    assert_eq!(module.lines().count(), 4000);
    assert!(module == plain, "both paths answer alike");
    assert!(module.lines().take(1000).all(|l| l.starts_with("maybe\t")));
    assert!(
        with.cli(&["INFO", "commandstats"])
            .contains("cmdstat_bloom.mexists"),
        "the module's commands were used"
    );

    let without = RedisServer::start();
    let (code, _, stderr) = run(bloom()
        .args(["redis", "create"])
        .args(at(&without.url(), "ids"))
        .args(["--module", "required", "--items", "5000", "--fpr", "0.01"]));
    assert_eq!(code, 3, "{stderr}");
    assert!(stderr.contains("module"), "{stderr}");
    assert_eq!(without.cli(&["DBSIZE"]).trim(), "0", "nothing was written");
    let (code, _, _) = run(bloom()
        .args(["redis", "check"])
        .args(at(&url, "ids"))
        .args(["--module", "sometimes", "--keys"])
        .arg(&probes));
    assert_eq!(code, 2);
}
