//! `bloom build --scalable` and `bloom add` on a chain: it grows instead of filling up, every
//! key stays "maybe", its false-positive rate stays within its bound (binomial tolerance),
//! growth stops at `--max-bytes` with a warning (or a refusal under `--strict`), concurrent
//! writers keep every key, and damaged or misused chains end in clear errors.

mod common;

use common::{add_concurrently, bloom, fixtures, run, stdout};
use std::path::{Path, PathBuf};

/// One-sided 99.9 % normal quantile.
const Z_999: f64 = 3.090_232_306_167_813;

fn keys_file(dir: &Path, name: &str, keys: impl Iterator<Item = String>) -> PathBuf {
    let path = dir.join(name);
    let text: String = keys.map(|k| k + "\n").collect();
    std::fs::write(&path, text).unwrap();
    path
}

fn inspect_json(path: &Path, extra: &[&str]) -> serde_json::Value {
    serde_json::from_str(&stdout(
        bloom().arg("inspect").arg("--json").args(extra).arg(path),
    ))
    .unwrap()
}

/// The answers of `bloom check --keys`: (maybe, absent).
fn count_answers(snapshot: &Path, keys: &Path) -> (usize, usize) {
    let out = stdout(bloom().arg("check").arg(snapshot).arg("--keys").arg(keys));
    let maybe = out.lines().filter(|l| l.starts_with("maybe\t")).count();
    let absent = out.lines().filter(|l| l.starts_with("absent\t")).count();
    (maybe, absent)
}

#[test]
fn a_chain_grows_through_build_and_add_and_keeps_its_bound() {
    let dir = tempfile::tempdir().unwrap();
    let first = keys_file(
        dir.path(),
        "a.txt",
        (0..5_000).map(|i| format!("member-{i}")),
    );
    let more = keys_file(
        dir.path(),
        "b.txt",
        (5_000..30_000).map(|i| format!("member-{i}")),
    );
    let strangers = keys_file(
        dir.path(),
        "q.txt",
        (0..40_000).map(|i| format!("stranger-{i}")),
    );
    let chain = dir.path().join("chain.bloom");
    let (code, _, err) = run(bloom()
        .args([
            "build",
            "--scalable",
            "--items",
            "1000",
            "--fpr",
            "0.01",
            "--generation",
            "7",
            "--keys",
        ])
        .arg(&first)
        .arg("-o")
        .arg(&chain));
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("warning"), "{err}");
    assert!(err.contains("a scalable filter of 3 stages"), "{err}");
    let json = inspect_json(&chain, &[]);
    assert_eq!(json["layout"]["name"], "scalable");
    assert_eq!(json["format_version"], 3);
    assert_eq!(json["planned_capacity"], 1000);
    assert_eq!(json["over_capacity"], false);
    assert_eq!(json["scalable"]["stage_count"], 3);
    assert_eq!(json["scalable"]["growth_factor"], 2);
    let stages = json["scalable"]["stages"].as_array().unwrap();
    for (i, stage) in stages.iter().enumerate() {
        assert_eq!(stage["planned_capacity"], 1000u64 << i);
    }

    let (code, _, err) = run(bloom().arg("add").arg("--keys").arg(&more).arg(&chain));
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("warning"), "{err}");
    let json = inspect_json(&chain, &[]);
    let stages = json["scalable"]["stage_count"].as_u64().unwrap();
    // 30,000 keys, less the few already "maybe", need stages of 1,000 + ... + 16,000.
    assert_eq!(stages, 5, "{json:#}");
    assert_eq!(json["dataset_generation"], 7, "add keeps the generation");
    assert_eq!(json["over_capacity"], false);

    // No member is ever absent.
    for keys in [&first, &more] {
        let (_, absent) = count_answers(&chain, keys);
        assert_eq!(absent, 0);
    }
    // The bound, the stages' planned rates added up, p (1 - r^s), on keys never inserted:
    // binomial, 99.9 % one-sided.
    let bound = 0.01 * (1.0 - 0.5f64.powi(stages as i32));
    let (hits, _) = count_answers(&chain, &strangers);
    let q = 40_000.0;
    let limit = bound * q + Z_999 * (q * bound * (1.0 - bound)).sqrt();
    assert!(
        (hits as f64) <= limit,
        "{hits} false positives of 40,000, at most {limit:.0}"
    );
}

