//! Every command on good and bad input, with the real binary.

mod common;

use common::{bloom, fixtures, run, stdout};

#[test]
fn plan_output() {
    insta::assert_snapshot!(stdout(
        bloom().args(["plan", "--items", "1000000", "--fpr", "0.01"])
    ));
}

#[test]
fn inspect_golden_fixtures() {
    for version in ["v1", "v2"] {
        for name in ["seed-contract", "salted-trim-lower", "nearly-saturated"] {
            let path = fixtures(version).join(format!("{name}.bloom"));
            let text = stdout(bloom().arg("inspect").arg(&path));
            insta::assert_snapshot!(format!("inspect_{version}_{name}"), text);
            let json: serde_json::Value =
                serde_json::from_str(&stdout(bloom().arg("inspect").arg(&path).arg("--json")))
                    .unwrap();
            assert_eq!(json["checksums"], "ok");
            assert_eq!(json["format_version"], version[1..].parse::<u64>().unwrap());
        }
    }
    insta::assert_snapshot!(
        "inspect_v2_store-bound",
        stdout(
            bloom()
                .arg("inspect")
                .arg(fixtures("v2").join("store-bound.bloom"))
        )
    );
    insta::assert_snapshot!(
        "inspect_v2_counting-sha256-salted-saturated",
        stdout(
            bloom()
                .arg("inspect")
                .arg(fixtures("v2").join("counting-sha256-salted-saturated.bloom"))
        )
    );
}

#[test]
fn verify_golden_fixtures_and_damaged_files() {
    let dir = tempfile::tempdir().unwrap();
    let good = fixtures("v1").join("seed-contract.bloom");
    let bytes = std::fs::read(&good).unwrap();
    let truncated = dir.path().join("truncated.bloom");
    std::fs::write(&truncated, &bytes[..bytes.len() - 1]).unwrap();
    let flipped = dir.path().join("flipped.bloom");
    let mut f = bytes.clone();
    f[120] ^= 4;
    std::fs::write(&flipped, &f).unwrap();
    let garbage = dir.path().join("garbage.bloom");
    std::fs::write(&garbage, b"this is not a snapshot").unwrap();

    let mut all = bloom();
    all.current_dir(fixtures("v1").join("..")).arg("verify");
    for version in ["v1", "v2"] {
        for entry in std::fs::read_dir(fixtures(version)).unwrap() {
            let name = entry.unwrap().file_name().into_string().unwrap();
            if name.ends_with(".bloom") {
                all.arg(format!("{version}/{name}"));
            }
        }
    }
    let (code, out, _) = run(&mut all);
    assert_eq!(code, 0);
    let mut lines: Vec<&str> = out.lines().collect();
    lines.sort_unstable();
    insta::assert_snapshot!("verify_fixtures", lines.join("\n"));

    let (code, out, _) = run(bloom()
        .current_dir(dir.path())
        .args([
            "verify",
            "truncated.bloom",
            "flipped.bloom",
            "garbage.bloom",
        ])
        .arg(&good));
    assert_eq!(code, 1);
    insta::assert_snapshot!(
        "verify_damaged",
        out.replace(&good.display().to_string(), "GOOD")
    );
}

