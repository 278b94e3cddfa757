//! Counting snapshots from the command line: `build --counting`, `remove` (absent keys listed
//! and left alone, exit 1), `inspect` (layout and saturated counters), `add` and `check` on
//! them, refusals, damaged files and concurrent removers.

mod common;

use std::path::Path;
use std::process::Stdio;

use common::{answers, bloom, bloom_process, build, fixtures, run, stdout};

fn build_counting(path: &Path, keys: &[&str], extra: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let list = dir.path().join("keys.txt");
    std::fs::write(&list, keys.join("\n")).unwrap();
    let (code, _, err) = run(bloom()
        .args([
            "build",
            "--counting",
            "--items",
            "2000",
            "--fpr",
            "0.001",
            "--keys",
        ])
        .arg(&list)
        .args(extra)
        .arg("-o")
        .arg(path));
    assert_eq!(code, 0, "{err}");
}

#[test]
fn remove_takes_keys_out_and_lists_the_absent_ones() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = dir.path().join("c.bloom");
    build_counting(&snapshot, &["alice", "bob", "carol"], &[]);
    let inspect = stdout(bloom().arg("inspect").arg(&snapshot));
    assert!(inspect.contains("layout: 4 (counting-4bit)"), "{inspect}");
    assert!(inspect.contains("saturated counters (at 15, never decremented): 0"));

    let (code, out, err) = run(bloom()
        .arg("remove")
        .arg(&snapshot)
        .args(["alice", "nobody", "bob"]));
    assert_eq!(code, 1, "{err}");
    assert_eq!(out, "absent\tnobody\n");
    assert!(err.contains("removed 2 keys from "), "{err}");
    assert!(
        err.contains("; 1 reported absent and left alone: m = "),
        "{err}"
    );
    assert!(err.contains("about 1 key in it"), "{err}");
    assert_eq!(err.lines().count(), 1, "one line of summary: {err}");
    assert_eq!(
        answers(&snapshot, &["alice", "bob", "carol"]),
        ["absent", "absent", "maybe"]
    );
    // Removing them again: both listed, nothing changes.
    let before = std::fs::read(&snapshot).unwrap();
    let (code, out, _) = run(bloom().arg("remove").arg(&snapshot).args(["alice", "bob"]));
    assert_eq!(code, 1);
    assert_eq!(out, "absent\talice\nabsent\tbob\n");
    assert_eq!(std::fs::read(&snapshot).unwrap(), before);

    // A key added twice needs two removes.
    stdout(bloom().arg("add").arg(&snapshot).args(["dave", "dave"]));
    stdout(bloom().arg("remove").arg(&snapshot).arg("dave"));
    assert_eq!(answers(&snapshot, &["dave"]), ["maybe"]);
    stdout(bloom().arg("remove").arg(&snapshot).arg("dave"));
    assert_eq!(answers(&snapshot, &["dave"]), ["absent"]);
    let (code, _, _) = run(bloom().arg("verify").arg(&snapshot));
    assert_eq!(code, 0);
}

#[test]
fn remove_reads_keys_from_a_file_and_the_encoding_applies() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = dir.path().join("c.bloom");
    build_counting(&snapshot, &["caf\u{e9}", "x", "y"], &["--encoding", "nfc"]);
    let list = dir.path().join("gone.txt");
    // The NFD spelling of the same key, and a key never inserted.
    std::fs::write(&list, "cafe\u{301}\r\nnever\n").unwrap();
    let (code, out, _) = run(bloom()
        .arg("remove")
        .arg(&snapshot)
        .arg("--keys")
        .arg(&list));
    assert_eq!(code, 1);
    assert_eq!(out, "absent\tnever\n");
    assert_eq!(
        answers(&snapshot, &["caf\u{e9}", "x", "y"]),
        ["absent", "maybe", "maybe"]
    );
}

#[test]
fn saturated_counters_are_shown_and_survive_removes() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = dir.path().join("hot.bloom");
    let (code, _, err) = run(bloom()
        .args(["build", "--counting", "--bits", "64", "--hashes", "3", "-o"])
        .arg(&snapshot));
    assert_eq!(code, 0, "{err}");
    let hot: Vec<&str> = std::iter::repeat_n("hot", 20).collect();
    stdout(bloom().arg("add").arg(&snapshot).args(&hot));
    let json = stdout(bloom().arg("inspect").arg("--json").arg(&snapshot));
    let value: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(value["counting"], true);
    assert_eq!(value["layout"]["name"], "counting-4bit");
    let saturated = value["saturated_counters"].as_u64().unwrap();
    assert!((1..=3).contains(&saturated), "{json}");
    assert!(value["set_bits"].is_null());
    let removes: Vec<&str> = std::iter::repeat_n("hot", 25).collect();
    let (code, _, err) = run(bloom().arg("remove").arg(&snapshot).args(&removes));
    assert_eq!(code, 0, "saturated counters never reach zero: {err}");
    assert_eq!(answers(&snapshot, &["hot"]), ["maybe"]);
}

