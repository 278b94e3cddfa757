//! The command line reads as one tool: `-` is standard input wherever a snapshot is read,
//! completions and the manual come from the same definition, every write says what it did in
//! one line, and failures of the environment are exit 3.

mod common;

use common::{bloom, build, fixtures, run, stdout};

/// A snapshot on standard input answers exactly as the same file does.
#[test]
fn a_snapshot_on_standard_input_reads_as_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = dir.path().join("s.bloom");
    build(&snapshot, &["alice", "bob"]);
    let bytes = std::fs::read(&snapshot).unwrap();
    let from_file = stdout(bloom().arg("check").arg(&snapshot).args(["alice", "zed"]));
    let from_stdin = stdout(
        bloom()
            .args(["check", "-", "alice", "zed"])
            .write_stdin(bytes.clone()),
    );
    assert_eq!(from_file, from_stdin);
    assert!(
        from_file.starts_with("maybe\talice\nabsent\tzed"),
        "{from_file}"
    );
    let inspect_file = stdout(bloom().arg("inspect").arg(&snapshot).arg("--json"));
    let inspect_stdin = stdout(
        bloom()
            .args(["inspect", "-", "--json"])
            .write_stdin(bytes.clone()),
    );
    let without_path = |text: &str| {
        let mut value: serde_json::Value = serde_json::from_str(text).unwrap();
        value.as_object_mut().unwrap().remove("path");
        value
    };
    assert_eq!(without_path(&inspect_file), without_path(&inspect_stdin));
    assert_eq!(
        stdout(bloom().args(["verify", "-"]).write_stdin(bytes.clone())),
        "ok\t-\n"
    );
    // A damaged stream is refused as a damaged file is.
    let mut flipped = bytes.clone();
    let last = flipped.len() - 1;
    flipped[last] ^= 1;
    let (code, out, _) = run(bloom().args(["verify", "-"]).write_stdin(flipped.clone()));
    assert_eq!(code, 1);
    assert!(out.starts_with("damaged\t-\t"), "{out}");
    let (code, _, err) = run(bloom().args(["check", "-", "a"]).write_stdin(flipped));
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("standard input"), "{err}");
    // Export reads it too.
    let exported = dir.path().join("seed.raw");
    let seed = fixtures("v2").join("seed-contract.bloom");
    let (code, _, err) = run(bloom()
        .args(["export", "--to", "seed-raw", "-", "-o"])
        .arg(&exported)
        .write_stdin(std::fs::read(&seed).unwrap()));
    assert_eq!(code, 0, "{err}");
    assert_eq!(std::fs::read(&exported).unwrap().len(), 128);
    // Standard input is read once: not for both the snapshot and the keys, not twice.
    let (code, _, err) = run(bloom().args(["check", "-", "--keys", "-"]));
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = run(bloom().args(["verify", "-", "-"]));
    assert_eq!(code, 2, "{err}");
    // Commands that rewrite a snapshot in place refuse it.
    let (code, _, err) = run(bloom().args(["add", "-", "k"]));
    assert_eq!(code, 2, "{err}");
}

/// Completions for every shell clap knows, and a manual page, both naming the commands.
#[test]
fn completions_and_the_manual_come_from_the_command_line() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let script = stdout(bloom().args(["completions", shell]));
        for command in ["build", "check", "inspect", "verify", "redis"] {
            assert!(script.contains(command), "{shell} lacks {command}");
        }
        assert!(script.contains("max-bytes"), "{shell} lacks a flag");
    }
    let (code, _, err) = run(bloom().args(["completions", "tcsh"]));
    assert_eq!(code, 2, "{err}");
    let page = stdout(bloom().arg("man"));
    assert!(
        page.starts_with(".ie") || page.contains(".TH bloom 1"),
        "{page}"
    );
    assert!(page.contains(".TH bloom 1"));
    for command in ["plan", "build", "verify", "completions"] {
        assert!(page.contains(command), "the manual lacks {command}");
    }
    // A command's own page, with its flags.
    let create = stdout(bloom().args(["man", "redis", "create"]));
    assert!(create.contains(".TH bloom-redis-create 1"), "{create}");
    assert!(create.contains("shards"), "{create}");
    let (code, _, err) = run(bloom().args(["man", "frobnicate"]));
    assert_eq!(code, 2, "{err}");
}