#[test]
fn build_check_add_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys.txt");
    std::fs::write(&keys, "alpha\r\nbeta\n\ncafe\u{301}\n").unwrap();
    let out = dir.path().join("f.bloom");
    let (code, _, err) = run(bloom()
        .args(["build", "--items", "100", "--fpr", "0.001", "--keys"])
        .arg(&keys)
        .arg("-o")
        .arg(&out));
    assert_eq!(code, 0, "{err}");
    let text = stdout(
        bloom()
            .arg("check")
            .arg(&out)
            .args(["alpha", "beta", "caf\u{e9}", "gamma"]),
    );
    let answers: Vec<&str> = text
        .lines()
        .map(|l| l.split('\t').next().unwrap())
        .collect();
    assert_eq!(&answers[..3], ["maybe"; 3]);
    assert_eq!(text.lines().count(), 4);

    // JSON lines keys with a newline and a tab inside, and add.
    let jsonl = dir.path().join("more.jsonl");
    std::fs::write(&jsonl, "\"multi\\nline\"\n\"tab\\there\"\n\"\"\n").unwrap();
    let (code, _, err) = run(bloom()
        .arg("add")
        .arg(&out)
        .arg("--keys")
        .arg(&jsonl)
        .args(["--jsonl", "--generation", "9"]));
    assert_eq!(code, 0, "{err}");
    let json = stdout(
        bloom()
            .arg("check")
            .arg(&out)
            .arg("--keys")
            .arg(&jsonl)
            .args(["--jsonl", "--json"]),
    );
    // JSON Lines: one complete object per key.
    let parsed: Vec<serde_json::Value> = json
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(parsed.len(), 3, "{json}");
    assert!(parsed.iter().all(|a| a["answer"] == "maybe"), "{json}");
    assert_eq!(parsed[0]["key"], "multi\nline");
    assert!(stdout(bloom().arg("inspect").arg(&out)).contains("dataset generation: 9"));

    // Keys are required: a check with nothing to check is a usage error,
    // not a silent success.
    let (code, out_text, err) = run(bloom().arg("check").arg(&out).arg("--json"));
    assert_eq!(code, 2, "{err}");
    assert_eq!(out_text, "");
    assert!(err.contains("no keys"), "{err}");

    // Standard input.
    let stdin_out = dir.path().join("stdin.bloom");
    bloom()
        .args([
            "build",
            "--bits",
            "1024",
            "--hashes",
            "4",
            "--rule",
            "sha256-split4",
            "--encoding",
            "utf8",
            "--keys",
            "-",
            "-o",
        ])
        .arg(&stdin_out)
        .write_stdin("x\ny\n")
        .assert()
        .success();
    assert!(stdout(bloom().arg("check").arg(&stdin_out).arg("x")).starts_with("maybe\tx"));
}

