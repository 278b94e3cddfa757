//! `bloom redis` as an operator meets it, against real servers: a filter Redis may have
//! lost writes of (exit 5, and the way back), URLs kept out of argv, deadlines that bound the
//! whole command, durability on request, TLS with a throwaway CA, and restricted ACL users.

mod common;

use std::time::{Duration, Instant};

use bloom_testing::redis::{Certificates, RedisServer, tls_server};
use common::{bloom, bloom_process, run};
use rustix::process::Signal;

fn key_file(dir: &std::path::Path, name: &str, keys: impl Iterator<Item = String>) -> String {
    let path = dir.join(name);
    let text: String = keys.map(|k| k + "\n").collect();
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

fn answers(out: &str) -> (usize, usize) {
    let maybe = out.lines().filter(|l| l.starts_with("maybe\t")).count();
    let absent = out.lines().filter(|l| l.starts_with("absent\t")).count();
    (maybe, absent)
}

#[test]
fn a_restart_from_an_older_save_exits_5_until_every_key_is_added_again() {
    let mut server = RedisServer::start();
    let url = server.url();
    let dir = tempfile::tempdir().unwrap();
    let first = key_file(dir.path(), "first.txt", (0..3000).map(|i| format!("r-{i}")));
    let second = key_file(
        dir.path(),
        "second.txt",
        (3000..6000).map(|i| format!("r-{i}")),
    );
    let all = key_file(dir.path(), "all.txt", (0..6000).map(|i| format!("r-{i}")));
    let at = ["--url", url.as_str(), "--name", "sync"];
    let ok = |args: &[&str]| {
        let (code, out, err) = run(bloom().args(args));
        assert_eq!(code, 0, "{args:?}: {err}");
        out
    };
    ok(&[
        &["redis", "create", "--items", "10000", "--fpr", "0.01"],
        &at[..],
    ]
    .concat());
    ok(&[&["redis", "add", "--keys", &first], &at[..]].concat());
    server.cli(&["SAVE"]);
    ok(&[&["redis", "add", "--keys", &second], &at[..]].concat());
    server.restart();

    // Every command that reads the filter refuses, with exit 5 and the way out.
    for args in [
        vec!["redis", "check", "--keys", &second],
        vec!["redis", "add", "r-new"],
        vec!["redis", "info"],
        vec!["redis", "export", "-o", "/dev/null"],
    ] {
        let (code, out, err) = run(bloom().args(&args).args(at));
        assert_eq!((code, out.as_str()), (5, ""), "{args:?}: {err}");
        assert!(
            err.contains("may have lost acknowledged writes")
                && err.contains("bloom redis add --complete"),
            "{err}"
        );
    }
    // The way back: every key, --complete.
    let (code, _, err) = run(bloom()
        .args(["redis", "add", "--complete", "--keys", &all])
        .args(at));
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("declared whole"), "{err}");
    let out = ok(&[&["redis", "check", "--keys", &all], &at[..]].concat());
    assert_eq!(answers(&out), (6000, 0));
}