#[test]
fn plain_snapshots_and_wrong_layouts_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("plain.bloom");
    build(&plain, &["a"]);
    let before = std::fs::read(&plain).unwrap();
    let (code, _, err) = run(bloom().arg("remove").arg(&plain).arg("a"));
    assert_eq!(code, 1);
    assert!(
        err.contains("plain filter") && err.contains("--counting"),
        "{err}"
    );
    assert_eq!(std::fs::read(&plain).unwrap(), before);

    for (flags, what) in [
        (&["--layout", "blocked-512"][..], "no counting form"),
        (&["--rule", "guava-mitz64"][..], "no counting form"),
    ] {
        let (code, _, err) = run(bloom()
            .args(["build", "--counting", "--items", "10", "--fpr", "0.01"])
            .args(flags)
            .arg("-o")
            .arg(dir.path().join("x.bloom")));
        assert_eq!(code, 2, "{flags:?}");
        assert!(err.contains(what), "{err}");
    }
    let (code, _, err) = run(bloom().args(["remove", "-", "a"]));
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = run(bloom().arg("remove").arg(dir.path().join("missing.bloom")));
    assert_eq!(code, 2, "no keys is a usage error: {err}");
}

#[test]
fn damaged_counting_files_are_refused_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = dir.path().join("c.bloom");
    std::fs::copy(fixtures("v2").join("counting-xxh3.bloom"), &snapshot).unwrap();
    let mut bytes = std::fs::read(&snapshot).unwrap();
    // m = 2001 is odd: set the padding nibble of the last byte (CRC fixed up or not, it is
    // refused either way; here the CRC no longer matches first).
    let last = bytes.len() - 1;
    bytes[last] |= 0x80;
    std::fs::write(&snapshot, &bytes).unwrap();
    for args in [&["remove"][..], &["add"][..], &["check"][..]] {
        let (code, out, err) = run(bloom().args(args).arg(&snapshot).arg("record-1"));
        assert_eq!(code, 1, "{args:?}: {err}");
        assert!(out.is_empty());
    }
    assert_eq!(std::fs::read(&snapshot).unwrap(), bytes);
}

#[test]
fn the_golden_counting_fixtures_answer_from_the_command_line() {
    let path = fixtures("v2").join("counting-sha256-salted-saturated.bloom");
    let inspect = stdout(bloom().arg("inspect").arg(&path));
    assert!(inspect.contains("counters above zero: "), "{inspect}");
    assert!(!inspect.contains("saturated counters (at 15, never decremented): 0\n"));
    let keys: Vec<String> = (0..120).map(|i| format!("record-{i}")).collect();
    let out = stdout(bloom().arg("check").arg(&path).args(&keys));
    assert!(out.lines().all(|l| l.starts_with("maybe")), "{out}");
}

#[test]
fn concurrent_removers_and_adders_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = dir.path().join("shared.bloom");
    let keys: Vec<String> = (0..6)
        .flat_map(|w| (0..20).map(move |i| format!("w{w}-k{i}")))
        .collect();
    let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
    build_counting(&snapshot, &refs, &[]);
    // Each process removes its even keys, and adds new ones.
    let children: Vec<_> = (0..6)
        .flat_map(|w| {
            let gone: Vec<String> = (0..20).step_by(2).map(|i| format!("w{w}-k{i}")).collect();
            let new: Vec<String> = (0..10).map(|i| format!("new-w{w}-{i}")).collect();
            [
                bloom_process()
                    .arg("remove")
                    .arg(&snapshot)
                    .args(gone)
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap(),
                bloom_process()
                    .arg("add")
                    .arg(&snapshot)
                    .args(new)
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap(),
            ]
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
    let kept: Vec<String> = (0..6)
        .flat_map(|w| {
            (1..20)
                .step_by(2)
                .map(move |i| format!("w{w}-k{i}"))
                .chain((0..10).map(move |i| format!("new-w{w}-{i}")))
        })
        .collect();
    let out = stdout(bloom().arg("check").arg(&snapshot).args(&kept));
    assert!(!out.contains("absent"), "{out}");
    let gone: Vec<String> = (0..6)
        .flat_map(|w| (0..20).step_by(2).map(move |i| format!("w{w}-k{i}")))
        .collect();
    let out = stdout(bloom().arg("check").arg(&snapshot).args(&gone));
    let absent = out.lines().filter(|l| l.starts_with("absent")).count();
    assert!(
        absent >= 58,
        "every removal landed (but false positives): {out}"
    );
}

/// A reader that goes away stops the listing of absent keys, not the removal: the file is
/// still written, and the exit code still says keys were left alone.
#[test]
fn a_closed_standard_output_does_not_stop_the_removal() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = dir.path().join("c.bloom");
    build_counting(&snapshot, &["keep", "gone"], &[]);
    // Far more than a pipe buffer of "absent" lines, then the key to remove.
    let list = dir.path().join("keys.txt");
    let mut keys: String = (0..30_000).map(|i| format!("never-{i}\n")).collect();
    keys.push_str("gone\n");
    std::fs::write(&list, keys).unwrap();
    let out = common::run_with_stdout_closed(&[
        "remove".as_ref(),
        snapshot.as_os_str(),
        "--keys".as_ref(),
        list.as_os_str(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(answers(&snapshot, &["keep", "gone"]), ["maybe", "absent"]);
}

#[test]
fn standard_output_is_not_a_snapshot_to_update() {
    for command in ["add", "remove"] {
        for path in ["-", "/dev/stdout"] {
            let (code, _, err) = run(bloom().args([command, path, "k"]));
            assert_eq!(code, 2, "{command} {path}: {err}");
            assert!(err.contains("not a file"), "{err}");
        }
    }
}
