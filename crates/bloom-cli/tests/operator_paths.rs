//! Operator mistakes around paths and limits: lock files never appear where no snapshot can
//! be, limits are parsed strictly, a raw export never replaces an unrelated file, paths in
//! reports stay one line, and a planted link cannot redirect the lock.

#![cfg(unix)]

mod common;

use std::os::unix::fs::symlink;
use std::path::Path;

use common::{bloom, build, fixtures, run, stdout};

fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

#[test]
fn nothing_is_created_for_a_target_that_cannot_be_a_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    // A directory that does not exist: refused, and neither it nor a lock file appears.
    let missing = dir.path().join("missing").join("x.bloom");
    let (code, _, err) = run(bloom().arg("add").arg(&missing).arg("k"));
    assert_ne!(code, 0, "{err}");
    assert!(!dir.path().join("missing").exists());
    // A FIFO at the target: refused without blocking on it, and no lock file beside it.
    let fifo = dir.path().join("pipe.bloom");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    for args in [
        vec!["add", fifo.to_str().unwrap(), "k"],
        vec![
            "build",
            "--bits",
            "512",
            "--hashes",
            "2",
            "-o",
            fifo.to_str().unwrap(),
        ],
    ] {
        let (code, _, err) = run(bloom().args(&args));
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains("FIFO") || err.contains("fifo"), "{err}");
    }
    assert_eq!(names(dir.path()), ["pipe.bloom"]);
}

#[test]
fn a_link_planted_at_the_lock_files_name_is_not_followed() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = dir.path().join("s.bloom");
    build(&snapshot, &["first"]);
    // Someone plants `.s.bloom.lock` as a link to a file elsewhere: the lock must neither
    // follow it (creating or truncating the victim) nor succeed through it.
    let victim = dir.path().join("victim.txt");
    std::fs::write(&victim, "precious").unwrap();
    let lock = dir.path().join(".s.bloom.lock");
    let _ = std::fs::remove_file(&lock);
    symlink(&victim, &lock).unwrap();
    let (code, _, err) = run(bloom().arg("add").arg(&snapshot).arg("second"));
    assert_ne!(code, 0, "{err}");
    assert!(err.contains(".s.bloom.lock"), "{err}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    assert_eq!(common::answers(&snapshot, &["second"]), ["absent"]);
}

#[test]
fn a_raw_export_never_replaces_a_file_that_is_not_a_raw_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let notes = dir.path().join("notes.txt");
    std::fs::write(&notes, "precious notes").unwrap();
    let (code, _, err) = run(bloom()
        .args(["export", "--to", "seed-raw"])
        .arg(fixtures("v1").join("seed-contract.bloom"))
        .arg("-o")
        .arg(&notes));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("refusing to replace"), "{err}");
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "precious notes");

    // An earlier export (same size) is replaced; standard output works too.
    let raw = dir.path().join("seed.raw");
    for _ in 0..2 {
        bloom()
            .args(["export", "--to", "seed-raw"])
            .arg(fixtures("v1").join("seed-contract.bloom"))
            .arg("-o")
            .arg(&raw)
            .assert()
            .success();
    }
    let piped = bloom()
        .args(["export", "--to", "seed-raw"])
        .arg(fixtures("v1").join("seed-contract.bloom"))
        .args(["-o", "-"])
        .output()
        .unwrap();
    assert!(piped.status.success());
    assert_eq!(piped.stdout, std::fs::read(&raw).unwrap());
}

#[test]
fn limits_are_parsed_strictly_and_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = dir.path().join("s.bloom");
    build(&snapshot, &["k"]);
    for bad in [
        "18446744073709551615",
        "2G",
        "0",
        "-1",
        "1.5K",
        "10 K",
        "1KK",
        "",
    ] {
        let (code, out, err) = run(bloom()
            .arg("check")
            .arg(&snapshot)
            .arg("--max-key-bytes")
            .arg(bad)
            .arg("k"));
        assert_eq!(code, 2, "--max-key-bytes {bad:?}: {err}");
        assert_eq!(out, "");
    }
    for bad in ["99999999999999999999", "16E", "x", "0x10"] {
        let (code, _, err) = run(bloom()
            .arg("verify")
            .arg(&snapshot)
            .args(["--max-bytes", bad]));
        assert_eq!(code, 2, "--max-bytes {bad:?}: {err}");
    }
    // Suffixes are powers of two.
    let (code, _, err) =
        run(bloom()
            .arg("check")
            .arg(&snapshot)
            .args(["--max-key-bytes", "1K", "k"]));
    assert_eq!(code, 0, "{err}");
}