#[test]
fn growth_stops_at_max_bytes_with_a_warning_and_strict_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let chain = dir.path().join("chain.bloom");
    // Room for the first stage (1,000 keys), not the second.
    let (code, _, err) = run(bloom()
        .args([
            "build",
            "--scalable",
            "--items",
            "1000",
            "--fpr",
            "0.01",
            "--max-bytes",
            "2K",
            "-o",
        ])
        .arg(&chain));
    assert_eq!(code, 0, "{err}");
    let empty = std::fs::read(&chain).unwrap();

    // A little past the first stage: over its items, its rate still within its bound.
    let few = keys_file(dir.path(), "few.txt", (0..1_100).map(|i| format!("k{i}")));
    let (code, _, err) = run(bloom()
        .args(["add", "--strict", "--max-bytes", "2K", "--keys"])
        .arg(&few)
        .arg(&chain));
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("could not grow"), "{err}");
    assert!(err.contains("--strict: nothing was written"), "{err}");
    assert_eq!(std::fs::read(&chain).unwrap(), empty, "unchanged");

    let (code, _, err) = run(bloom()
        .args(["add", "--max-bytes", "2K", "--keys"])
        .arg(&few)
        .arg(&chain));
    assert_eq!(code, 0, "{err}");
    assert_eq!(err.matches("warning:").count(), 1, "{err}");
    assert!(err.contains("past --max-bytes 2048"), "{err}");
    // The warning names the size to raise the limit to.
    let at_least: u64 = err
        .split("raise --max-bytes to at least ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no size to raise the limit to: {err}"));
    assert!(at_least > 2048, "{err}");
    let json = inspect_json(&chain, &["--max-bytes", "2K"]);
    assert!(json["payload_length"].as_u64().unwrap() <= 2048);
    assert_eq!(
        (
            json["over_capacity"].clone(),
            json["remaining_capacity"].clone()
        ),
        (true.into(), 0.into())
    );
    let text = stdout(bloom().args(["inspect", "--max-bytes", "2K"]).arg(&chain));
    assert!(text.contains("the chain could not grow"), "{text}");
    // Over its plan, it still never says absent for a member.
    assert_eq!(count_answers(&chain, &few).1, 0);

    // With the limit raised as told, the next add grows the chain, even one that adds only a
    // key it already holds, and it is within its plan again: its newest stage has room, its
    // rate is within its bound.
    let limit = at_least.to_string();
    let (code, _, err) = run(bloom()
        .args(["add", "--max-bytes", &limit])
        .arg(&chain)
        .arg("k1"));
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("warning") && err.contains("(0 new)"), "{err}");
    let json = inspect_json(&chain, &[]);
    assert_eq!(json["scalable"]["stage_count"], 2);
    assert_eq!(json["over_capacity"], false);
    let later = keys_file(dir.path(), "l.txt", (0..100).map(|i| format!("later{i}")));
    let (code, _, err) = run(bloom()
        .args(["add", "--max-bytes", &limit, "--keys"])
        .arg(&later)
        .arg(&chain));
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("warning"), "{err}");
    let json = inspect_json(&chain, &[]);
    assert_eq!(json["scalable"]["stage_count"], 2);
    assert_eq!(json["over_capacity"], false);
    for file in [&few, &later] {
        assert_eq!(count_answers(&chain, file).1, 0);
    }

    // Far past a stage, its rate is past the bound for good: the warning says to rebuild.
    let many = keys_file(dir.path(), "m.txt", (0..30_000).map(|i| format!("m{i}")));
    let (code, _, err) = run(bloom()
        .args(["add", "--max-bytes", &limit, "--keys"])
        .arg(&many)
        .arg(&chain));
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("stays over its bound until it is rebuilt"),
        "{err}"
    );
    let text = stdout(bloom().arg("inspect").arg(&chain));
    assert!(text.contains("rebuilt from its keys"), "{text}");
    assert_eq!(count_answers(&chain, &many).1, 0);
}

#[test]
fn concurrent_adds_to_a_chain_keep_every_key() {
    let dir = tempfile::tempdir().unwrap();
    let chain = dir.path().join("chain.bloom");
    let (code, _, err) = run(bloom()
        .args([
            "build",
            "--scalable",
            "--items",
            "50",
            "--fpr",
            "0.01",
            "-o",
        ])
        .arg(&chain));
    assert_eq!(code, 0, "{err}");
    const WRITERS: usize = 6;
    const KEYS: usize = 60;
    let batches: Vec<Vec<String>> = (0..WRITERS)
        .map(|w| (0..KEYS).map(|i| format!("w{w}-k{i}")).collect())
        .collect();
    add_concurrently(&chain, &batches);
    let all = keys_file(
        dir.path(),
        "all.txt",
        (0..WRITERS).flat_map(|w| (0..KEYS).map(move |i| format!("w{w}-k{i}"))),
    );
    assert_eq!(count_answers(&chain, &all).1, 0, "no key lost");
    // 360 keys in stages of 50, 100, 200: the chain grew across the writers.
    assert!(
        inspect_json(&chain, &[])["scalable"]["stage_count"]
            .as_u64()
            .unwrap()
            >= 3
    );
}

#[test]
fn a_chain_is_read_from_standard_input_and_from_the_frozen_fixtures() {
    // The fixtures' keys are JSON strings, one per line.
    let keys = fixtures("v3").join("scalable-xxh3.keys");
    let bloom_file = fixtures("v3").join("scalable-xxh3.bloom");
    let out = stdout(
        bloom()
            .args(["check", "--jsonl", "--keys"])
            .arg(&keys)
            .arg(&bloom_file),
    );
    assert_eq!(out.lines().count(), 1_000);
    assert!(out.lines().all(|l| l.starts_with("maybe\t")), "{out}");
    let bytes = std::fs::read(&bloom_file).unwrap();
    let out = stdout(
        bloom()
            .args(["check", "-", "--json", "record-999", "never-inserted-key"])
            .write_stdin(bytes),
    );
    assert!(
        out.contains("{\"answer\":\"maybe\",\"key\":\"record-999\"}"),
        "{out}"
    );
    assert!(out.contains("\"absent\""), "{out}");
    insta::assert_snapshot!(
        "inspect_v3_scalable-xxh3",
        stdout(bloom().arg("inspect").arg(&bloom_file))
    );
    insta::assert_snapshot!(
        "inspect_v3_planned-split-512",
        stdout(
            bloom()
                .arg("inspect")
                .arg(fixtures("v3").join("planned-split-512.bloom"))
        )
    );
}