#[test]
fn the_url_can_come_from_the_environment_or_a_file_and_its_password_is_never_shown() {
    let server = RedisServer::start_with(&["--requirepass", "Pa55-w0rd-xyz"]);
    let good = format!("redis://:Pa55-w0rd-xyz@127.0.0.1:{}/", server.port);
    let wrong = format!("redis://:Wr0ng-pa55-abc@127.0.0.1:{}/", server.port);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("redis.url");
    std::fs::write(&file, format!("# the fleet's filter\n\n{good}\n")).unwrap();
    // A named pipe nobody writes to, as the URL file or the CA file: the command ends by its
    // deadline with exit 3, instead of waiting forever to open it.
    let fifo = dir.path().join("nobody-writes");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    for flag in ["--url-file", "--tls-ca"] {
        let mut cmd = bloom();
        cmd.args(["redis", "check", "--name", "f", "--timeout", "1", flag])
            .arg(&fifo)
            .arg("k");
        if flag == "--tls-ca" {
            cmd.env("BLOOM_REDIS_URL", &good);
        }
        let (code, out, err) = run(&mut cmd);
        assert_eq!((code, out.as_str()), (3, ""), "{flag}: {err}");
        assert!(err.contains("nothing to read within 1 s"), "{flag}: {err}");
    }

    let (code, _, err) = run(bloom()
        .args(["redis", "create", "--url-env", "FLEET_REDIS", "--name", "f"])
        .args(["--items", "1000", "--fpr", "0.01"])
        .env("FLEET_REDIS", &good));
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = run(bloom()
        .args(["redis", "add", "--url-file"])
        .arg(&file)
        .args(["--name", "f", "k1"]));
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = run(bloom()
        .args(["redis", "check", "--name", "f", "k1"])
        .env("BLOOM_REDIS_URL", &good));
    assert_eq!((code, out.as_str()), (0, "maybe\tk1\n"), "{err}");

    // A wrong password, an unreachable server, a missing variable: exit 3 or 2, and neither
    // password in any message.
    for (mut cmd, want) in [
        (
            {
                let mut c = bloom();
                c.args(["redis", "check", "--url-env", "V", "--name", "f", "k"])
                    .env("V", &wrong);
                c
            },
            3,
        ),
        (
            {
                let mut c = bloom();
                c.args(["redis", "check", "--url-env", "V", "--name", "f", "k"])
                    .env("V", "redis://:Wr0ng-pa55-abc@127.0.0.1:1/");
                c
            },
            3,
        ),
        (
            {
                let mut c = bloom();
                c.args([
                    "redis",
                    "check",
                    "--url-env",
                    "UNSET_VAR_X",
                    "--name",
                    "f",
                    "k",
                ]);
                c
            },
            2,
        ),
    ] {
        let (code, out, err) = run(&mut cmd);
        assert_eq!((code, out.as_str()), (want, ""), "{err}");
        assert!(
            !err.contains("Pa55-w0rd-xyz") && !err.contains("Wr0ng-pa55-abc"),
            "{err}"
        );
    }
    // Two sources at once, several URLs without --cluster, a directory, an empty file.
    let empty = dir.path().join("empty.url");
    std::fs::write(&empty, "# nothing\n").unwrap();
    for args in [
        vec!["--url", &good, "--url-env", "V"],
        vec!["--url", &good, "--url", &good],
        vec!["--url-file", "/"],
        vec!["--url-file", empty.to_str().unwrap()],
    ] {
        let (code, _, err) = run(bloom()
            .args(["redis", "check", "--name", "f", "k"])
            .args(&args)
            .env("V", &good));
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(!err.contains("Pa55-w0rd-xyz"), "{err}");
    }
}

/// How many `BITFIELD` commands the server has run (an event to wait for).
fn bitfields(server: &RedisServer) -> u64 {
    server
        .cli(&["INFO", "commandstats"])
        .lines()
        .find_map(|l| l.trim().strip_prefix("cmdstat_bitfield:calls="))
        .and_then(|rest| rest.split(',').next()?.parse().ok())
        .unwrap_or(0)
}

#[test]
fn timeout_bounds_the_whole_command() {
    // A listener that accepts and never answers.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let _hold = std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            held.push(stream);
        }
    });
    let silent = format!("redis://127.0.0.1:{port}/");
    let started = Instant::now();
    let (code, out, err) = run(bloom()
        .args([
            "redis",
            "check",
            "--timeout",
            "2",
            "--url",
            &silent,
            "--name",
            "f",
        ])
        .arg("k"));
    let took = started.elapsed();
    assert_eq!((code, out.as_str()), (3, ""), "{err}");
    assert!(err.contains("--timeout 2"), "{err}");
    // Bounded by the deadline (plus the process's own start), not by a sum of attempts.
    assert!(took < Duration::from_secs(2 + 8), "{took:?}");

    // A server stopped (SIGSTOP) in the middle of a long add: the command ends by its
    // deadline, counted from its start, however many batches were left.
    let server = RedisServer::start();
    let url = server.url();
    let dir = tempfile::tempdir().unwrap();
    let keys = key_file(
        dir.path(),
        "k.txt",
        (0..600_000).map(|i| format!("key-{i}")),
    );
    let (code, _, err) = run(bloom()
        .args(["redis", "create", "--url", &url, "--name", "slow"])
        .args(["--items", "1000000", "--fpr", "0.01"]));
    assert_eq!(code, 0, "{err}");
    let before = bitfields(&server);
    let timeout = 10u64;
    let mut child = bloom_process()
        .args([
            "redis", "add", "--url", &url, "--name", "slow", "--keys", &keys,
        ])
        .args(["--timeout", &timeout.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let hang = Instant::now() + Duration::from_secs(300);
    let mut stopped = false;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if !stopped && bitfields(&server) > before {
            server.signal(Signal::STOP);
            stopped = true;
        }
        assert!(Instant::now() < hang, "the add never ended");
        std::thread::sleep(Duration::from_millis(5));
    };
    let took = started.elapsed();
    server.signal(Signal::CONT);
    let mut err = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(
        stopped,
        "the add finished before the server could be stopped: {err}"
    );
    assert_eq!(status.code(), Some(3), "{err}");
    assert!(err.contains("did not finish within --timeout 10"), "{err}");
    assert!(took < Duration::from_secs(timeout + 8), "{took:?}");
}

