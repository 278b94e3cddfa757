//! `bloom parquet check`, `bloom parquet inspect` and `bloom import --from parquet` on the
//! foreign files of bloom-parquet (parquet-mr's from parquet-testing, and arrow-rs's).

mod common;

use std::path::{Path, PathBuf};

use common::{bloom, run, stdout};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../bloom-parquet/tests/data")
        .join(name)
}

const VALUES: [&str; 14] = [
    "Hello",
    "This is",
    "a",
    "test",
    "How",
    "are you",
    "doing ",
    "today",
    "the quick",
    "brown fox",
    "jumps",
    "over",
    "the lazy",
    "dog",
];

#[test]
fn check_answers_for_each_file_and_key_from_the_files_own_filters() {
    let stats = data("parquet-testing/data_index_bloom_encoding_stats.parquet");
    let length = data("parquet-testing/data_index_bloom_encoding_with_length.parquet");
    let out = stdout(
        bloom()
            .args(["parquet", "check"])
            .arg(&stats)
            .arg(&length)
            .args(["--column", "String"])
            .args(VALUES)
            .args(["doing", "Hello world"]),
    );
    let lines: Vec<Vec<&str>> = out.lines().map(|l| l.split('\t').collect()).collect();
    assert_eq!(lines.len(), 2 * (VALUES.len() + 2), "{out}");
    for (i, value) in VALUES.iter().enumerate() {
        for (j, file) in [&stats, &length].into_iter().enumerate() {
            let line = &lines[2 * i + j];
            assert_eq!(line[0], "maybe", "{value:?}");
            assert_eq!(line[1], file.display().to_string());
            assert_eq!(line[2], "0");
            assert_eq!(line[3], *value);
        }
    }
    for line in &lines[2 * VALUES.len()..] {
        assert_eq!((line[0], line[2]), ("absent", "-"), "{line:?}");
    }
    // --exit-status: 4 when a key is absent from every file; JSON names the row groups.
    let (code, json, _) = run(bloom()
        .args(["parquet", "check", "--exit-status", "--json"])
        .arg(&length)
        .args(["--column", "String", "dog", "cat"]));
    assert_eq!(code, 4);
    let answers: Vec<serde_json::Value> = json
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(answers[0]["answer"], "maybe");
    assert_eq!(answers[0]["row_groups"], serde_json::json!([0]));
    assert_eq!(answers[1]["answer"], "absent");
    assert_eq!(answers[1]["key"], "cat");
    // Keys from a file, with the files before --column.
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys");
    std::fs::write(&keys, "today\nnot there\n").unwrap();
    let out = stdout(
        bloom()
            .args(["parquet", "check"])
            .arg(&stats)
            .args(["--column", "String", "--keys"])
            .arg(&keys),
    );
    assert_eq!(
        out.lines()
            .map(|l| l.split('\t').next().unwrap())
            .collect::<Vec<_>>(),
        ["maybe", "absent"]
    );
}

#[test]
fn typed_columns_take_their_values_as_text_or_hex() {
    let file = data("arrow-rs-types.parquet");
    // Row i has small = 7i - 5000, large = i * 1000000007 - 2^40, ratio = i / 4 - 100,
    // uuid = i as 4 little-endian bytes, 11 zeros, 0xab; rows 0..700 are row group 0,
    // 700..1400 row group 1, 1400..1700 row group 2.
    let check = |column: &str, keys: &[&str], extra: &[&str]| {
        stdout(
            bloom()
                .args(["parquet", "check"])
                .arg(&file)
                .args(["--column", column])
                .args(extra)
                .args(keys),
        )
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            format!("{} {}", f[0], f[2])
        })
        .collect::<Vec<_>>()
    };
    let groups = |answers: &[String], i: usize| answers[i].split(' ').nth(1).unwrap().to_owned();
    let small = check("small", &["-5000", "2000", "5500"], &[]);
    assert!(groups(&small, 0).split(',').any(|g| g == "0"), "{small:?}");
    assert!(groups(&small, 1).split(',').any(|g| g == "1"), "{small:?}");
    assert!(groups(&small, 2).split(',').any(|g| g == "2"), "{small:?}");
    let large = check(
        "large",
        &[&(1500i64 * 1_000_000_007 - (1 << 40)).to_string()],
        &[],
    );
    assert!(groups(&large, 0).split(',').any(|g| g == "2"), "{large:?}");
    let ratio = check("ratio", &["-100", "75"], &[]);
    assert!(groups(&ratio, 0).split(',').any(|g| g == "0"), "{ratio:?}");
    assert!(groups(&ratio, 1).split(',').any(|g| g == "1"), "{ratio:?}");
    let row_1000 = "e80300000000000000000000000000ab";
    let uuid = check("uuid", &[row_1000], &["--hex"]);
    assert!(groups(&uuid, 0).split(',').any(|g| g == "1"), "{uuid:?}");
    // Values that are not of the column's type: exit 1, naming the type.
    for (column, key) in [
        ("small", "1.5"),
        ("small", "5000000000"),
        ("ratio", "x"),
        ("uuid", "abc"),
    ] {
        let (code, _, err) = run(bloom()
            .args(["parquet", "check"])
            .arg(&file)
            .args(["--column", column, key]));
        assert_eq!(code, 1, "{column} {key}: {err}");
        assert!(err.contains("column type"), "{err}");
    }
    let (code, _, err) = run(bloom()
        .args(["parquet", "check", "--hex"])
        .arg(&file)
        .args(["--column", "uuid", "00ff"]));
    assert_eq!(code, 1);
    assert!(err.contains("exactly 16 bytes"), "{err}");
    for (column, key, expected) in [
        ("uuid", "zz", "is not hex"),
        ("ratio", "1e40", "outside the range of a FLOAT"),
        ("amount", "1e400", "outside the range of a DOUBLE"),
    ] {
        let hex = if column == "uuid" { "--hex" } else { "--json" };
        let (code, _, err) = run(bloom()
            .args(["parquet", "check", hex])
            .arg(&file)
            .args(["--column", column, key]));
        assert_eq!(code, 1, "{column} {key}: {err}");
        assert!(err.contains(expected), "{err}");
    }
    // Infinity is a value when the key says so (after --, as it starts with a dash).
    let out = stdout(
        bloom()
            .args(["parquet", "check"])
            .arg(&file)
            .args(["--column", "amount", "--", "-inf", "inf"]),
    );
    assert_eq!(out.lines().count(), 2, "{out}");
}

