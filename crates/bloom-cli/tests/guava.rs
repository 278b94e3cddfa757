//! `bloom import --from guava`, `export --to guava` and `build --rule guava-*` against the
//! streams and answers of real Guava (`fixtures/guava/`), and hostile streams.

// Guava's stream is big-endian.
#![allow(clippy::big_endian_bytes)]

mod common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::{bloom, run, stdout};

fn guava(name: &str) -> PathBuf {
    common::fixtures("guava").join(name)
}

/// Guava's answers for a fixture: (key, maybe).
fn guava_answers(name: &str) -> Vec<(String, bool)> {
    std::fs::read_to_string(guava(&format!("{name}.probes")))
        .unwrap()
        .lines()
        .map(|l| {
            let (answer, key) = l.split_once('\t').unwrap();
            (key.to_owned(), answer == "1")
        })
        .collect()
}

#[test]
fn imported_streams_answer_as_guava_and_export_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    for (name, funnel) in [
        ("mitz64-utf8-5000", "utf8"),
        ("mitz64-chars-1000", "chars"),
        ("mitz32-utf8-1000", "utf8"),
        ("mitz32-chars-800", "chars"),
        ("rust-mitz64-utf8-2000", "utf8"),
    ] {
        let snapshot = dir.path().join(format!("{name}.bloom"));
        bloom()
            .args(["import", "--from", "guava", "--funnel", funnel])
            .arg(guava(&format!("{name}.guava")))
            .arg("-o")
            .arg(&snapshot)
            .assert()
            .success();
        let answers = guava_answers(name);
        let probes = dir.path().join("probes.txt");
        let keys: String = answers.iter().map(|(k, _)| format!("{k}\n")).collect();
        std::fs::write(&probes, keys).unwrap();
        let ours = stdout(
            bloom()
                .arg("check")
                .arg(&snapshot)
                .arg("--keys")
                .arg(&probes),
        );
        let ours: Vec<bool> = ours.lines().map(|l| l.starts_with("maybe\t")).collect();
        let theirs: Vec<bool> = answers.iter().map(|&(_, a)| a).collect();
        assert_eq!(ours, theirs, "{name}");
        assert!(theirs.contains(&true) && theirs.contains(&false));

        let back = dir.path().join(format!("{name}.guava"));
        bloom()
            .args(["export", "--to", "guava"])
            .arg(&snapshot)
            .arg("-o")
            .arg(&back)
            .assert()
            .success();
        assert!(
            std::fs::read(&back).unwrap()
                == std::fs::read(guava(&format!("{name}.guava"))).unwrap(),
            "{name}: export differs"
        );
        let text = stdout(bloom().arg("inspect").arg(&snapshot));
        assert!(text.contains("guava: strategy MURMUR128_MITZ_"), "{text}");
        let json: serde_json::Value =
            serde_json::from_str(&stdout(bloom().arg("inspect").arg(&snapshot).arg("--json")))
                .unwrap();
        let expected_funnel = if funnel == "utf8" {
            "Funnels.stringFunnel(UTF_8)"
        } else {
            "Funnels.unencodedCharsFunnel()"
        };
        assert_eq!(json["guava"]["funnel"], expected_funnel);
    }
}

#[test]
fn a_long_funnel_stream_answers_through_hex_keys() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = dir.path().join("long.bloom");
    bloom()
        .args(["import", "--from", "guava", "--funnel", "bytes"])
        .arg(guava("mitz64-long-2000.guava"))
        .arg("-o")
        .arg(&snapshot)
        .assert()
        .success();
    let answers = guava_answers("mitz64-long-2000");
    // Funnels.longFunnel() hashes the number's 8 little-endian bytes.
    let lines: String = answers
        .iter()
        .map(|(k, _)| {
            let hex: String = k
                .parse::<i64>()
                .unwrap()
                .to_le_bytes()
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            format!("{{\"key_hex\": \"{hex}\"}}\n")
        })
        .collect();
    let probes = dir.path().join("probes.jsonl");
    std::fs::write(&probes, lines).unwrap();
    let ours = stdout(
        bloom()
            .arg("check")
            .arg(&snapshot)
            .args(["--jsonl", "--keys"])
            .arg(&probes),
    );
    let ours: Vec<bool> = ours.lines().map(|l| l.starts_with("maybe\t")).collect();
    let theirs: Vec<bool> = answers.iter().map(|&(_, a)| a).collect();
    assert_eq!(ours, theirs);
}