/// `build`, `add` and `remove` end with one line on standard error saying what they wrote;
/// standard output stays empty (no progress is drawn off a terminal).
#[test]
fn writes_end_with_a_one_line_summary() {
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys.txt");
    let list: String = (0..5000).map(|i| format!("key-{i}\n")).collect();
    std::fs::write(&keys, list).unwrap();
    let snapshot = dir.path().join("s.bloom");
    let (code, out, err) = run(bloom()
        .args(["build", "--items", "5000", "--fpr", "0.01", "--keys"])
        .arg(&keys)
        .arg("-o")
        .arg(&snapshot));
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with(&format!(
            "built {} from 5000 keys: m = ",
            snapshot.display()
        )),
        "{err}"
    );
    assert!(err.contains("estimated false-positive rate"), "{err}");
    let (code, out, err) = run(bloom().arg("add").arg(&snapshot).args(["x", "y"]));
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("added 2 keys ("), "{err}");
    // Keys already in change nothing, and the summary says so.
    let (code, _, err) = run(bloom().arg("add").arg(&snapshot).args(["x", "y"]));
    assert_eq!(code, 0, "{err}");
    assert!(err.starts_with("added 2 keys (0 new) to "), "{err}");
    let counting = dir.path().join("c.bloom");
    let (code, _, err) = run(bloom()
        .args([
            "build",
            "--items",
            "100",
            "--fpr",
            "0.01",
            "--counting",
            "-o",
        ])
        .arg(&counting)
        .args(["--keys", "-"])
        .write_stdin("a\nb\n"));
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = run(bloom().arg("remove").arg(&counting).arg("a"));
    assert_eq!(code, 0, "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("removed 1 key from "), "{err}");
}

/// A file that is not there, or a key file that cannot be opened, is the environment's
/// failure (exit 3), said once with its path; bytes that are not a snapshot are bad input.
#[test]
fn environment_failures_are_exit_3() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nothing.bloom");
    for args in [
        vec!["inspect"],
        vec!["check", "--keys", "-"],
        vec!["export", "--to", "guava", "-o", "-"],
    ] {
        let (code, _, err) = run(bloom().args(&args[..1]).arg(&missing).args(&args[1..]));
        assert_eq!(code, 3, "{args:?}: {err}");
        assert_eq!(err.matches("nothing.bloom").count(), 1, "{err}");
    }
    let snapshot = dir.path().join("s.bloom");
    build(&snapshot, &["a"]);
    let (code, _, err) = run(bloom()
        .arg("check")
        .arg(&snapshot)
        .arg("--keys")
        .arg(dir.path().join("no-keys.txt")));
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("cannot open key file"), "{err}");
    // The magic of a file that is not a snapshot is shown as text.
    let text = dir.path().join("notes.txt");
    std::fs::write(&text, "HELLO, world, and more bytes").unwrap();
    let (code, _, err) = run(bloom().arg("inspect").arg(&text));
    assert_eq!(code, 1, "{err}");
    assert!(err.contains(r#"starts with "HELLO, w""#), "{err}");
    assert!(
        err.contains(r#"expected the magic "\x89BLM\r\n\x1a\n""#),
        "{err}"
    );
}

/// `plan --layout` plans one layout, the sharded ones included, in the same shapes; a rate
/// too small for a double says so; standard input named another way is still standard
/// input; a path that is not UTF-8 is shown exactly, escaped as keys are.
#[test]
fn the_rest_of_the_command_line_reads_the_same_way() {
    let plan: serde_json::Value = serde_json::from_str(&stdout(bloom().args([
        "plan",
        "--items",
        "100000",
        "--fpr",
        "0.01",
        "--layout",
        "sharded-v2-16",
        "--json",
    ])))
    .unwrap();
    let plans = plan["plans"].as_array().unwrap();
    assert_eq!(plans.len(), 1);
    assert_eq!(
        plans[0]["layout"],
        serde_json::json!({"id": 5, "name": "sharded-v2", "parameter": 16})
    );
    assert!(plans[0]["predicted_false_positive_rate"].as_f64().unwrap() <= 0.01);
    let text = stdout(bloom().args([
        "plan",
        "--items",
        "1000",
        "--fpr",
        "0.01",
        "--layout",
        "sharded-4",
    ]));
    assert!(
        text.contains("layout                          sharded-4\n"),
        "{text}"
    );
    let (code, _, err) = run(bloom().args(["plan", "--items", "10", "--fpr", "1e-400"]));
    assert_eq!(code, 2);
    assert!(err.contains("below the smallest rate"), "{err}");
    let dir = tempfile::tempdir().unwrap();
    let snapshot = dir.path().join("s.bloom");
    build(&snapshot, &["a"]);
    #[cfg(target_os = "linux")]
    {
        let (code, _, err) = run(bloom()
            .args(["check", "-", "--keys", "/dev/fd/0"])
            .write_stdin(std::fs::read(&snapshot).unwrap()));
        assert_eq!(code, 2, "{err}");
    }
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        let odd = dir
            .path()
            .join(std::ffi::OsStr::from_bytes(b"caf\xe9.bloom"));
        std::fs::copy(&snapshot, &odd).unwrap();
        let out = stdout(bloom().arg("verify").arg(&odd));
        assert!(out.starts_with("ok\t"), "{out}");
        assert!(out.contains("caf\\xe9.bloom"), "{out}");
    }
}