#[test]
fn the_64_bit_rules_default_to_their_split_block() {
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys");
    std::fs::write(&keys, "k1\n").unwrap();
    for (args, layout) in [
        (
            vec!["--rule", "xxh64", "--items", "1000", "--fpr", "0.01"],
            "split-block-256",
        ),
        (
            vec!["--rule", "xxh3-64", "--items", "1000", "--fpr", "0.0001"],
            "split-block-512",
        ),
        (
            vec!["--rule", "xxh3-64", "--bits", "1024", "--hashes", "8"],
            "split-block-512",
        ),
        (vec!["--items", "1000", "--fpr", "0.01"], "split-block-512"),
    ] {
        let path = dir.path().join("f.bloom");
        let (code, _, err) = run(bloom()
            .arg("build")
            .args(&args)
            .arg("-o")
            .arg(&path)
            .arg("--keys")
            .arg(&keys));
        assert_eq!(code, 0, "{args:?}: {err}");
        let inspect = stdout(bloom().arg("inspect").arg(&path));
        assert!(
            inspect.contains(&format!("({layout})")),
            "{args:?}: {inspect}"
        );
        assert_eq!(common::answers(&path, &["k1"]), ["maybe"]);
        std::fs::remove_file(&path).unwrap();
    }
    // A split block takes k = 8 only: a clear usage error otherwise.
    let (code, _, err) = run(bloom()
        .args([
            "build", "--rule", "xxh3-64", "--bits", "1024", "--hashes", "7", "-o",
        ])
        .arg(dir.path().join("g.bloom"))
        .arg("--keys")
        .arg(&keys));
    assert_eq!(code, 2);
    assert!(err.contains("k must be 8"), "{err}");
}

#[test]
fn files_without_filters_or_with_other_strategies_get_clear_errors() {
    let types = data("arrow-rs-types.parquet");
    let refused = |args: &[&str], file: &Path| {
        let (code, out, err) = run(bloom().args(["parquet", "check"]).arg(file).args(args));
        assert!(out.is_empty(), "{out}");
        (code, err)
    };
    let (code, err) = refused(&["--column", "unfiltered", "1"], &types);
    assert_eq!(code, 1);
    assert!(
        err.contains("has no Bloom filter in any of its 3 row groups"),
        "{err}"
    );
    let (code, err) = refused(&["--column", "nope", "1"], &types);
    assert_eq!(code, 1);
    assert!(
        err.contains("no column \"nope\"") && err.contains("name, raw, small"),
        "{err}"
    );
    let encrypted =
        data("parquet-testing/encrypt_columns_and_footer_bloom_filter.parquet.encrypted");
    let (code, err) = refused(&["--column", "double_field", "1"], &encrypted);
    assert_eq!(code, 1);
    assert!(err.contains("encrypted"), "{err}");
    // A filter blob is not a Parquet file; a missing file is the environment's failure.
    let blob = data("parquet-testing/bloom_filter.xxhash.bin");
    let (code, err) = refused(&["--column", "x", "1"], &blob);
    assert_eq!(code, 1);
    assert!(err.contains("not a Parquet file"), "{err}");
    let (code, _) = refused(
        &["--column", "x", "1"],
        Path::new("/nonexistent/file.parquet"),
    );
    assert_eq!(code, 3);
    // Damaged: another hash strategy in the filter header of a copy.
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = std::fs::read(data(
        "parquet-testing/data_index_bloom_encoding_with_length.parquet",
    ))
    .unwrap();
    assert_eq!(&bytes[260..262], &[0x1c, 0x1c]);
    bytes[261] = 0x2c;
    let damaged = dir.path().join("damaged.parquet");
    std::fs::write(&damaged, &bytes).unwrap();
    let (code, err) = refused(&["--column", "String", "dog"], &damaged);
    assert_eq!(code, 1);
    assert!(err.contains("hash strategy 2"), "{err}");
    // Usage: no keys, standard input as the file, no file before --column.
    let (code, err) = refused(&["--column", "String"], &damaged);
    assert_eq!(code, 2, "{err}");
    let (code, err) = refused(&["--column", "String", "dog"], Path::new("-"));
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = run(bloom().args(["parquet", "check", "--column", "String", "dog"]));
    assert_eq!(code, 2, "{err}");
}

