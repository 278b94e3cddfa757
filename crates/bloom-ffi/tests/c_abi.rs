//! The C ABI from C: `tests/c/agreement.c`, compiled with `cc` against the static library
//! and `include/bloom.h`, run under valgrind (leaks and invalid accesses fail it). Every
//! golden fixture of every format version must answer its keys (listed, removed, absent and
//! refused) exactly as the Rust reader does, save a snapshot `bloom verify` accepts, and
//! damaged files must get their error codes (a payload over the limit names the argument to
//! raise), and a filter the system cannot allocate gets `out-of-memory`. Each test compiles
//! the program into its own temporary directory, removed when the test ends.

use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use bloom_core::{AnyFilter, Filter};
use bloom_format::{DecodeOptions, Snapshot};

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `target/<profile>`: where cargo put this test's executable (in `deps/`) and the `bloom`
/// command.
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's own path");
    exe.parent()
        .and_then(Path::parent)
        .expect("tests run from target/<profile>/deps")
        .to_path_buf()
}

/// The static library cargo built for this test run: beside the test's executable in
/// `deps/`. Only `cargo build` copies it up to `target/<profile>`, so a copy there may be
/// stale or absent.
fn static_library() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's own path");
    exe.with_file_name("libbloom_ffi.a")
}

/// The agreement program, compiled into `dir` (a test's temporary directory, removed when
/// the test ends, passed or failed: a program of tens of megabytes is never left behind).
fn program(dir: &Path) -> PathBuf {
    let library = static_library();
    assert!(
        library.exists(),
        "{} is missing: cargo builds it with this crate's tests (`cargo test -p bloom-ffi`)",
        library.display()
    );
    let out = dir.join("agreement");
    let status = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".to_owned()))
        .args([
            "-std=gnu11",
            "-g",
            "-O1",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-I",
        ])
        .arg(crate_dir().join("include"))
        .arg(crate_dir().join("tests/c/agreement.c"))
        .arg(&library)
        .args(["-lpthread", "-ldl", "-lm", "-o"])
        .arg(&out)
        .status()
        .expect("a C compiler `cc` (Debian's gcc; `cargo xtask test` installs it)");
    assert!(status.success(), "the C program did not compile ({status})");
    out
}

/// Runs `program` under valgrind, which fails the run (exit 99) on any invalid access or
/// leak.
fn run(program: &Path, args: &[&Path]) -> Output {
    let output = Command::new("valgrind")
        .args([
            "--quiet",
            "--error-exitcode=99",
            "--leak-check=full",
            "--errors-for-leak-kinds=definite,indirect",
            "--show-leak-kinds=definite,indirect",
        ])
        .arg(program)
        .args(args)
        .output()
        .expect("valgrind (Debian's package; `cargo xtask test` installs it)");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_ne!(
        output.status.code(),
        Some(99),
        "valgrind found errors:\n{stderr}"
    );
    output
}

fn fixtures() -> Vec<PathBuf> {
    let root = crate_dir().join("../../fixtures");
    let mut found = Vec::new();
    for version in ["v1", "v2", "v3"] {
        for entry in fs::read_dir(root.join(version)).expect("fixtures/vN") {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "bloom") {
                found.push(path);
            }
        }
    }
    found.sort();
    assert!(found.len() >= 45, "only {} fixtures found", found.len());
    found
}

/// The keys asked of a fixture: those it lists, those it removed, keys never inserted, an
/// empty key, text outside ASCII, and bytes that are not UTF-8 (refused by text encodings).
fn probe_keys(fixture: &Path) -> Vec<Vec<u8>> {
    let mut keys = Vec::new();
    for list in ["keys", "removed"] {
        if let Ok(text) = fs::read_to_string(fixture.with_extension(list)) {
            for line in text.lines() {
                let key: String = serde_json::from_str(line).expect("a JSON string per line");
                keys.push(key.into_bytes());
            }
        }
    }
    keys.extend((0..200).map(|i| format!("never-inserted-{i}").into_bytes()));
    keys.push(Vec::new());
    keys.push("Cafe\u{301} \u{3a3}".as_bytes().to_vec());
    keys.push(vec![0xff, 0xfe, b'x']);
    keys
}

fn write_keys(path: &Path, keys: &[Vec<u8>]) {
    let mut out = Vec::new();
    for key in keys {
        out.extend_from_slice(&u32::try_from(key.len()).unwrap().to_le_bytes());
        out.extend_from_slice(key);
    }
    fs::write(path, out).unwrap();
}

/// What the Rust reader answers: '1' maybe, '0' absent, 'E' refused.
fn rust_answers(filter: &AnyFilter, keys: &[Vec<u8>]) -> String {
    keys.iter()
        .map(|k| match filter.contains(k.as_slice()) {
            Ok(true) => '1',
            Ok(false) => '0',
            Err(_) => 'E',
        })
        .collect()
}