#[test]
fn a_guava_sized_build_is_guavas_own_stream() {
    let dir = tempfile::tempdir().unwrap();
    for (name, rule, encoding, items, fpr) in [
        ("mitz64-utf8-1000", "guava-mitz64", "utf8", "1000", "0.01"),
        (
            "mitz64-chars-1000",
            "guava-mitz64",
            "utf16le",
            "1000",
            "0.01",
        ),
        ("mitz32-chars-800", "guava-mitz32", "utf16le", "800", "0.03"),
        (
            "mitz64-utf8-100-high-k",
            "guava-mitz64",
            "utf8",
            "100",
            "1e-6",
        ),
    ] {
        let snapshot = dir.path().join("built.bloom");
        let (code, _, err) = run(bloom()
            .args(["build", "--rule", rule, "--encoding", encoding])
            .args(["--items", items, "--fpr", fpr, "--keys"])
            .arg(guava(&format!("{name}.keys")))
            .arg("-o")
            .arg(&snapshot));
        assert_eq!(code, 0, "{name}: {err}");
        let stream = dir.path().join("built.guava");
        let _ = std::fs::remove_file(&stream);
        bloom()
            .args(["export", "--to", "guava"])
            .arg(&snapshot)
            .arg("-o")
            .arg(&stream)
            .assert()
            .success();
        assert!(
            std::fs::read(&stream).unwrap()
                == std::fs::read(guava(&format!("{name}.guava"))).unwrap(),
            "{name}: the build differs from Guava's stream"
        );
    }
    // Without --encoding, a Guava rule hashes UTF-8 (Guava's string funnel); NFC has no
    // funnel and is refused.
    let (code, _, err) = run(bloom()
        .args(["build", "--rule", "guava-mitz64", "--encoding", "nfc"])
        .args(["--items", "10", "--fpr", "0.01", "-o"])
        .arg(dir.path().join("nfc.bloom")));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("funnel"), "{err}");
    let (code, _, err) = run(bloom()
        .args([
            "build",
            "--rule",
            "guava-mitz64",
            "--bits",
            "1000",
            "--hashes",
            "3",
            "-o",
        ])
        .arg(dir.path().join("odd.bloom")));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("multiple of 64"), "{err}");
    let (code, _, err) = run(bloom()
        .args([
            "build",
            "--rule",
            "guava-mitz64",
            "--salt",
            "00ff",
            "--bits",
            "1024",
        ])
        .args(["--hashes", "3", "-o"])
        .arg(dir.path().join("salted.bloom")));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("no salt"), "{err}");
}

fn stream(ordinal: u8, k: u8, words: i32, body: &[u8]) -> Vec<u8> {
    let mut s = vec![ordinal, k];
    s.extend_from_slice(&words.to_be_bytes());
    s.extend_from_slice(body);
    s
}

