//! A snapshot records the plan it was built for: `inspect` shows it, `build` and `add` warn
//! once a filter passes it, and `--strict` refuses, leaving the file unchanged.

mod common;

use common::{bloom, run, stdout};

fn keys_file(dir: &std::path::Path, name: &str, range: std::ops::Range<u32>) -> std::path::PathBuf {
    let path = dir.join(name);
    let text: String = range.map(|i| format!("key-{i}\n")).collect();
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn an_overfilled_build_warns_and_strict_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let keys = keys_file(dir.path(), "k.txt", 0..5_000);
    let out = dir.path().join("f.bloom");
    let (code, _, err) = run(bloom()
        .args(["build", "--items", "10", "--fpr", "0.01", "--keys"])
        .arg(&keys)
        .arg("-o")
        .arg(&out));
    assert_eq!(code, 0, "{err}");
    assert_eq!(err.matches("is over its plan").count(), 1, "{err}");
    assert!(err.contains("capacity of 10"), "{err}");
    let inspect = stdout(bloom().args(["inspect", "--json"]).arg(&out));
    let json: serde_json::Value = serde_json::from_str(&inspect).unwrap();
    assert_eq!(json["planned_capacity"], 10);
    assert_eq!(json["over_capacity"], true);
    assert_eq!(json["remaining_capacity"], 0);
    assert_eq!(json["format_version"], 3);

    // --strict: refused, exit 1, nothing written.
    let strict = dir.path().join("strict.bloom");
    let (code, _, err) = run(bloom()
        .args([
            "build", "--strict", "--items", "10", "--fpr", "0.01", "--keys",
        ])
        .arg(&keys)
        .arg("-o")
        .arg(&strict));
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("--strict: nothing was written"), "{err}");
    assert!(!strict.exists());
}

#[test]
fn add_warns_when_it_passes_the_plan_and_strict_leaves_the_file_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let first = keys_file(dir.path(), "a.txt", 0..900);
    let more = keys_file(dir.path(), "b.txt", 900..3_000);
    let out = dir.path().join("f.bloom");
    let (code, _, err) = run(bloom()
        .args(["build", "--items", "1000", "--fpr", "0.01", "--keys"])
        .arg(&first)
        .arg("-o")
        .arg(&out));
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("over its plan"), "{err}");
    let inspect = stdout(bloom().arg("inspect").arg(&out));
    assert!(inspect.contains("planned capacity: 1000"), "{inspect}");
    assert!(inspect.contains("within plan"), "{inspect}");

    let before = std::fs::read(&out).unwrap();
    let (code, _, err) = run(bloom()
        .args(["add", "--strict", "--keys"])
        .arg(&more)
        .arg(&out));
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("over its plan"), "{err}");
    assert_eq!(
        std::fs::read(&out).unwrap(),
        before,
        "the file is unchanged"
    );

    let (code, _, err) = run(bloom().args(["add", "--keys"]).arg(&more).arg(&out));
    assert_eq!(code, 0, "{err}");
    assert_eq!(err.matches("is over its plan").count(), 1, "{err}");
    let inspect = stdout(bloom().arg("inspect").arg(&out));
    assert!(inspect.contains("OVER CAPACITY"), "{inspect}");
    // Every key is in, over the plan or not.
    let (code, answers, err) = run(bloom().args(["check", "--keys"]).arg(&more).arg(&out));
    assert_eq!(code, 0, "{err}");
    assert!(answers.lines().all(|l| l.starts_with("maybe")), "{answers}");
}

#[test]
fn a_filter_sized_by_bits_records_no_plan_and_never_warns() {
    let dir = tempfile::tempdir().unwrap();
    let keys = keys_file(dir.path(), "k.txt", 0..5_000);
    let out = dir.path().join("f.bloom");
    let (code, _, err) = run(bloom()
        .args([
            "build", "--strict", "--bits", "1024", "--hashes", "3", "--keys",
        ])
        .arg(&keys)
        .arg("-o")
        .arg(&out));
    assert_eq!(code, 0, "{err}");
    let json: serde_json::Value =
        serde_json::from_str(&stdout(bloom().args(["inspect", "--json"]).arg(&out))).unwrap();
    assert_eq!(json["planned_capacity"], serde_json::Value::Null);
    assert_eq!(json["over_capacity"], serde_json::Value::Null);
}