/// The `bloom` command beside this test (built with the workspace).
fn bloom_command() -> PathBuf {
    let path = target_dir().join("bloom");
    assert!(
        path.exists(),
        "{} is missing: build it with `cargo build -p bloom-cli` (`cargo xtask test` and `cargo test --workspace` do)",
        path.display()
    );
    path
}

fn bloom_verify(files: &[PathBuf]) {
    let output = Command::new(bloom_command())
        .arg("verify")
        .args(files)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "bloom verify refused what the C ABI saved:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn every_fixture_answers_through_c_as_the_rust_reader_does() {
    let dir = tempfile::tempdir().unwrap();
    let fixtures = fixtures();
    let mut manifest = String::new();
    let mut expected = Vec::new();
    let mut saved = Vec::new();
    for (i, fixture) in fixtures.iter().enumerate() {
        let keys = probe_keys(fixture);
        let keys_path = dir.path().join(format!("{i}.keys"));
        write_keys(&keys_path, &keys);
        let snapshot = Snapshot::read_file(fixture, &DecodeOptions::unlimited()).unwrap();
        let filter = AnyFilter::from_snapshot(&snapshot).unwrap();
        let answers_path = dir.path().join(format!("{i}.answers"));
        let saved_path = dir.path().join(format!("{i}.bloom"));
        manifest.push_str(&format!(
            "{}\t{}\t{}\t{}\n",
            fixture.display(),
            keys_path.display(),
            answers_path.display(),
            saved_path.display()
        ));
        let header = snapshot.header();
        let first_line = format!(
            "{} {} {} {} {} {} {} {} {} {}",
            snapshot.format_version().value(),
            filter.kind(),
            header.position_rule.name(),
            header.layout.name(),
            header.key_encoding.id.name(),
            header.bit_count,
            header.hash_count,
            header.item_count,
            header.dataset_generation.get(),
            i32::from(!header.salt.is_empty()),
        );
        expected.push((
            fixture,
            answers_path,
            first_line,
            rust_answers(&filter, &keys),
        ));
        saved.push((saved_path, filter, keys));
    }
    let manifest_path = dir.path().join("manifest");
    fs::File::create(&manifest_path)
        .unwrap()
        .write_all(manifest.as_bytes())
        .unwrap();

    let output = run(&program(dir.path()), &[Path::new("read"), &manifest_path]);
    assert!(
        output.status.success(),
        "the C program failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    for (fixture, answers_path, first_line, answers) in &expected {
        let got = fs::read_to_string(answers_path).unwrap();
        let mut lines = got.lines();
        assert_eq!(
            lines.next(),
            Some(first_line.as_str()),
            "{}: header",
            fixture.display()
        );
        let got = lines.next().unwrap_or_default();
        assert_eq!(
            got.len(),
            answers.len(),
            "{}: answer count",
            fixture.display()
        );
        for (i, (c, rust)) in got.chars().zip(answers.chars()).enumerate() {
            assert_eq!(
                c,
                rust,
                "{}: key {i} answered {c} through C, {rust} in Rust",
                fixture.display()
            );
        }
        // Every listed key is found (the fixture's own promise), and the refused key refused.
        assert!(answers.ends_with('E') || !answers.contains('E'));
    }
    // A version 3 fixture saved unchanged, its generation kept, is the same file: header
    // (store binding included) and payload.
    for ((fixture, ..), (path, ..)) in expected.iter().zip(&saved) {
        if fixture.parent().is_some_and(|d| d.ends_with("v3")) {
            assert!(
                fs::read(fixture).unwrap() == fs::read(path).unwrap(),
                "{}: saved through C, the snapshot changed",
                fixture.display()
            );
        }
    }
    // What C saved reads back in Rust as the same filter, and `bloom verify` accepts it.
    for (path, filter, keys) in &saved {
        let back = Snapshot::read_file(path, &DecodeOptions::unlimited()).unwrap();
        let back = AnyFilter::from_snapshot(&back).unwrap();
        assert_eq!(rust_answers(&back, keys), rust_answers(filter, keys));
        assert_eq!(back.count_ones(), filter.count_ones());
    }
    let files: Vec<PathBuf> = saved.into_iter().map(|(p, _, _)| p).collect();
    bloom_verify(&files);
}