#[test]
fn damaged_chains_are_refused_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(fixtures("v3").join("scalable-sha256-salted.bloom")).unwrap();
    let truncated = dir.path().join("truncated.bloom");
    std::fs::write(&truncated, &bytes[..bytes.len() - 3]).unwrap();
    let flipped = dir.path().join("flipped.bloom");
    let mut f = bytes.clone();
    let last = f.len() - 1;
    f[last] ^= 0x10;
    std::fs::write(&flipped, &f).unwrap();
    for path in [&truncated, &flipped] {
        let before = std::fs::read(path).unwrap();
        for args in [&["check"][..], &["inspect"], &["add"]] {
            let (code, out, err) = run(bloom().args(args).arg(path).arg("some-key"));
            // inspect takes no keys: a usage error; the others read the file and refuse it.
            if args == ["inspect"] {
                assert_eq!(code, 2, "{err}");
                continue;
            }
            assert_eq!(code, 1, "{args:?} {}: {err}", path.display());
            assert!(out.is_empty(), "{out}");
            assert!(!err.contains("panicked"), "{err}");
        }
        let (code, _, err) = run(bloom().arg("inspect").arg(path));
        assert_eq!(code, 1, "{err}");
        assert_eq!(std::fs::read(path).unwrap(), before, "nothing written");
    }
}

#[test]
fn a_chain_cannot_be_removed_from_or_exported_and_bad_flags_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let chain = dir.path().join("chain.bloom");
    let (code, _, err) = run(bloom()
        .args([
            "build",
            "--scalable",
            "--items",
            "100",
            "--fpr",
            "0.01",
            "-o",
        ])
        .arg(&chain)
        .arg("a-key"));
    assert_eq!(code, 2, "build takes no key arguments: {err}");
    let keys = keys_file(dir.path(), "k.txt", ["a-key".to_owned()].into_iter());
    let (code, _, err) = run(bloom()
        .args([
            "build",
            "--scalable",
            "--items",
            "100",
            "--fpr",
            "0.01",
            "--keys",
        ])
        .arg(&keys)
        .arg("-o")
        .arg(&chain));
    assert_eq!(code, 0, "{err}");
    let before = std::fs::read(&chain).unwrap();
    let (code, _, err) = run(bloom().arg("remove").arg(&chain).arg("a-key"));
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("is a scalable filter"), "{err}");
    assert_eq!(std::fs::read(&chain).unwrap(), before);
    for to in ["guava", "seed-raw"] {
        let out = dir.path().join(format!("out-{to}"));
        let (code, _, err) = run(bloom()
            .args(["export", "--to", to])
            .arg(&chain)
            .arg("-o")
            .arg(&out));
        assert_eq!(code, 1, "{to}: {err}");
        assert!(!out.exists());
    }
    let out = dir.path().join("new.bloom");
    for bad in [
        &["--scalable", "--bits", "1024", "--hashes", "3"][..],
        &["--scalable", "--items", "10", "--fpr", "0.1", "--counting"],
        &[
            "--scalable",
            "--items",
            "10",
            "--fpr",
            "0.1",
            "--layout",
            "standard",
        ],
        &[
            "--scalable",
            "--items",
            "10",
            "--fpr",
            "0.1",
            "--growth",
            "0",
        ],
        &[
            "--scalable",
            "--items",
            "10",
            "--fpr",
            "0.1",
            "--growth",
            "1025",
        ],
        &[
            "--scalable",
            "--items",
            "10",
            "--fpr",
            "0.1",
            "--tightening",
            "1",
        ],
        &[
            "--scalable",
            "--items",
            "10",
            "--fpr",
            "0.1",
            "--rule",
            "guava-mitz64",
        ],
        &["--items", "10", "--fpr", "0.1", "--growth", "2"],
        &["--items", "10", "--fpr", "0.1", "--tightening", "0.5"],
    ] {
        let (code, _, err) = run(bloom().arg("build").args(bad).arg("-o").arg(&out));
        assert_eq!(code, 2, "{bad:?}: {err}");
        assert!(!out.exists(), "{bad:?}");
    }
    // A first stage over --max-bytes is refused before anything is allocated.
    let (code, _, err) = run(bloom()
        .args([
            "build",
            "--scalable",
            "--items",
            "1000000000",
            "--fpr",
            "0.01",
            "--max-bytes",
            "1M",
            "-o",
        ])
        .arg(&out));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("over --max-bytes"), "{err}");
    assert!(!out.exists());
}