#[test]
fn bad_keys_name_the_line_and_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("never.bloom");
    let bad_utf8 = dir.path().join("bad.txt");
    std::fs::write(&bad_utf8, b"fine\nstill fine\n\xff\xfe\n").unwrap();
    let (code, _, err) = run(bloom()
        .args(["build", "--items", "10", "--fpr", "0.1", "--keys"])
        .arg(&bad_utf8)
        .arg("-o")
        .arg(&out));
    assert_eq!(code, 1);
    assert!(err.contains("line 3"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");

    let bad_json = dir.path().join("bad.jsonl");
    std::fs::write(&bad_json, "\"ok\"\nnot json\n").unwrap();
    let (code, _, err) = run(bloom()
        .args([
            "build", "--items", "10", "--fpr", "0.1", "--jsonl", "--keys",
        ])
        .arg(&bad_json)
        .arg("-o")
        .arg(&out));
    assert_eq!(code, 1);
    assert!(err.contains("line 2"), "{err}");
    assert!(!out.exists());

    // Byte keys are fine under the bytes encoding.
    let (code, _, err) = run(bloom()
        .args([
            "build",
            "--items",
            "10",
            "--fpr",
            "0.1",
            "--encoding",
            "bytes",
            "--keys",
        ])
        .arg(&bad_utf8)
        .arg("-o")
        .arg(&out));
    assert_eq!(code, 0, "{err}");
}

#[test]
fn bad_input_files_and_flags() {
    let dir = tempfile::tempdir().unwrap();
    let garbage = dir.path().join("garbage.bloom");
    std::fs::write(&garbage, vec![0xAB; 300]).unwrap();
    let truncated = dir.path().join("truncated.bloom");
    std::fs::write(
        &truncated,
        &std::fs::read(fixtures("v2").join("large-k.bloom")).unwrap()[..150],
    )
    .unwrap();
    // A file that is not there is the environment's failure (exit 3); bytes that are not a
    // snapshot are bad input (exit 1).
    let missing = dir.path().join("missing.bloom");
    for (file, expected) in [(missing.clone(), 3), (garbage, 1), (truncated, 1)] {
        for (cmd, extra) in [("inspect", None), ("check", Some("k")), ("verify", None)] {
            let (code, _, err) = run(bloom().arg(cmd).arg(&file).args(extra));
            assert_eq!(code, expected, "{cmd:?} {}: {err}", file.display());
            assert!(!err.contains("panicked"), "{err}");
        }
        let (code, _, _) = run(bloom()
            .arg("add")
            .arg(&file)
            .arg("--keys")
            .arg("-")
            .write_stdin("x\n"));
        assert_eq!(code, expected);
    }
    // Named once, and `verify` calls it missing.
    let (_, _, err) = run(bloom().arg("inspect").arg(&missing));
    assert_eq!(
        err.matches(&*missing.display().to_string()).count(),
        1,
        "{err}"
    );
    let (code, out, _) = run(bloom().arg("verify").arg(&missing));
    assert_eq!(code, 3);
    assert!(out.starts_with("missing\t"), "{out}");
    for args in [
        vec!["build", "--wrong-flag"],
        vec!["plan", "--items", "ten", "--fpr", "0.1"],
        vec!["build", "--items", "5", "-o", "x.bloom"],
        vec!["verify"],
        vec!["frobnicate"],
        vec![
            "build", "--items", "5", "--fpr", "0.1", "--rule", "md5", "-o", "x.bloom",
        ],
    ] {
        let (code, _, err) = run(bloom().current_dir(dir.path()).args(&args));
        assert_eq!(code, 2, "{args:?}: {err}");
    }
    // Values that parse but cannot be right are usage errors too.
    let (code, _, err) = run(bloom().args(["plan", "--items", "0", "--fpr", "0.1"]));
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = run(bloom().current_dir(dir.path()).args([
        "build",
        "--bits",
        "64",
        "--hashes",
        "9",
        "--rule",
        "sha256-split4",
        "-o",
        "x.bloom",
    ]));
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = run(bloom().current_dir(dir.path()).args([
        "build", "--bits", "64", "--hashes", "2", "--salt", "xyz", "-o", "x.bloom",
    ]));
    assert_eq!(code, 2, "{err}");
}

#[test]
fn seed_raw_import_and_export() {
    let dir = tempfile::tempdir().unwrap();
    let raw = dir.path().join("seed.raw");
    let fixture = std::fs::read(fixtures("v1").join("seed-contract.bloom")).unwrap();
    std::fs::write(&raw, &fixture[100..]).unwrap();
    let imported = dir.path().join("seed.bloom");
    bloom()
        .args(["import", "--from", "seed-raw"])
        .arg(&raw)
        .arg("-o")
        .arg(&imported)
        .assert()
        .success();
    let text = stdout(
        bloom()
            .arg("check")
            .arg(&imported)
            .args(["record-0", "record-79", ""]),
    );
    assert_eq!(text.lines().filter(|l| l.starts_with("maybe")).count(), 3);
    let back = dir.path().join("back.raw");
    bloom()
        .args(["export", "--to", "seed-raw"])
        .arg(&imported)
        .arg("-o")
        .arg(&back)
        .assert()
        .success();
    assert_eq!(std::fs::read(&back).unwrap(), std::fs::read(&raw).unwrap());

    std::fs::write(&raw, [0u8; 127]).unwrap();
    let (code, _, err) = run(bloom()
        .args(["import", "--from", "seed-raw"])
        .arg(&raw)
        .arg("-o")
        .arg(&imported));
    assert_eq!(code, 1);
    assert!(err.contains("128"), "{err}");
    let (code, _, err) = run(bloom()
        .args(["export", "--to", "seed-raw"])
        .arg(fixtures("v2").join("large-k.bloom"))
        .arg("-o")
        .arg(&back));
    assert_eq!(code, 1, "{err}");
}

#[test]
fn measure_reports_rate_interval_and_sizes() {
    let text = stdout(bloom().args([
        "measure",
        "--items",
        "2000",
        "--fpr",
        "0.01",
        "--queries",
        "20000",
        "--seed",
        "7",
    ]));
    for field in [
        "measured false-positive rate",
        "predicted false-positive rate",
        "inserted keys: 2000",
        "queries (disjoint): 20000",
        // The defaults at 1%: the split block of 512 bits with the fastest rule.
        "rule: xxh3-64",
        "layout: split-block-512",
        "format version: 3",
    ] {
        assert!(text.contains(field), "{field} missing from:\n{text}");
    }
}
