//! The key-file grammar, applied the same way by every command that reads keys, and text
//! output that one key cannot break.

mod common;

use common::{bloom, run, stdout};

/// Builds from `contents` and returns the answers for `probes`.
fn built_from(contents: &[u8], probes: &[&str]) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys.txt");
    std::fs::write(&keys, contents).unwrap();
    let out = dir.path().join("f.bloom");
    let (code, _, err) = run(bloom()
        .args([
            "build",
            "--bits",
            "65536",
            "--hashes",
            "7",
            "--encoding",
            "bytes",
            "--keys",
        ])
        .arg(&keys)
        .arg("-o")
        .arg(&out));
    assert_eq!(code, 0, "{err}");
    let text = stdout(bloom().arg("check").arg(&out).args(probes));
    text.lines()
        .map(|l| l.split('\t').next().unwrap().to_owned())
        .collect()
}

#[test]
fn bom_line_endings_and_empty_lines() {
    // A BOM is not part of the first key; CRLF and a last line without LF read like LF.
    assert_eq!(
        built_from(
            b"\xEF\xBB\xBFfirst\r\nsecond\r\nlast\r",
            &["first", "second", "last"]
        ),
        ["maybe", "maybe", "maybe"]
    );
    assert_eq!(
        built_from(
            b"\xEF\xBB\xBFfirst\r\nsecond\r\nlast\r",
            &["\u{feff}first", "last\r"]
        ),
        ["absent", "absent"]
    );
    // Empty lines are skipped: no empty key goes in.
    assert_eq!(
        built_from(b"a\n\n\r\nb\n\n", &["a", "b", ""]),
        ["maybe", "maybe", "absent"]
    );
}

#[test]
fn a_nul_byte_is_refused_naming_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("utf16.txt");
    // "ab\n" in UTF-16LE: full of NULs.
    std::fs::write(&keys, b"\xff\xfea\0b\0\n\0").unwrap();
    for command in [
        &["build", "--bits", "512", "--hashes", "1", "-o", "x.bloom"][..],
        &["check", "x.bloom"],
    ] {
        if command[0] == "check" {
            common::build(&dir.path().join("x.bloom"), &["k"]);
        }
        let (code, _, err) = run(bloom()
            .current_dir(dir.path())
            .args(command)
            .arg("--keys")
            .arg(&keys));
        assert_eq!(code, 1, "{command:?}: {err}");
        assert!(err.contains("line 1") && err.contains("NUL"), "{err}");
    }
}

#[test]
fn jsonl_keys_hold_anything_and_the_same_grammar_applies_to_add_and_check() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = dir.path().join("f.bloom");
    common::build(&snapshot, &["seed"]);
    let jsonl = dir.path().join("keys.jsonl");
    std::fs::write(&jsonl, "\u{feff}\"\"\r\n\n\"tab\\there\"\n\"nul\\u0000\"").unwrap();
    let (code, _, err) = run(bloom()
        .arg("add")
        .arg(&snapshot)
        .arg("--keys")
        .arg(&jsonl)
        .arg("--jsonl"));
    assert_eq!(code, 0, "{err}");
    let json = stdout(
        bloom()
            .arg("check")
            .arg(&snapshot)
            .arg("--keys")
            .arg(&jsonl)
            .args(["--jsonl", "--json"]),
    );
    let answers: Vec<serde_json::Value> = json
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(answers.len(), 3, "{json}");
    assert_eq!(answers[0]["key"], "");
    assert_eq!(answers[2]["key"], "nul\u{0}");
    assert!(answers.iter().all(|a| a["answer"] == "maybe"), "{json}");
}

#[test]
fn text_output_escapes_keys_so_one_answer_is_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = dir.path().join("f.bloom");
    common::build(&snapshot, &["x"]);
    let keys = [
        "tab\there",
        "cr\rhere",
        "lf\nhere",
        "back\\slash",
        "bell\u{7}",
    ];
    let text = stdout(bloom().arg("check").arg(&snapshot).args(keys));
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), keys.len(), "{text:?}");
    let shown: Vec<&str> = lines
        .iter()
        .map(|l| l.split_once('\t').unwrap().1)
        .collect();
    assert_eq!(
        shown,
        [
            "tab\\there",
            "cr\\rhere",
            "lf\\nhere",
            "back\\\\slash",
            "bell\\x07"
        ]
    );
    // Bytes that are not UTF-8 (bytes encoding) are escaped in text and hex in JSON.
    let raw = dir.path().join("raw.bloom");
    let list = dir.path().join("raw.txt");
    std::fs::write(&list, b"ok\n\xff\xfe\n").unwrap();
    let (code, _, err) = run(bloom()
        .args([
            "build",
            "--bits",
            "1024",
            "--hashes",
            "3",
            "--encoding",
            "bytes",
            "--keys",
        ])
        .arg(&list)
        .arg("-o")
        .arg(&raw));
    assert_eq!(code, 0, "{err}");
    let text = stdout(bloom().arg("check").arg(&raw).arg("--keys").arg(&list));
    assert_eq!(text, "maybe\tok\nmaybe\t\\xff\\xfe\n");
    let json = stdout(
        bloom()
            .arg("check")
            .arg(&raw)
            .arg("--keys")
            .arg(&list)
            .arg("--json"),
    );
    assert!(json.contains("\"key_hex\":\"fffe\""), "{json}");
}

#[test]
fn json_lines_stay_complete_when_a_later_key_fails() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = dir.path().join("f.bloom");
    common::build(&snapshot, &["good"]);
    let keys = dir.path().join("keys.txt");
    std::fs::write(&keys, b"good\nfine\n\xff bad utf8\nnever\n").unwrap();
    let (code, out, err) = run(bloom()
        .arg("check")
        .arg(&snapshot)
        .arg("--keys")
        .arg(&keys)
        .arg("--json"));
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("line 3"), "{err}");
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{out}");
}

#[test]
fn every_key_before_a_bad_line_is_answered_whatever_the_error() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = dir.path().join("f.bloom");
    common::build(&snapshot, &["k1"]);
    let good: String = (1..=10).map(|i| format!("k{i}\n")).collect();
    let long = "x".repeat(100);
    for (what, tail, jsonl, message) in [
        ("NUL", "a\0b\n".to_owned(), false, "NUL"),
        ("too long", format!("{long}\n"), false, "longer"),
        ("bad JSON", "{bad\n".to_owned(), true, "line 11"),
    ] {
        let keys = dir.path().join("keys.txt");
        let body = if jsonl {
            good.lines()
                .map(|k| format!("\"{k}\"\n"))
                .collect::<String>()
                + &tail
        } else {
            good.clone() + &tail
        };
        std::fs::write(&keys, body).unwrap();
        let mut cmd = bloom();
        cmd.arg("check")
            .arg(&snapshot)
            .args(["--max-key-bytes", "64", "--keys"])
            .arg(&keys);
        if jsonl {
            cmd.arg("--jsonl");
        }
        let (code, out, err) = run(&mut cmd);
        assert_eq!(code, 1, "{what}: {err}");
        assert!(err.contains(message), "{what}: {err}");
        assert_eq!(out.lines().count(), 10, "{what}: {out}");
        assert!(out.starts_with("maybe\tk1\n"), "{what}: {out}");
    }
}