#[test]
fn hostile_streams_get_typed_errors_quickly_and_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.bloom");
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "huge count",
            stream(1, 7, i32::MAX, &[0; 4]),
            "over the limit",
        ),
        ("negative count", stream(1, 7, -1, &[]), "-1 words"),
        ("zero count", stream(1, 7, 0, &[]), "0 words"),
        (
            "unknown strategy",
            stream(7, 7, 1, &[0; 8]),
            "unknown Guava strategy",
        ),
        ("k = 0", stream(1, 0, 1, &[0; 8]), "0 positions"),
        ("k = 255", stream(1, 255, 1, &[0; 8]), "255"),
        (
            "trailing",
            stream(1, 3, 1, &[0; 9]),
            "followed by more bytes",
        ),
        ("truncated", stream(1, 3, 4, &[0; 12]), "truncated"),
        ("empty", Vec::new(), "truncated"),
    ];
    for (what, bytes, message) in cases {
        let input = dir.path().join("in.guava");
        std::fs::write(&input, &bytes).unwrap();
        let started = Instant::now();
        let (code, _, err) = run(bloom()
            .args(["import", "--from", "guava", "--funnel", "utf8"])
            .arg(&input)
            .arg("-o")
            .arg(&out));
        assert_eq!(code, 1, "{what}: {err}");
        assert!(err.contains(message), "{what}: {err}");
        assert!(started.elapsed() < Duration::from_secs(60), "{what}");
        assert!(!out.exists(), "{what}");
    }
    // 2^31 - 1 words under a raised limit: still only what the input holds is read.
    std::fs::write(dir.path().join("in.guava"), stream(1, 7, i32::MAX, &[0; 4])).unwrap();
    let (code, _, err) = run(bloom()
        .args([
            "import",
            "--from",
            "guava",
            "--funnel",
            "utf8",
            "--max-bytes",
            "16G",
        ])
        .arg(dir.path().join("in.guava"))
        .arg("-o")
        .arg(&out));
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("truncated"), "{err}");
    #[cfg(unix)]
    {
        // A long input of zeros: k = 0 after six bytes.
        let (code, _, err) = run(bloom()
            .args(["import", "--from", "guava", "--funnel", "utf8", "-", "-o"])
            .arg(&out)
            .write_stdin(vec![0u8; 4 << 20]));
        assert_eq!(code, 1, "{err}");
        // A device is not read at all.
        let (code, _, err) = run(bloom()
            .args([
                "import",
                "--from",
                "guava",
                "--funnel",
                "utf8",
                "/dev/zero",
                "-o",
            ])
            .arg(&out));
        assert_eq!(code, 3, "{err}");
    }
    let (code, _, err) = run(bloom()
        .args(["import", "--from", "seed-raw", "--funnel", "utf8"])
        .arg(guava("mitz64-utf8-1000.guava"))
        .arg("-o")
        .arg(&out));
    assert_eq!(code, 2, "{err}");
}

#[test]
fn exports_refuse_what_guava_cannot_read_and_never_clobber() {
    let dir = tempfile::tempdir().unwrap();
    let xxh3 = dir.path().join("xxh3.bloom");
    common::build(&xxh3, &["a", "b"]);
    let target = dir.path().join("out.guava");
    let (code, _, err) = run(bloom()
        .args(["export", "--to", "guava"])
        .arg(&xxh3)
        .arg("-o")
        .arg(&target));
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("guava-mitz64"), "{err}");
    assert!(!target.exists());

    let snapshot = dir.path().join("g.bloom");
    bloom()
        .args(["import", "--from", "guava", "--funnel", "utf8"])
        .arg(guava("mitz64-utf8-1000.guava"))
        .arg("-o")
        .arg(&snapshot)
        .assert()
        .success();
    // A document at the target is not replaced; an earlier Guava stream (of another size)
    // is; standard output works.
    let notes = dir.path().join("notes.txt");
    std::fs::write(&notes, "precious").unwrap();
    let (code, _, err) = run(bloom()
        .args(["export", "--to", "guava"])
        .arg(&snapshot)
        .arg("-o")
        .arg(&notes));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("refusing to replace"), "{err}");
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "precious");
    std::fs::copy(guava("mitz64-utf8-5000.guava"), &target).unwrap();
    bloom()
        .args(["export", "--to", "guava"])
        .arg(&snapshot)
        .arg("-o")
        .arg(&target)
        .assert()
        .success();
    let expected = std::fs::read(guava("mitz64-utf8-1000.guava")).unwrap();
    assert!(std::fs::read(&target).unwrap() == expected);
    let piped = bloom()
        .args(["export", "--to", "guava"])
        .arg(&snapshot)
        .args(["-o", "-"])
        .output()
        .unwrap();
    assert!(piped.status.success());
    assert!(piped.stdout == expected);
}

#[test]
fn guava_usage_mistakes_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.bloom");
    // No funnel: a wrong guess would answer "absent" for keys that are there.
    let (code, _, err) = run(bloom()
        .args(["import", "--from", "guava"])
        .arg(guava("mitz64-chars-1000.guava"))
        .arg("-o")
        .arg(&out));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--funnel"), "{err}");
    assert!(!out.exists());
    // Guava's rules take the standard layout only.
    let (code, _, err) = run(bloom()
        .args(["build", "--rule", "guava-mitz64", "--layout", "blocked-512"])
        .args(["--items", "10", "--fpr", "0.01", "-o"])
        .arg(&out));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("standard layout"), "{err}");
}