#[test]
fn verify_honours_max_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = dir.path().join("s.bloom");
    bloom()
        .args(["build", "--bits", "65536", "--hashes", "3", "-o"])
        .arg(&snapshot)
        .assert()
        .success();
    // 8 KiB payload: not verified under a 4 KiB limit (which is not "damaged"), with the way
    // out named; fine at 8 KiB.
    let (code, out, err) = run(bloom()
        .arg("verify")
        .arg(&snapshot)
        .args(["--max-bytes", "4K"]));
    assert_eq!(code, 1, "{err}");
    assert!(out.starts_with("unverified\t"), "{out}");
    assert!(out.contains("--max-bytes"), "{out}");
    let out = stdout(
        bloom()
            .arg("verify")
            .arg(&snapshot)
            .args(["--max-bytes", "8K"]),
    );
    assert!(out.starts_with("ok\t"), "{out}");
}

#[test]
fn paths_in_reports_stay_on_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let odd = dir.path().join("two\nlines\t.bloom");
    build(&odd, &["k"]);
    let out = stdout(bloom().arg("verify").arg(&odd));
    assert_eq!(out.lines().count(), 1, "{out:?}");
    assert!(out.starts_with("ok\t"), "{out:?}");
    assert!(out.contains("two\\nlines\\t.bloom"), "{out:?}");

    // Damaged: still one line.
    let mut bytes = std::fs::read(&odd).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&odd, bytes).unwrap();
    let (code, out, _) = run(bloom().arg("verify").arg(&odd));
    assert_eq!(code, 1);
    assert_eq!(out.lines().count(), 1, "{out:?}");
    assert!(out.starts_with("damaged\t"), "{out:?}");
}

#[test]
fn dev_stdout_means_standard_output() {
    let out = bloom()
        .args([
            "build",
            "--bits",
            "1024",
            "--hashes",
            "3",
            "--keys",
            "-",
            "-o",
            "/dev/stdout",
        ])
        .write_stdin("x\n")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let snapshot =
        bloom_format::Snapshot::decode(out.stdout, &bloom_format::DecodeOptions::unlimited())
            .unwrap();
    assert_eq!(snapshot.header().bit_count, 1024);
    assert_eq!(snapshot.header().item_count, 1);
}

#[test]
fn a_salt_chooses_the_rule_that_resists_chosen_keys() {
    let dir = tempfile::tempdir().unwrap();
    let salted = dir.path().join("salted.bloom");
    bloom()
        .args([
            "build", "--items", "100", "--fpr", "0.01", "--salt", "random", "-o",
        ])
        .arg(&salted)
        .assert()
        .success();
    let json: serde_json::Value =
        serde_json::from_str(&stdout(bloom().arg("inspect").arg(&salted).arg("--json"))).unwrap();
    assert_eq!(json["position_rule"]["name"], "sha256-double");
    assert_ne!(json["salt_hex"], "");
    // Asking for xxh3-128 with a salt is allowed, with a warning.
    let (code, _, err) = run(bloom()
        .args([
            "build", "--items", "100", "--fpr", "0.01", "--salt", "random",
        ])
        .args(["--rule", "xxh3-128", "-o"])
        .arg(dir.path().join("x.bloom")));
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("does not protect xxh3-128"), "{err}");
}

#[test]
fn a_snapshot_cut_short_on_standard_output_is_an_error() {
    use std::io::Read;
    use std::process::Stdio;
    let mut child = common::bloom_process()
        .args(["build", "--bits", "268435456", "--hashes", "1", "-o", "-"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 1];
    child.stdout.take().unwrap().read_exact(&mut first).unwrap();
    // The reader is gone (the pipe was dropped with `take`).
    let status = child.wait().unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert_eq!(status.code(), Some(3), "{err}");
    assert!(err.contains("incomplete"), "{err}");
}
