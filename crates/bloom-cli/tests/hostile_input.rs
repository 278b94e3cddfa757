//! Input built to hurt: headers that claim enormous filters, endless key streams, odd paths.
//! Every case ends with a clear error and an exit code, never an abort, a hang or unbounded
//! memory, and the previous file is untouched.

#![cfg(unix)]

mod common;

use std::os::unix::fs::{FileTypeExt, symlink};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{bloom, bloom_process, build, fixtures, run, stdout};

/// A snapshot header with a correct CRC claiming `bits` bits, over a sparse file of the
/// claimed length (zeros: the payload CRC does not match, but nothing gets that far).
fn sparse_snapshot(path: &Path, bits: u64) {
    let mut bytes = std::fs::read(fixtures("v2").join("large-k.bloom")).unwrap();
    bytes.truncate(148);
    bytes[16..24].copy_from_slice(&bits.to_le_bytes());
    bytes[56..64].copy_from_slice(&bits.div_ceil(8).to_le_bytes());
    let crc = crc32fast::hash(&bytes[..144]);
    bytes[144..148].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(path, &bytes).unwrap();
    let file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    file.set_len(148 + bits.div_ceil(8)).unwrap();
}

/// Caps the address space of this test process, and so of every process it starts from now
/// on, at 256 GiB: a terabyte allocation then fails on every machine, also on one whose kernel
/// would promise it (`vm.overcommit_memory = 1`) and then run out of memory filling it.
#[cfg(target_os = "linux")]
fn cap_address_space() {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    const CAP: u64 = 256 << 30;
    let now = getrlimit(Resource::As);
    if now.current.is_none_or(|current| current > CAP) {
        let capped = Rlimit {
            current: Some(CAP),
            maximum: now.maximum,
        };
        setrlimit(Resource::As, capped).unwrap();
    }
}

#[test]
fn a_header_claiming_a_huge_filter_is_refused_before_allocating() {
    let dir = tempfile::tempdir().unwrap();
    let huge = dir.path().join("huge.bloom");
    sparse_snapshot(&huge, 1 << 43); // 1 TiB of payload, on disk as a sparse file
    for (command, extra) in [
        ("check", &["key"][..]),
        ("inspect", &[][..]),
        ("add", &["key"][..]),
    ] {
        let (code, _, err) = run(bloom().arg(command).arg(&huge).args(extra));
        assert_eq!(code, 1, "{command}: {err}");
        assert!(
            err.contains("exceeds the limit of 1073741824 bytes"),
            "{command}: {err}"
        );
        assert!(err.contains("--max-bytes"), "{command}: {err}");
    }
    // Raising the limit past what the machine has gives an allocation error, not an abort.
    #[cfg(target_os = "linux")]
    cap_address_space();
    // (Keys from standard input: a check of a few keys, as arguments or in a small file,
    // does not load the filter but streams the payload, as verify does; only time bounds
    // that, so neither is run here on a terabyte.)
    for command in ["check", "add"] {
        let (code, _, err) = run(bloom()
            .args([command, "--max-bytes", "2T", "--keys", "-"])
            .arg(&huge)
            .write_stdin("key\n"));
        assert_eq!(code, 3, "{command}: {err}");
        assert!(err.contains("allocate"), "{command}: {err}");
        assert!(!err.contains("panicked"), "{command}: {err}");
    }
}

#[test]
fn endless_keys_are_refused_by_line_quickly() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("never.bloom");
    let start = Instant::now();
    let (code, _, err) = run(bloom()
        .args([
            "build",
            "--items",
            "100",
            "--fpr",
            "0.01",
            "--keys",
            "/dev/zero",
            "-o",
        ])
        .arg(&out));
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("line 1") && err.contains("longer than 65536 bytes"),
        "{err}"
    );
    assert!(!out.exists());
    // One endless line on standard input.
    let output = bloom_process()
        .args([
            "build", "--items", "100", "--fpr", "0.01", "--keys", "-", "-o",
        ])
        .arg(&out)
        .stdin(std::fs::File::open("/dev/zero").unwrap())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{err}");
    assert!(err.contains("standard input line 1"), "{err}");
    assert!(start.elapsed() < Duration::from_secs(60));
    // The limit is a flag.
    let keys = dir.path().join("long.txt");
    std::fs::write(&keys, format!("short\n{}\n", "x".repeat(100_000))).unwrap();
    let (code, _, err) = run(bloom()
        .args(["build", "--items", "100", "--fpr", "0.01", "--keys"])
        .arg(&keys)
        .arg("-o")
        .arg(&out));
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("line 2"), "{err}");
    let (code, _, err) = run(bloom()
        .args([
            "build",
            "--items",
            "100",
            "--fpr",
            "0.01",
            "--max-key-bytes",
            "128K",
            "--keys",
        ])
        .arg(&keys)
        .arg("-o")
        .arg(&out));
    assert_eq!(code, 0, "{err}");
}

#[test]
fn import_reads_no_more_than_the_raw_layout_needs() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("seed.bloom");
    let start = Instant::now();
    // A stream far longer than the layout: refused after 129 bytes.
    let (code, _, err) = run(bloom()
        .args(["import", "--from", "seed-raw", "-", "-o"])
        .arg(&out)
        .write_stdin(vec![0u8; 4 << 20]));
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("exactly 128 bytes") && err.contains("longer"),
        "{err}"
    );
    assert!(start.elapsed() < Duration::from_secs(60));
    assert!(!out.exists());
    // A device is not read at all, as for snapshots: the environment's failure.
    let (code, _, err) = run(bloom()
        .args(["import", "--from", "seed-raw", "/dev/zero", "-o"])
        .arg(&out));
    assert_eq!(code, 3, "{err}");
    assert!(
        err.contains("a snapshot is a regular file") || err.contains("regular file"),
        "{err}"
    );
    assert!(!out.exists());
}

