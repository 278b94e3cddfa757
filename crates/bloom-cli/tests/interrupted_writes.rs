//! SIGINT, SIGTERM or SIGHUP while a large snapshot is being written: the write stops, the temporary
//! file is removed, the previous file is unchanged, and the exit code is 128 + the signal.
//! Temporary files of a writer killed outright (SIGKILL) are removed by the next write.

#![cfg(unix)]

mod common;

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{bloom, bloom_process, build, run};
use rustix::process::Signal;

/// Sends `signal` to `child`, which has not been waited for (so its process id is still its own).
fn send(child: &std::process::Child, signal: Signal) {
    rustix::process::kill_process(rustix::process::Pid::from_child(child), signal).unwrap();
}

fn temporaries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".tmp"))
        .collect()
}

/// The payload of the snapshot [`start_large_build`] writes: 512 MiB of bits.
const NEW_PAYLOAD: u64 = 1 << 29;

/// Asserts that `path` holds a whole output of `payload` bytes and its header (under 4 KiB).
fn assert_whole(path: &Path, payload: u64, context: &str) {
    let len = std::fs::metadata(path).unwrap().len();
    assert!(
        len > payload && len < payload + 4096,
        "{context}: {len} bytes"
    );
}

/// Waits for `child` to create its temporary file in `dir`, then stops it (SIGSTOP) in the
/// middle of the write: the file is still there after the stop, so the write is not over,
/// however slow or busy the machine. Returns `None` when the child finished first. The
/// caller sends its signal, then [`resume`]s the child.
fn stop_mid_write(mut child: std::process::Child, dir: &Path) -> Option<std::process::Child> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if !temporaries(dir).is_empty() {
            send(&child, Signal::STOP);
            if !temporaries(dir).is_empty() {
                return Some(child);
            }
            // Renamed between the look and the stop: the write is over.
            send(&child, Signal::CONT);
            child.wait().unwrap();
            return None;
        }
        if child.try_wait().unwrap().is_some() {
            return None;
        }
        assert!(Instant::now() < deadline, "no temporary file appeared");
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// Lets a child stopped by [`stop_mid_write`] run again (and take the signal sent while it
/// was stopped).
fn resume(child: &std::process::Child) {
    send(child, Signal::CONT);
}

/// Starts a build of a 512 MiB filter over `target` and stops it in the middle of writing.
fn start_large_build(target: &Path) -> Option<std::process::Child> {
    let child = bloom_process()
        .args(["build", "--bits", "4294967296", "--hashes", "1", "-o"])
        .arg(target)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    stop_mid_write(child, target.parent().unwrap())
}

#[test]
fn a_signal_during_a_write_leaves_the_old_file_and_no_debris() {
    for (signal, code) in [(Signal::TERM, 143), (Signal::INT, 130), (Signal::HUP, 129)] {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("big.bloom");
        build(&target, &["old"]);
        let before = std::fs::read(&target).unwrap();
        let mut interrupted = false;
        for _attempt in 0..5 {
            let Some(child) = start_large_build(&target) else {
                // Finished before it could be stopped: the new file is whole. Put the old
                // one back and try again.
                assert_whole(&target, NEW_PAYLOAD, &format!("{signal:?}"));
                std::fs::write(&target, &before).unwrap();
                continue;
            };
            send(&child, signal);
            resume(&child);
            let out = child.wait_with_output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            if out.status.code() == Some(0) || out.status.signal().is_some() {
                // The signal came after the rename: the process finished (or, once the write
                // was over, took the signal's default action) with the complete new file in
                // place. Restore the old file and try again.
                assert_whole(
                    &target,
                    NEW_PAYLOAD,
                    &format!("{signal:?}: {:?}: {err}", out.status),
                );
                std::fs::write(&target, &before).unwrap();
                continue;
            }
            assert_eq!(out.status.code(), Some(code), "{signal:?}: {err}");
            assert!(err.contains("interrupted"), "{err}");
            interrupted = true;
            break;
        }
        assert!(interrupted, "{signal:?} never arrived during the write");
        assert_eq!(
            std::fs::read(&target).unwrap(),
            before,
            "the old file changed"
        );
        assert!(
            temporaries(dir.path()).is_empty(),
            "{:?}",
            temporaries(dir.path())
        );
    }
}

