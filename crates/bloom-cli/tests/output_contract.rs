//! What scripts rely on: exit codes, `inspect --json` carrying every field and agreeing with
//! the text, a closed pipe ending quietly, failures to write output named.

mod common;

use common::{bloom, fixtures, run, stdout};

#[test]
fn usage_errors_exit_2_and_bad_input_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = dir.path().join("f.bloom");
    common::build(&snapshot, &["a"]);
    let s = snapshot.to_str().unwrap();
    for args in [
        &["plan", "--items", "10", "--fpr", "1.5"][..],
        &["plan", "--items", "10", "--fpr", "NaN"],
        &["plan", "--items", "10", "--fpr", "0"],
        &["build", "-o", "x.bloom"],
        &[
            "build", "--bits", "64", "--hashes", "2", "--salt", "zz", "-o", "x.bloom",
        ],
        &[
            "build",
            "--bits",
            "64",
            "--hashes",
            "2",
            "--salt",
            &"00".repeat(33),
            "-o",
            "x.bloom",
        ],
        &[
            "build",
            "--items",
            "1000000000",
            "--fpr",
            "0.000001",
            "-o",
            "x.bloom",
        ],
        &["add", s],
        &["measure", "--items", "10", "--fpr", "0.1", "--queries", "0"],
        &["check", s, "--max-bytes", "lots"],
    ] {
        let (code, _, err) = run(bloom().current_dir(dir.path()).args(args));
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    assert!(!dir.path().join("x.bloom").exists());
    let garbage = dir.path().join("garbage.bloom");
    std::fs::write(&garbage, b"not a snapshot").unwrap();
    let (code, _, err) = run(bloom().arg("check").arg(&garbage).arg("k"));
    assert_eq!(code, 1, "{err}");
}

#[test]
fn check_exit_status_is_like_grep() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = dir.path().join("f.bloom");
    common::build(&snapshot, &["present"]);
    let (code, _, _) = run(bloom()
        .arg("check")
        .arg(&snapshot)
        .args(["present", "--exit-status"]));
    assert_eq!(code, 0);
    let (code, out, _) = run(bloom().arg("check").arg(&snapshot).args([
        "present",
        "surely-absent-key",
        "--exit-status",
    ]));
    assert_eq!(code, 4, "{out}");
    let (code, _, _) = run(bloom()
        .arg("check")
        .arg(&snapshot)
        .args(["surely-absent-key"]));
    assert_eq!(code, 0, "without the flag, answers are not failures");
}

#[test]
fn inspect_json_has_every_header_field_and_agrees_with_the_text() {
    for path in [
        fixtures("v2").join("store-bound.bloom"),
        fixtures("v2").join("salted-trim-lower.bloom"),
        fixtures("v1").join("large-k.bloom"),
    ] {
        let text = stdout(bloom().arg("inspect").arg(&path));
        let json: serde_json::Value =
            serde_json::from_str(&stdout(bloom().arg("inspect").arg(&path).arg("--json"))).unwrap();
        let field = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("{name}: ")))
                .unwrap_or_else(|| panic!("{name} missing from {text}"))
                .to_owned()
        };
        assert_eq!(
            field("header crc32"),
            json["header_crc32"].as_str().unwrap()
        );
        assert_eq!(
            field("payload crc32"),
            json["payload_crc32"].as_str().unwrap()
        );
        assert_eq!(field("header length"), json["header_length"].to_string());
        assert_eq!(field("bit count (m)"), json["bit_count"].to_string());
        assert_eq!(
            field("dataset generation"),
            json["dataset_generation"].to_string()
        );
        assert_eq!(field("fill ratio"), json["fill_ratio"].to_string());
        assert_eq!(
            field("estimated items"),
            json["estimated_items"].to_string()
        );
        assert_eq!(
            field("estimated false-positive rate"),
            json["estimated_false_positive_rate"].to_string()
        );
        assert_eq!(field("format version"), json["format_version"].to_string());
        for key in [
            "position_rule",
            "layout",
            "key_encoding",
            "unicode_version_normalization",
            "unicode_version_casing",
            "salt_hex",
            "item_count",
            "store_identity",
            "history_digest",
            "payload_length",
            "hash_count",
        ] {
            assert!(json.get(key).is_some(), "{key} missing from {json}");
        }
    }
    let bound: serde_json::Value = serde_json::from_str(&stdout(
        bloom()
            .arg("inspect")
            .arg(fixtures("v2").join("store-bound.bloom"))
            .arg("--json"),
    ))
    .unwrap();
    assert_eq!(bound["store_identity"], "676f6c64656e2d73746f72652d696421");
}

#[test]
fn a_plan_for_a_tiny_rate_prints_short_numbers() {
    let text = stdout(bloom().args(["plan", "--items", "10", "--fpr", "1e-300"]));
    assert!(
        text.contains("target false-positive rate: 1e-300"),
        "{text}"
    );
    let longest_number = text
        .split(|c: char| !c.is_ascii_digit())
        .map(str::len)
        .max()
        .unwrap_or(0);
    assert!(longest_number < 20, "{text}");
    // The blocked layout cannot reach such a rate: the plan says so instead of failing.
    assert!(
        text.contains("blocked-512: the blocked-512 layout cannot reach"),
        "{text}"
    );
}

