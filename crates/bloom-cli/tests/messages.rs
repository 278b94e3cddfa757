//! What the CLI says: a mistyped command gets a suggestion, in colour on a terminal only
//! (and never under `NO_COLOR`); the help of every command that reads keys holds the key-file
//! grammar; `verify` says a file that was never a snapshot is not one; numbers have six
//! significant digits and header fields are exact, as docs/cli.md promises.

mod common;

use std::path::Path;

use common::{bloom, fixtures, run, stdout};

#[test]
fn a_mistyped_command_gets_a_suggestion() {
    let (code, _, err) = run(bloom().arg("chek"));
    assert_eq!(code, 2);
    assert!(err.contains("similar subcommand exists: 'check'"), "{err}");
    let (code, _, err) = run(bloom().args(["redis", "ad"]));
    assert_eq!(code, 2);
    assert!(err.contains("'add'"), "{err}");
    let (code, _, err) = run(bloom().args(["build", "--itmes", "10"]));
    assert_eq!(code, 2);
    assert!(err.contains("--items"), "{err}");
    // Not a terminal: no colour.
    assert!(!err.contains('\u{1b}'), "{err:?}");
}

/// Runs `bloom ARGS` under a pseudo-terminal (util-linux's `script`), with `env` set, and
/// returns what it printed.
fn on_a_terminal(args: &str, env: &[(&str, &str)]) -> Option<String> {
    let binary = assert_cmd::cargo::cargo_bin("bloom");
    let mut command = std::process::Command::new("script");
    command
        .args(["-q", "-e", "-c"])
        .arg(format!("{} {args}", binary.display()))
        .arg("/dev/null")
        .env_remove("NO_COLOR")
        .env("TERM", "xterm-256color");
    for (k, v) in env {
        command.env(k, v);
    }
    let out = command.output().ok()?;
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn errors_are_in_colour_on_a_terminal_unless_no_color_is_set() {
    let Some(coloured) = on_a_terminal("chek", &[]) else {
        panic!("util-linux's script is needed to give the binary a terminal");
    };
    assert!(coloured.contains("check"), "{coloured:?}");
    assert!(coloured.contains('\u{1b}'), "{coloured:?}");
    let plain = on_a_terminal("chek", &[("NO_COLOR", "1")]).unwrap();
    assert!(plain.contains("check"), "{plain:?}");
    assert!(!plain.contains('\u{1b}'), "{plain:?}");
}

#[test]
fn every_command_that_reads_keys_explains_key_files_in_its_help() {
    let grammar = "one key per line, LF or CRLF line endings";
    for command in [
        &["build"][..],
        &["add"],
        &["remove"],
        &["check"],
        &["redis", "add"],
        &["redis", "check"],
        &["parquet", "check"],
    ] {
        let help = stdout(bloom().args(command).arg("--help"));
        assert!(help.contains(grammar), "{command:?}");
        assert!(help.contains("--jsonl"), "{command:?}");
        // The short help points at it.
        let short = stdout(bloom().args(command).arg("-h"));
        assert!(
            short.contains("The grammar is at the end of this command's `--help`"),
            "{command:?}: {short}"
        );
    }
    assert!(stdout(bloom().arg("--help")).contains(grammar));
}

#[test]
fn verify_says_a_file_that_was_never_a_snapshot_is_not_one() {
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("notes.txt");
    std::fs::write(&text, "these are notes, not a filter\n").unwrap();
    let empty = dir.path().join("empty.bloom");
    std::fs::write(&empty, b"").unwrap();
    // A real snapshot with a byte changed is damaged, which is another thing.
    let damaged = dir.path().join("damaged.bloom");
    let mut bytes = std::fs::read(fixtures("v3").join("planned-split-512.bloom")).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x01;
    std::fs::write(&damaged, bytes).unwrap();
    let (code, out, _) = run(bloom().arg("verify").arg(&text).arg(&empty).arg(&damaged));
    assert_eq!(code, 1);
    let statuses: Vec<&str> = out.lines().map(|l| l.split('\t').next().unwrap()).collect();
    assert_eq!(
        statuses,
        ["not-a-snapshot", "not-a-snapshot", "damaged"],
        "{out}"
    );
    assert!(out.contains("not a bloom snapshot"), "{out}");
    let (code, json, _) = run(bloom().args(["verify", "--json"]).arg(&text));
    assert_eq!(code, 1);
    assert!(json.contains("\"status\":\"not-a-snapshot\""), "{json}");
}

fn stage_rates(snapshot: &Path) -> Vec<f64> {
    let dump = bloom_format::Snapshot::decode(
        std::fs::read(snapshot).unwrap(),
        &bloom_format::DecodeOptions::default(),
    )
    .unwrap();
    dump.header()
        .scalable
        .as_ref()
        .unwrap()
        .stages
        .iter()
        .map(|s| s.plan.false_positive_rate)
        .collect()
}

#[test]
fn header_rates_are_exact_and_estimates_have_six_digits() {
    let chain = fixtures("v3").join("scalable-xxh3.bloom");
    let out = stdout(bloom().args(["inspect", "--json"]).arg(&chain));
    let value: serde_json::Value = serde_json::from_str(&out).unwrap();
    let stages = value["scalable"]["stages"].as_array().unwrap();
    let exact = stage_rates(&chain);
    assert_eq!(stages.len(), exact.len());
    for (stage, rate) in stages.iter().zip(exact) {
        assert_eq!(
            stage["target_false_positive_rate"]
                .as_f64()
                .unwrap()
                .to_bits(),
            rate.to_bits(),
            "{stage}"
        );
    }
    // Parquet's estimates, text and JSON alike: six significant digits, the same digits.
    let parquet = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../bloom-parquet/tests/data/arrow-rs-types.parquet");
    let text = stdout(
        bloom()
            .args(["parquet", "inspect", "--column", "name"])
            .arg(&parquet),
    );
    let json = stdout(
        bloom()
            .args(["parquet", "inspect", "--json", "--column", "name"])
            .arg(&parquet),
    );
    assert_eq!(text.lines().count(), json.lines().count());
    for (line, object) in text.lines().zip(json.lines()) {
        let rate = line.rsplit("false-positive rate ").next().unwrap();
        let mantissa = rate.split('e').next().unwrap();
        let digits: String = mantissa
            .chars()
            .filter(char::is_ascii_digit)
            .collect::<String>()
            .trim_start_matches('0')
            .to_owned();
        assert!(digits.len() <= 6, "{line}");
        assert!(
            !rate.contains("e-3"),
            "a rate of 1e-3 has no exponent: {line}"
        );
        let object: serde_json::Value = serde_json::from_str(object).unwrap();
        assert_eq!(object["estimated_false_positive_rate"].to_string(), rate);
    }
}

#[test]
fn exit_status_is_the_verdict_on_every_key_even_when_the_reader_leaves_early() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = dir.path().join("seen.bloom");
    common::build(&snapshot, &["present-key"]);
    // Many present keys first (more answers than a pipe holds), one absent key last.
    let keys = dir.path().join("keys.txt");
    let mut text = "present-key\n".repeat(200_000);
    text.push_str("surely-absent-key-0123456789\n");
    std::fs::write(&keys, text).unwrap();
    let mut child = common::bloom_process()
        .arg("check")
        .arg(&snapshot)
        .arg("--keys")
        .arg(&keys)
        .arg("--exit-status")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The reader goes away at once (`… | head -0`).
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