#[test]
fn a_filter_built_through_c_is_the_one_the_cli_builds() {
    let dir = tempfile::tempdir().unwrap();
    let keys: Vec<Vec<u8>> = (0..2_000)
        .map(|i| format!("record-{i}").into_bytes())
        .collect();
    let keys_path = dir.path().join("keys");
    write_keys(&keys_path, &keys);
    let from_c = dir.path().join("c.bloom");
    let output = run(
        &program(dir.path()),
        &[Path::new("build"), &keys_path, &from_c, Path::new("nfc")],
    );
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    bloom_verify(std::slice::from_ref(&from_c));

    let text: String = keys
        .iter()
        .map(|k| format!("{}\n", String::from_utf8_lossy(k)))
        .collect();
    let key_file = dir.path().join("keys.txt");
    fs::write(&key_file, text).unwrap();
    let from_cli = dir.path().join("cli.bloom");
    let status = Command::new(bloom_command())
        .args([
            "build",
            "--items",
            "2001",
            "--fpr",
            "0.01",
            "--generation",
            "7",
            "--keys",
        ])
        .arg(&key_file)
        .arg("-o")
        .arg(&from_cli)
        .output()
        .unwrap();
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    assert!(
        fs::read(&from_c).unwrap() == fs::read(&from_cli).unwrap(),
        "the snapshot built through C differs from the CLI's"
    );
}

/// Writes `bytes` to a new file in `dir` and runs `program`'s `damaged` mode on it.
fn damaged(program: &Path, dir: &Path, name: &str, bytes: &[u8], max: &str) -> String {
    let path = dir.join(name);
    fs::write(&path, bytes).unwrap();
    damaged_path(program, &path, max)
}

fn damaged_path(program: &Path, path: &Path, max: &str) -> String {
    let output = run(program, &[Path::new("damaged"), path, Path::new(max)]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// Every form of access (load, verify, inspect, load from a buffer) reports `status`.
fn assert_all(report: &str, status: &str, forms: &[&str]) {
    for form in forms {
        let line = report
            .lines()
            .find(|l| l.split(' ').next() == Some(form))
            .unwrap_or_else(|| panic!("no {form} line in:\n{report}"));
        let got = line.split(' ').nth(1).unwrap();
        assert_eq!(got, status, "{form}: {line}");
        assert!(
            line.len() > form.len() + status.len() + 2,
            "no message: {line}"
        );
    }
}

#[test]
fn damaged_files_get_their_error_codes() {
    let dir = tempfile::tempdir().unwrap();
    let program = program(dir.path());
    let good = fs::read(crate_dir().join("../../fixtures/v3/xxh3-blocked.bloom")).unwrap();
    let all = ["load", "verify", "inspect", "load-buffer"];
    let payload = ["load", "verify", "load-buffer"];

    // A bit flipped in the payload: the header reads, the payload checksum fails.
    let mut flipped = good.clone();
    let last = flipped.len() - 1;
    flipped[last - 10] ^= 0x10;
    let report = damaged(&program, dir.path(), "flipped.bloom", &flipped, "0");
    assert_all(&report, "corrupt", &payload);
    assert_all(&report, "ok", &["inspect"]);

    // Cut short.
    let report = damaged(
        &program,
        dir.path(),
        "truncated.bloom",
        &good[..good.len() / 2],
        "0",
    );
    assert_all(&report, "corrupt", &payload);

    // A flipped header byte: the header checksum fails.
    let mut header = good.clone();
    header[20] ^= 0x01;
    assert_all(
        &damaged(&program, dir.path(), "header.bloom", &header, "0"),
        "corrupt",
        &all,
    );

    // Not a snapshot at all, and empty.
    let report = damaged(
        &program,
        dir.path(),
        "text.bloom",
        b"SQLite format 3\0 and more",
        "0",
    );
    assert_all(&report, "not-a-snapshot", &all);
    assert_all(
        &damaged(&program, dir.path(), "empty.bloom", b"", "0"),
        "not-a-snapshot",
        &all,
    );

    // A payload over the limit it is read with: the message names the argument to raise.
    let report = damaged(&program, dir.path(), "big.bloom", &good, "16");
    assert_all(&report, "too-large", &all);
    for line in report.lines() {
        assert!(line.contains("max_payload_bytes"), "{line}");
    }

    // A directory and a missing file: the system's errors. (No buffer to read.)
    let forms = ["load", "verify", "inspect"];
    assert_all(&damaged_path(&program, dir.path(), "0"), "io", &forms);
    assert_all(
        &damaged_path(&program, &dir.path().join("missing.bloom"), "0"),
        "io",
        &forms,
    );
}

#[test]
fn a_filter_that_cannot_be_allocated_is_out_of_memory() {
    let dir = tempfile::tempdir().unwrap();
    // Not under valgrind, which keeps its own address space: the program limits its own.
    let output = Command::new(program(dir.path()))
        .arg("oom")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.starts_with("new out-of-memory "), "{stdout}");
}