#[cfg(unix)]
#[test]
fn a_closed_pipe_ends_quietly_and_a_full_disk_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = dir.path().join("f.bloom");
    common::build(&snapshot, &["a"]);
    let keys = dir.path().join("many.txt");
    std::fs::write(
        &keys,
        (0..200_000)
            .map(|i| format!("key-{i}\n"))
            .collect::<String>(),
    )
    .unwrap();
    // The reader closes the pipe at once.
    let out = common::run_with_stdout_closed(&[
        "check".as_ref(),
        snapshot.as_os_str(),
        "--keys".as_ref(),
        keys.as_os_str(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // verify cannot write its report: it says so (exit 3), it does not look like damage.
    if std::path::Path::new("/dev/full").exists() {
        let out = common::bloom_process()
            .arg("verify")
            .arg(&snapshot)
            .stdout(
                std::fs::OpenOptions::new()
                    .write(true)
                    .open("/dev/full")
                    .unwrap(),
            )
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{err}");
        assert!(err.contains("cannot write to standard output"), "{err}");
        assert!(err.contains("0 of 1 files are damaged"), "{err}");
    }
}

/// The keys of a JSON object, sorted.
fn keys_of(value: &serde_json::Value) -> Vec<String> {
    let mut keys: Vec<String> = value
        .as_object()
        .unwrap_or_else(|| panic!("not an object: {value}"))
        .keys()
        .cloned()
        .collect();
    keys.sort();
    keys
}

/// One schema per concept: a layout, a position rule and a key encoding are the same objects
/// in `inspect`, `plan` and `measure` (and `redis info`, tested with the Redis tests), and
/// `verify --json` gives one object per file (docs/cli.md).
#[test]
fn json_output_has_one_schema_per_concept() {
    let layout = ["id", "name", "parameter"];
    let rule = ["id", "name"];
    let encoding = ["id", "name", "version"];
    let json = |cmd: &mut _| -> serde_json::Value { serde_json::from_str(&stdout(cmd)).unwrap() };
    let inspect = json(
        bloom()
            .arg("inspect")
            .arg(fixtures("v2").join("store-bound.bloom"))
            .arg("--json"),
    );
    assert_eq!(keys_of(&inspect["layout"]), layout);
    assert_eq!(keys_of(&inspect["position_rule"]), rule);
    assert_eq!(keys_of(&inspect["key_encoding"]), encoding);
    assert_eq!(inspect["layout"]["name"], "standard");
    let plan = json(bloom().args(["plan", "--items", "1000", "--fpr", "0.01", "--json"]));
    assert_eq!(plan["items"], 1000);
    let plans = plan["plans"].as_array().unwrap();
    assert_eq!(plans.len(), 5);
    assert_eq!(plan["default_layout"], "split-block-512");
    for entry in plans {
        assert_eq!(keys_of(&entry["layout"]), layout);
        assert!(
            entry["predicted_false_positive_rate"].as_f64().unwrap() <= 0.01,
            "{entry}"
        );
    }
    let names: Vec<&str> = plans
        .iter()
        .map(|p| p["layout"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "standard",
            "blocked-512",
            "split-block-256",
            "split-block-512",
            "counting-4bit"
        ]
    );
    // A layout that cannot reach the rate says why, in the same place.
    let tiny = json(bloom().args(["plan", "--items", "10", "--fpr", "1e-300", "--json"]));
    assert!(
        tiny["plans"][1]["error"]
            .as_str()
            .unwrap()
            .contains("cannot reach")
    );
    let measure = json(bloom().args([
        "measure",
        "--items",
        "1000",
        "--fpr",
        "0.01",
        "--queries",
        "2000",
        "--json",
    ]));
    assert_eq!(keys_of(&measure["layout"]), layout);
    assert_eq!(keys_of(&measure["position_rule"]), rule);
    let rate = measure["measured_false_positive_rate"].as_f64().unwrap();
    let [low, high] = [0, 1].map(|i| measure["interval_95"][i].as_f64().unwrap());
    assert!(low <= rate && rate <= high, "{measure}");
    assert_eq!(
        measure["false_positives"].as_f64().unwrap() / 2000.0,
        rate,
        "{measure}"
    );
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("gone.bloom");
    let (code, out, _) = run(bloom()
        .arg("verify")
        .arg("--json")
        .arg(fixtures("v2").join("store-bound.bloom"))
        .arg(&missing));
    assert_eq!(code, 3, "a missing file is the environment's failure");
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    for line in &lines {
        assert_eq!(keys_of(line), ["detail", "path", "status"]);
    }
    assert_eq!(lines[0]["status"], "ok");
    assert_eq!(lines[1]["status"], "missing");
    assert_eq!(lines[1]["path"], missing.display().to_string());
}

#[test]
fn a_snapshot_is_never_sent_to_a_closed_or_null_standard_output() {
    // Rust's runtime hands a closed standard output /dev/null, which would swallow the
    // snapshot: both are refused (exit 3), and a pipe still gets every byte.
    // Also a device that discards, and a standard output open for reading only (whose
    // EBADF Rust's standard library counts as written).
    let bin = assert_cmd::cargo::cargo_bin("bloom");
    let dir = tempfile::tempdir().unwrap();
    let read_only = dir.path().join("read-only");
    std::fs::write(&read_only, b"").unwrap();
    for redirect in [">&-", "> /dev/null", "> /dev/zero", "1< \"$1\""] {
        let script = format!("exec \"$0\" build --items 10 --fpr 0.1 -o - {redirect}");
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(script)
            .arg(&bin)
            .arg(&read_only)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{redirect}: {err}");
        assert!(err.contains("would be lost"), "{err}");
        assert_eq!(std::fs::read(&read_only).unwrap(), b"", "{redirect}");
    }
    let piped = bloom()
        .args(["build", "--items", "10", "--fpr", "0.1", "-o", "-"])
        .output()
        .unwrap();
    assert!(piped.status.success());
    assert!(
        bloom_format::Snapshot::decode(piped.stdout, &bloom_format::DecodeOptions::unlimited())
            .is_ok()
    );
}