#[test]
fn durability_is_asked_for_at_creation_and_given_by_every_add() {
    let primary = RedisServer::start();
    let url = primary.url();
    // No replica: a filter that asks for one cannot be made (nothing is left behind).
    let (code, _, err) = run(bloom()
        .args(["redis", "create", "--url", &url, "--name", "r"])
        .args(["--items", "1000", "--fpr", "0.01", "--replicas", "1"])
        .args(["--durable-timeout", "0.2"]));
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("0 of 1 replicas"), "{err}");
    assert_eq!(primary.cli(&["DBSIZE"]).trim(), "0");
    // With a replica in sync: made, and every add waits for it.
    let replica = RedisServer::start_with(&["--replicaof", "127.0.0.1", &primary.port.to_string()]);
    let deadline = Instant::now() + Duration::from_secs(120);
    while !primary
        .cli(&["INFO", "replication"])
        .contains("state=online")
    {
        assert!(Instant::now() < deadline, "the replica never synced");
        std::thread::sleep(Duration::from_millis(20));
    }
    let (code, _, err) = run(bloom()
        .args(["redis", "create", "--url", &url, "--name", "r"])
        .args(["--items", "1000", "--fpr", "0.01", "--replicas", "1"])
        .args(["--durable-timeout", "30"]));
    assert_eq!(code, 0, "{err}");
    let (code, _, err) =
        run(bloom().args(["redis", "add", "--url", &url, "--name", "r", "a", "b"]));
    assert_eq!(code, 0, "{err}");
    let (code, out, err) =
        run(bloom().args(["redis", "info", "--json", "--url", &url, "--name", "r"]));
    assert_eq!(code, 0, "{err}");
    let info: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(info["durability"]["mode"], "replicas");
    assert_eq!(info["durability"]["replicas"], 1);
    // The replica stops answering: an add cannot be acknowledged, and says so.
    replica.signal(Signal::STOP);
    let (code, _, err) = run(bloom().args(["redis", "add", "--url", &url, "--name", "r", "c"]));
    replica.signal(Signal::CONT);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("replicas acknowledged"), "{err}");
    // --replicas on add: this add waits for more replicas than there are.
    let (code, _, err) = run(bloom()
        .args(["redis", "add", "--url", &url, "--name", "r", "d"])
        .args(["--replicas", "2", "--replicas-timeout", "0.2"]));
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("1 of 2 replicas"), "{err}");

    // --aof: refused by a server that cannot promise it, given by one that can.
    let (code, _, err) = run(bloom()
        .args(["redis", "create", "--url", &url, "--name", "a"])
        .args(["--items", "1000", "--fpr", "0.01", "--aof"]));
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("appendfsync always"), "{err}");
    let always = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let (code, _, err) = run(bloom()
        .args(["redis", "create", "--url", &always.url(), "--name", "a"])
        .args(["--items", "1000", "--fpr", "0.01", "--aof"]));
    assert_eq!(code, 0, "{err}");
    let (code, _, err) =
        run(bloom().args(["redis", "add", "--url", &always.url(), "--name", "a", "x"]));
    assert_eq!(code, 0, "{err}");
}

#[test]
fn tls_is_verified_against_the_given_authority() {
    let certs = Certificates::new();
    let (server, tls_port) = tls_server(&certs);
    let tls = format!("rediss://127.0.0.1:{tls_port}/");
    let ca = certs.ca();
    let ca = ca.to_str().unwrap();
    let (code, _, err) = run(bloom()
        .args([
            "redis", "create", "--url", &tls, "--tls-ca", ca, "--name", "t",
        ])
        .args(["--items", "1000", "--fpr", "0.01"]));
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = run(bloom().args([
        "redis", "add", "--url", &tls, "--tls-ca", ca, "--name", "t", "k1",
    ]));
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = run(bloom().args([
        "redis", "check", "--url", &tls, "--tls-ca", ca, "--name", "t", "k1", "k2",
    ]));
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "maybe\tk1\nabsent\tk2\n");
    // The bits went over TLS to the same server.
    assert_eq!(server.cli(&["EXISTS", "bloom:{t}:meta"]).trim(), "1");
    // Without the CA the certificate is not trusted (the system's roots do not know it);
    // plain text to the TLS port is not Redis.
    for args in [
        vec!["--url", tls.as_str()],
        vec!["--url", &format!("redis://127.0.0.1:{tls_port}/")],
    ] {
        let (code, out, err) = run(bloom()
            .args(["redis", "check", "--name", "t", "--timeout", "20", "k1"])
            .args(&args));
        assert_eq!((code, out.as_str()), (3, ""), "{args:?}: {err}");
    }
    // A CA file that is not one.
    let (code, _, err) = run(bloom().args([
        "redis",
        "check",
        "--url",
        &tls,
        "--tls-ca",
        "/nonexistent/ca.pem",
        "--name",
        "t",
        "k1",
    ]));
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("--tls-ca"), "{err}");
}

