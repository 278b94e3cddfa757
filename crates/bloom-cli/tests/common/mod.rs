//! The real `bloom` binary, run as a separate process.

#![allow(dead_code, unreachable_pub)]

use std::path::{Path, PathBuf};

pub use assert_cmd::Command;

pub fn bloom() -> Command {
    Command::cargo_bin("bloom").unwrap()
}

/// A `std::process::Command` for the binary, for tests that need to signal or race it.
pub fn bloom_process() -> std::process::Command {
    std::process::Command::new(assert_cmd::cargo::cargo_bin("bloom"))
}

pub fn fixtures(version: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(version)
}

/// Runs and returns (exit code, stdout, stderr).
pub fn run(cmd: &mut Command) -> (i32, String, String) {
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs, asserts success, returns stdout.
pub fn stdout(cmd: &mut Command) -> String {
    let (code, out, err) = run(cmd);
    assert_eq!(code, 0, "{err}");
    out
}

/// Builds a small snapshot of `keys` at `path`.
pub fn build(path: &Path, keys: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let list = dir.path().join("keys.txt");
    std::fs::write(&list, keys.join("\n")).unwrap();
    let (code, _, err) = run(bloom()
        .args(["build", "--items", "1000", "--fpr", "0.001", "--keys"])
        .arg(&list)
        .arg("-o")
        .arg(path));
    assert_eq!(code, 0, "{err}");
}

/// The answers of `bloom check` for `keys`, in order.
pub fn answers(snapshot: &Path, keys: &[&str]) -> Vec<String> {
    stdout(bloom().arg("check").arg(snapshot).args(keys))
        .lines()
        .map(|l| l.split('\t').next().unwrap().to_owned())
        .collect()
}

/// Runs the binary with `args` and a standard output whose reader has gone away at once (as
/// with `| head -0`); returns what it reported.
pub fn run_with_stdout_closed(args: &[&std::ffi::OsStr]) -> std::process::Output {
    let mut child = bloom_process()
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    child.wait_with_output().unwrap()
}

/// Runs one `bloom add` process per batch of keys on `snapshot`, all at once, and asserts
/// that each succeeded.
pub fn add_concurrently(snapshot: &Path, batches: &[Vec<String>]) {
    let children: Vec<_> = batches
        .iter()
        .map(|keys| {
            bloom_process()
                .arg("add")
                .arg(snapshot)
                .args(keys)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
