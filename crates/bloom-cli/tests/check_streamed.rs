//! `bloom check` of a few keys (given as arguments, or in a small key file) reads the
//! snapshot once as it streams past, without loading the filter: it answers exactly as the
//! loaded filter does (keys from standard input, or many keys), refuses what loading refuses
//! with nothing answered, and holds memory for the keys only.

mod common;

use std::path::Path;

use common::{bloom, fixtures, run};

/// The keys a fixture lists (JSON strings, one a line), its removed keys, and keys never
/// inserted, ASCII and not: every one a valid argument.
fn keys_of(fixture: &Path) -> Vec<String> {
    let listed = |ext: &str| -> Vec<String> {
        std::fs::read_to_string(fixture.with_extension(ext))
            .map(|text| {
                text.lines()
                    .filter_map(|line| serde_json::from_str::<String>(line).ok())
                    .take(150)
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut keys = listed("keys");
    keys.extend(listed("removed"));
    keys.extend((0..100).map(|i| format!("absent-{i}")));
    keys.extend((0..50).map(|i| format!("absent-é-{i}")));
    keys.retain(|k| !k.contains('\0') && !k.starts_with('-'));
    keys
}

#[test]
fn argument_keys_answer_as_the_loaded_filter_for_every_fixture() {
    let dir = tempfile::tempdir().unwrap();
    let mut checked = 0;
    for version in ["v1", "v2", "v3"] {
        let mut files: Vec<_> = std::fs::read_dir(fixtures(version))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "bloom"))
            .collect();
        files.sort();
        for fixture in files {
            let keys = keys_of(&fixture);
            let list = dir.path().join("keys.jsonl");
            let lines: Vec<String> = keys
                .iter()
                .map(|k| serde_json::to_string(k).unwrap())
                .collect();
            std::fs::write(&list, lines.join("\n")).unwrap();
            for json in [false, true] {
                let command = || {
                    let mut command = bloom();
                    command.arg("check").arg(&fixture).arg("--exit-status");
                    if json {
                        command.arg("--json");
                    }
                    command
                };
                let (mut streamed, mut from_file, mut loaded) = (command(), command(), command());
                let streamed = run(streamed.arg("--").args(&keys));
                let from_file = run(from_file.arg("--jsonl").arg("--keys").arg(&list));
                let loaded = run(loaded
                    .args(["--jsonl", "--keys", "-"])
                    .write_stdin(lines.join("\n")));
                assert_eq!(streamed, loaded, "{}", fixture.display());
                assert_eq!(from_file, loaded, "{}", fixture.display());
                assert!(
                    streamed.1.lines().count() == keys.len(),
                    "{}: {}",
                    fixture.display(),
                    streamed.2
                );
                assert!(
                    streamed.1.contains("absent") && streamed.1.contains("maybe"),
                    "{}: both answers are tested",
                    fixture.display()
                );
            }
            checked += 1;
        }
    }
    assert!(checked >= 20, "{checked} fixtures");
}

#[test]
fn a_damaged_payload_answers_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.bloom");
    common::build(&path, &["alice", "bob"]);
    let mut bytes = std::fs::read(&path).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x01;
    std::fs::write(&path, &bytes).unwrap();
    let (code, out, err) = run(bloom().arg("check").arg(&path).args(["alice", "zed"]));
    assert_eq!(code, 1, "{err}");
    assert!(out.is_empty(), "no answer from damaged bytes: {out}");
    assert!(err.contains("checksum"), "{err}");
    // Cut short, likewise.
    std::fs::write(&path, &bytes[..last]).unwrap();
    let (code, out, err) = run(bloom().arg("check").arg(&path).arg("alice"));
    assert_eq!(code, 1, "{err}");
    assert!(out.is_empty(), "{out}");
}

/// A damaged snapshot built with other Unicode tables fails as the loaded path fails it: the
/// error alone, no warning about a filter that is then refused.
#[test]
fn a_damaged_snapshot_with_foreign_tables_fails_as_when_loaded() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = fixtures("v1").join("salted-trim-lower.bloom");
    let keys = dir.path().join("keys.txt");
    std::fs::write(&keys, "a\n").unwrap();
    let intact = run(bloom().arg("check").arg(&fixture).arg("a"));
    assert_eq!(intact.0, 0, "{}", intact.2);
    assert!(intact.2.contains("Unicode tables"), "{}", intact.2);
    assert_eq!(
        intact,
        run(bloom().arg("check").arg(&fixture).arg("--keys").arg(&keys))
    );
    assert_eq!(
        intact,
        run(bloom()
            .arg("check")
            .arg(&fixture)
            .args(["--keys", "-"])
            .write_stdin("a\n"))
    );
    let mut bytes = std::fs::read(&fixture).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x01;
    let path = dir.path().join("damaged.bloom");
    std::fs::write(&path, &bytes).unwrap();
    let streamed = run(bloom().arg("check").arg(&path).arg("a"));
    let from_file = run(bloom().arg("check").arg(&path).arg("--keys").arg(&keys));
    let loaded = run(bloom()
        .arg("check")
        .arg(&path)
        .args(["--keys", "-"])
        .write_stdin("a\n"));
    assert_eq!(streamed.0, 1, "{}", streamed.2);
    assert_eq!(streamed, loaded);
    assert_eq!(from_file, loaded);
    assert!(!streamed.2.contains("Unicode tables"), "{}", streamed.2);
    // On standard input, the warning names it as such.
    let stdin = run(bloom()
        .args(["check", "-", "a"])
        .write_stdin(std::fs::read(&fixture).unwrap()));
    assert!(
        stdin.2.starts_with("warning: standard input was built"),
        "{}",
        stdin.2
    );
}