#[test]
fn snapshots_that_are_not_regular_files_are_refused_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("pipe.bloom");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    for path in [fifo.as_path(), dir.path(), Path::new("/dev/zero")] {
        let mut child = bloom_process()
            .arg("check")
            .arg(path)
            .arg("key")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(120);
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                child.kill().unwrap();
                panic!("check blocked on {}", path.display());
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let err = std::io::read_to_string(child.stderr.take().unwrap()).unwrap();
        // Not a file to read: the environment's failure, as `verify` calls it unreadable.
        assert_eq!(status.code(), Some(3), "{}: {err}", path.display());
        assert!(err.contains("a snapshot is a regular file"), "{err}");
    }
}

#[test]
fn output_targets_links_devices_and_standard_output() {
    let dir = tempfile::tempdir().unwrap();
    // Through a link: the file it names is updated, and the link stays.
    let real = dir.path().join("real.bloom");
    let link = dir.path().join("link.bloom");
    build(&real, &["first"]);
    symlink(&real, &link).unwrap();
    let (code, _, err) = run(bloom().arg("add").arg(&link).arg("second"));
    assert_eq!(code, 0, "{err}");
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(
        common::answers(&real, &["first", "second"]),
        ["maybe", "maybe"]
    );

    // A device is refused and stays a device.
    let null_link = dir.path().join("null.bloom");
    symlink("/dev/null", &null_link).unwrap();
    for target in [Path::new("/dev/null"), null_link.as_path()] {
        let (code, _, err) = run(bloom()
            .args(["build", "--bits", "512", "--hashes", "2", "-o"])
            .arg(target));
        assert_eq!(code, 2, "{err}");
        assert!(err.contains("a character device"), "{err}");
    }
    assert!(
        std::fs::metadata("/dev/null")
            .unwrap()
            .file_type()
            .is_char_device()
    );
    let (code, _, err) = run(bloom()
        .args(["build", "--bits", "512", "--hashes", "2", "-o"])
        .arg(dir.path()));
    assert_eq!(code, 2, "{err}");

    // A file that is not a snapshot is never replaced by one (a mistyped -o).
    let notes = dir.path().join("notes.txt");
    std::fs::write(&notes, "precious").unwrap();
    let (code, _, err) = run(bloom()
        .args(["build", "--bits", "512", "--hashes", "2", "-o"])
        .arg(&notes));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("not a bloom snapshot"), "{err}");
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "precious");

    // `-o -` writes the snapshot to standard output (no file named `-`).
    let out = bloom()
        .current_dir(dir.path())
        .args([
            "build", "--bits", "1024", "--hashes", "3", "--keys", "-", "-o", "-",
        ])
        .write_stdin("x\ny\n")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(!dir.path().join("-").exists());
    let snapshot =
        bloom_format::Snapshot::decode(out.stdout, &bloom_format::DecodeOptions::unlimited())
            .unwrap();
    assert_eq!(snapshot.header().bit_count, 1024);
    let piped = dir.path().join("piped.bloom");
    std::fs::write(&piped, snapshot.encode()).unwrap();
    assert_eq!(common::answers(&piped, &["x", "y"]), ["maybe", "maybe"]);
    assert_eq!(stdout(bloom().arg("verify").arg(&piped)).lines().count(), 1);
}

/// A valid header this build cannot use (k = 65, past `MAX_HASHES`) over a damaged payload:
/// every command that reads the file reports the damage first, as `verify` does (the checks
/// after decoding are for a valid snapshot), and the parameter only over an intact payload.
#[test]
fn a_damaged_payload_is_reported_before_an_unusable_parameter() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = std::fs::read(fixtures("v2").join("large-k.bloom")).unwrap();
    let salt = usize::from(u16::from_le_bytes([bytes[68], bytes[69]]));
    let crc_at = 144 + salt;
    bytes[24..28].copy_from_slice(&65u32.to_le_bytes());
    let seal = |bytes: &mut Vec<u8>| {
        let crc = crc32fast::hash(&bytes[..crc_at]);
        bytes[crc_at..crc_at + 4].copy_from_slice(&crc.to_le_bytes());
    };
    seal(&mut bytes);
    let intact = dir.path().join("k65.bloom");
    std::fs::write(&intact, &bytes).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x01;
    let damaged = dir.path().join("k65-damaged.bloom");
    std::fs::write(&damaged, &bytes).unwrap();

    let (code, verify, err) = run(bloom().arg("verify").arg(&damaged));
    assert_eq!(code, 1, "{verify} {err}");
    assert!(verify.contains("checksum"), "{verify}");
    for (command, extra) in [
        ("check", &["key"][..]),
        ("inspect", &[][..]),
        ("add", &["key"][..]),
    ] {
        let (code, _, err) = run(bloom().arg(command).arg(&damaged).args(extra));
        assert_eq!(code, 1, "{command}: {err}");
        assert!(err.contains("checksum"), "{command}: {err}");
        assert!(!err.contains("positions per key"), "{command}: {err}");
        let (code, _, err) = run(bloom().arg(command).arg(&intact).args(extra));
        assert_eq!(code, 1, "{command}: {err}");
        assert!(err.contains("65 positions per key"), "{command}: {err}");
        assert!(!err.contains("checksum"), "{command}: {err}");
    }
    // The damaged file is left as it was.
    assert_eq!(std::fs::read(&damaged).unwrap(), bytes);
}