#[test]
fn an_imported_chunk_filter_answers_as_the_file_does() {
    let dir = tempfile::tempdir().unwrap();
    let file = data("arrow-rs-types.parquet");
    let snapshot = dir.path().join("names.bloom");
    let (code, _, err) = run(bloom()
        .args([
            "import",
            "--from",
            "parquet",
            "--column",
            "name",
            "--row-group",
            "1",
        ])
        .arg(&file)
        .arg("-o")
        .arg(&snapshot));
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("key encoding utf8"), "{err}");
    let keys: Vec<String> = (0..3000).step_by(7).map(|i| format!("name-{i}")).collect();
    let from_file = stdout(
        bloom()
            .args(["parquet", "check"])
            .arg(&file)
            .args(["--column", "name"])
            .args(&keys),
    );
    let from_snapshot = stdout(bloom().arg("check").arg(&snapshot).args(&keys));
    let mut false_positives = 0;
    for (file_line, snap_line) in from_file.lines().zip(from_snapshot.lines()) {
        let groups = file_line.split('\t').nth(2).unwrap();
        let in_group_1 = groups.split(',').any(|g| g == "1");
        let answer = snap_line.split('\t').next().unwrap();
        assert_eq!(answer == "maybe", in_group_1, "{file_line} / {snap_line}");
        let key = snap_line.split('\t').nth(1).unwrap();
        let i: u32 = key.trim_start_matches("name-").parse().unwrap();
        if in_group_1 && !(700..1400).contains(&i) {
            false_positives += 1;
        }
    }
    assert!(
        false_positives > 0,
        "the filter is full enough for false positives"
    );
    let inspect = stdout(bloom().arg("inspect").arg(&snapshot));
    assert!(inspect.contains("position rule: 6 (xxh64)"), "{inspect}");
    assert!(inspect.contains("layout: 6 (split-block-256)"), "{inspect}");
    // What cannot be imported is refused, and nothing is written.
    let missing = dir.path().join("missing.bloom");
    for args in [
        vec!["--column", "unfiltered", "--row-group", "0"],
        vec!["--column", "name", "--row-group", "3"],
        vec!["--column", "name"],
    ] {
        let (code, _, err) = run(bloom()
            .args(["import", "--from", "parquet"])
            .args(&args)
            .arg(&file)
            .arg("-o")
            .arg(&missing));
        assert!(code == 1 || code == 2, "{args:?}: {code} {err}");
        assert!(!missing.exists(), "{args:?}");
    }
    let (code, _, err) = run(bloom()
        .args([
            "import", "--from", "guava", "--funnel", "utf8", "--column", "x",
        ])
        .arg(&file)
        .arg("-o")
        .arg(&missing));
    assert_eq!(code, 2, "{err}");
}

#[test]
fn inspect_lists_every_chunk_and_its_filter() {
    let file = data("arrow-rs-types.parquet");
    let out = stdout(bloom().args(["parquet", "inspect", "--json"]).arg(&file));
    let chunks: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(chunks.len(), 8 * 3);
    let unfiltered: Vec<_> = chunks
        .iter()
        .filter(|c| c["filter_bytes"].is_null())
        .collect();
    assert_eq!(unfiltered.len(), 3);
    assert!(unfiltered.iter().all(|c| c["column"] == "unfiltered"));
    let name = chunks.iter().find(|c| c["column"] == "name").unwrap();
    assert_eq!(name["type"], "BYTE_ARRAY");
    assert_eq!(name["key_encoding"], "utf8");
    assert_eq!(name["rows"], 700);
    let text = stdout(
        bloom()
            .args(["parquet", "inspect", "--column", "small"])
            .arg(&file),
    );
    assert_eq!(text.lines().count(), 3, "{text}");
    assert!(text.contains("INT32\trow group 2\t300 rows"), "{text}");
}