#[test]
fn a_killed_writers_temporary_file_is_removed_by_the_next_write() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("big.bloom");
    build(&target, &["old"]);
    let mut removed = false;
    for _attempt in 0..5 {
        let Some(mut child) = start_large_build(&target) else {
            continue;
        };
        child.kill().unwrap(); // SIGKILL: nothing runs
        child.wait().unwrap();
        if temporaries(dir.path()).is_empty() {
            continue;
        }
        let (code, _, err) = run(bloom().arg("add").arg(&target).arg("new"));
        assert_eq!(code, 0, "{err}");
        assert!(
            temporaries(dir.path()).is_empty(),
            "{:?}",
            temporaries(dir.path())
        );
        removed = true;
        break;
    }
    assert!(removed, "the writer was never killed mid-write");
}

/// Guava exports and imports stop on a signal like every other write: the target unchanged
/// and no temporary file left.
#[test]
fn a_signal_during_a_guava_export_or_import_leaves_no_debris() {
    let dir = tempfile::tempdir().unwrap();
    // A 256 MiB Guava-rule filter (2^31 bits, one position per key).
    let big = dir.path().join("big.bloom");
    let (code, _, err) = run(bloom()
        .args([
            "build",
            "--rule",
            "guava-mitz64",
            "--bits",
            "2147483648",
            "--hashes",
            "1",
        ])
        .args(["--max-bytes", "1G", "-o"])
        .arg(&big));
    assert_eq!(code, 0, "{err}");
    let out_dir = dir.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    let stream = out_dir.join("big.guava");
    let copy = out_dir.join("copy.bloom");
    for (what, args) in [
        (
            "export",
            vec![
                "export".to_owned(),
                "--to".into(),
                "guava".into(),
                big.display().to_string(),
                "-o".into(),
                stream.display().to_string(),
            ],
        ),
        (
            "import",
            vec![
                "import".to_owned(),
                "--from".into(),
                "guava".into(),
                "--funnel".into(),
                "utf8".into(),
                stream.display().to_string(),
                "-o".into(),
                copy.display().to_string(),
            ],
        ),
    ] {
        let target = if what == "export" { &stream } else { &copy };
        if what == "import" {
            // The stream to import: written whole first.
            let (code, _, err) = run(bloom()
                .args(["export", "--to", "guava"])
                .arg(&big)
                .arg("-o")
                .arg(&stream));
            assert_eq!(code, 0, "{err}");
        }
        let mut interrupted = false;
        for _attempt in 0..5 {
            let child = common::bloom_process()
                .args(&args)
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            let Some(child) = stop_mid_write(child, &out_dir) else {
                // Finished first: the complete output is in place. Try again.
                assert_whole(target, NEW_PAYLOAD / 2, what);
                continue;
            };
            send(&child, Signal::TERM);
            resume(&child);
            let out = child.wait_with_output().unwrap();
            if out.status.code() == Some(0) || out.status.signal().is_some() {
                // Finished before the signal, or took the signal's default action once the
                // write was over: the complete output is in place. Try again.
                assert_whole(
                    target,
                    NEW_PAYLOAD / 2,
                    &format!("{what}: {:?}", out.status),
                );
                continue;
            }
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(143), "{what}: {err}");
            interrupted = true;
            break;
        }
        assert!(
            interrupted,
            "{what}: the signal never arrived during the write"
        );
        assert!(
            temporaries(&out_dir).is_empty(),
            "{what}: {:?}",
            temporaries(&out_dir)
        );
    }
}