/// A snapshot four times larger than the address space the check may use is answered: the
/// filter is never loaded for a few keys, given as arguments or in a small file. Keys from
/// standard input, or more keys than stream, are answered by the loaded filter, which needs
/// the memory.
#[cfg(target_os = "linux")]
#[test]
fn argument_keys_are_answered_in_memory_far_below_the_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("large.bloom");
    let keys = dir.path().join("keys.txt");
    std::fs::write(&keys, "record-1\nrecord-2\n").unwrap();
    // 2^31 bits: a 256 MiB payload.
    let (code, _, err) = run(bloom()
        .args(["build", "--bits", "2147483648", "--hashes", "7", "--keys"])
        .arg(&keys)
        .arg("-o")
        .arg(&path));
    assert_eq!(code, 0, "{err}");
    assert!(std::fs::metadata(&path).unwrap().len() > 256 << 20);
    let bin = assert_cmd::cargo::cargo_bin("bloom");
    let capped = |args: &str| {
        // 64 MiB of address space, in KiB.
        let script = format!("ulimit -v 65536 && exec \"$0\" check \"$1\" {args} < \"$2\"",);
        std::process::Command::new("sh")
            .arg("-c")
            .arg(script)
            .arg(&bin)
            .arg(&path)
            .arg(&keys)
            .output()
            .unwrap()
    };
    for args in [
        "record-1 record-2 record-3".to_owned(),
        format!("record-3 --keys {}", keys.display()),
    ] {
        let streamed = capped(&args);
        let out = String::from_utf8_lossy(&streamed.stdout);
        assert!(
            streamed.status.success(),
            "{args}: {}",
            String::from_utf8_lossy(&streamed.stderr)
        );
        assert_eq!(out.lines().count(), 3, "{args}: {out}");
        assert!(out.contains("maybe\trecord-1\nmaybe\trecord-2\n"), "{out}");
    }
    // A key file that cannot be read, or has a bad line, is reported without loading.
    let missing = capped(&format!("--keys {}", dir.path().join("none.txt").display()));
    assert_eq!(missing.status.code(), Some(3));
    let err = String::from_utf8_lossy(&missing.stderr);
    assert!(err.contains("cannot open key file"), "{err}");
    let bad = dir.path().join("bad.jsonl");
    std::fs::write(&bad, "\"record-1\"\nnot json\n").unwrap();
    let refused = capped(&format!("--jsonl --keys {}", bad.display()));
    assert_eq!(refused.status.code(), Some(1));
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("line 2"), "{err}");
    assert_eq!(
        String::from_utf8_lossy(&refused.stdout),
        "maybe\trecord-1\n"
    );
    // 10,000 keys of 7 positions: more than stream.
    let many = dir.path().join("many.txt");
    let lines: Vec<String> = (0..10_000).map(|i| format!("record-{i}")).collect();
    std::fs::write(&many, lines.join("\n")).unwrap();
    for args in ["--keys -".to_owned(), format!("--keys {}", many.display())] {
        let loaded = capped(&args);
        assert_eq!(
            loaded.status.code(),
            Some(3),
            "{args}: the load needs the memory"
        );
        assert!(String::from_utf8_lossy(&loaded.stderr).contains("allocate"));
    }
}

/// A bad line in a small key file is reported as the loaded filter reports it: the keys
/// before it answered, then the line named.
#[test]
fn a_bad_line_in_a_small_key_file_fails_as_when_loaded() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.bloom");
    common::build(&path, &["alice", "bob"]);
    let keys = dir.path().join("keys.jsonl");
    let text = "\"alice\"\n\"zed\"\nnot json\n\"bob\"\n";
    std::fs::write(&keys, text).unwrap();
    let from_file = run(bloom()
        .arg("check")
        .arg(&path)
        .args(["--jsonl", "--keys"])
        .arg(&keys));
    let loaded = run(bloom()
        .arg("check")
        .arg(&path)
        .args(["--jsonl", "--keys", "-"])
        .write_stdin(text));
    assert_eq!(from_file.0, 1, "{}", from_file.2);
    assert_eq!(from_file.0, loaded.0);
    assert_eq!(from_file.1, loaded.1);
    assert_eq!(from_file.1, "maybe\talice\nabsent\tzed\n");
    assert!(from_file.2.contains("line 3"), "{}", from_file.2);
    // The text of an encoding's refusal names the line too: a key that is not UTF-8.
    let bytes_keys = dir.path().join("bytes.txt");
    std::fs::write(&bytes_keys, b"alice\n\xff\xfe\nbob\n").unwrap();
    let refused = run(bloom()
        .arg("check")
        .arg(&path)
        .arg("--keys")
        .arg(&bytes_keys));
    let loaded = run(bloom()
        .arg("check")
        .arg(&path)
        .args(["--keys", "-"])
        .write_stdin(&b"alice\n\xff\xfe\nbob\n"[..]));
    assert_eq!(refused.0, loaded.0, "{}", refused.2);
    assert_eq!(refused.1, loaded.1);
    assert_eq!(refused.1, "maybe\talice\n");
    assert!(refused.2.contains("line 2"), "{}", refused.2);
    assert!(loaded.2.contains("line 2"), "{}", loaded.2);
}