/// The rights README documents for each command, granted to a user limited to one filter's
/// keys: each command works with exactly its rights, and a command past them fails with
/// exit 3, naming the command Redis refused.
#[test]
fn each_command_works_with_the_acl_rights_documented_for_it() {
    let server = RedisServer::start();
    let keys = ["~bloom:{f}:meta", "~bloom:{f:*"];
    let reader = ["+ping", "+info", "+hgetall", "+hmget", "+bitfield_ro"];
    let writer_rights = [&reader[..], &["+bitfield", "+eval", "+hget", "+hincrby"]].concat();
    let creator = [
        "+ping", "+info", "+eval", "+hget", "+hset", "+hsetnx", "+set", "+append",
    ];
    let user = |name: &str, rights: &[&str]| {
        let mut args = vec!["ACL", "SETUSER", name, "reset", "on", ">pw"];
        args.extend(keys);
        args.push("resetchannels");
        args.push("-@all");
        args.extend(rights);
        assert_eq!(server.cli(&args).trim(), "OK", "{args:?}");
        format!("redis://{name}:pw@127.0.0.1:{}/", server.port)
    };
    let as_user = |url: &str, args: &[&str]| {
        run(bloom()
            .args(["redis"])
            .args(args)
            .args(["--url-env", "U", "--name", "f"])
            .env("U", url))
    };
    let creator = user("creator", &creator);
    let (code, _, err) = as_user(&creator, &["create", "--items", "1000", "--fpr", "0.01"]);
    assert_eq!(code, 0, "create: {err}");
    let writer = user("writer", &writer_rights);
    let (code, _, err) = as_user(&writer, &["add", "k1", "k2"]);
    assert_eq!(code, 0, "add: {err}");
    let complete = user("complete", &[&writer_rights[..], &["+hset"]].concat());
    let (code, _, err) = as_user(&complete, &["add", "--complete", "k1", "k2"]);
    assert_eq!(code, 0, "add --complete: {err}");
    let reader = user("reader", &reader);
    let (code, out, err) = as_user(&reader, &["check", "k1", "zz"]);
    assert_eq!(
        (code, out.as_str()),
        (0, "maybe\tk1\nabsent\tzz\n"),
        "check: {err}"
    );
    let info = user(
        "info",
        &[
            "+ping",
            "+info",
            "+hgetall",
            "+hmget",
            "+bitfield_ro",
            "+strlen",
            "+bitcount",
        ],
    );
    let (code, _, err) = as_user(&info, &["info"]);
    assert_eq!(code, 0, "info: {err}");
    let exporter = user(
        "exporter",
        &[
            "+ping",
            "+info",
            "+hgetall",
            "+hmget",
            "+bitfield_ro",
            "+strlen",
            "+getrange",
        ],
    );
    let dir = tempfile::tempdir().unwrap();
    let snapshot = dir.path().join("f.bloom");
    let (code, _, err) = as_user(&exporter, &["export", "-o", snapshot.to_str().unwrap()]);
    assert_eq!(code, 0, "export: {err}");
    let deleter = user("deleter", &["+ping", "+info", "+hget", "+del"]);
    let (code, _, err) = as_user(&deleter, &["delete"]);
    assert_eq!(code, 0, "delete: {err}");
    let importer = user(
        "importer",
        &[
            "+ping",
            "+info",
            "+eval",
            "+hget",
            "+hset",
            "+hsetnx",
            "+set",
            "+append",
            "+bitfield_ro",
            "+strlen",
            "+setrange",
        ],
    );
    let (code, _, err) = as_user(&importer, &["import", snapshot.to_str().unwrap()]);
    assert_eq!(code, 0, "import: {err}");
    let (code, out, err) = as_user(&reader, &["check", "k1"]);
    assert_eq!((code, out.as_str()), (0, "maybe\tk1\n"), "{err}");

    // Past its rights: exit 3, the refused command named, nothing answered.
    for (url, args, refused) in [
        (&reader, vec!["add", "k3"], "bitfield"),
        (&reader, vec!["delete"], "hget"),
        (&writer, vec!["info"], "strlen"),
    ] {
        let (code, out, err) = as_user(url, &args);
        assert_eq!((code, out.as_str()), (3, ""), "{args:?}: {err}");
        assert!(
            err.contains("NOPERM") && err.contains(refused),
            "{args:?}: {err}"
        );
    }
    // A user that may not run INFO cannot tell a restart: refused, never answered.
    let blind = user("blind", &["+ping", "+hgetall", "+hmget", "+bitfield_ro"]);
    let (code, out, err) = as_user(&blind, &["check", "k1"]);
    assert_eq!((code, out.as_str()), (3, ""), "{err}");
    assert!(err.contains("INFO"), "{err}");
}
