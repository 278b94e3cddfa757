//! The golden fixtures: deterministic snapshots, their key lists and header dumps.
//!
//! Only this module writes `fixtures/`. A released format version's directory is frozen: when
//! format version 2 ships, `fixtures/v1/` stays as it is forever and this module writes
//! `fixtures/v2/` instead, while the golden tests keep reading both.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use bloom_core::{BloomFilter, FilterConfig, FilterParams, KeyEncoding, PositionRule, Salt};

/// The directory this build generates: the current format version's.
const DIR: &str = "fixtures/v1";

/// Whether to write the fixtures or only compare them.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Write,
    Check,
}

struct Fixture {
    name: &'static str,
    config: FilterConfig,
    generation: u64,
    keys: Vec<String>,
}

fn params(bits: u64, hashes: u32) -> FilterParams {
    FilterParams::new(bits, hashes).expect("fixture parameters are valid")
}

fn unicode_keys() -> Vec<String> {
    let mut keys: Vec<String> = [
        "",
        "caf\u{e9}",
        "cafe\u{301}",
        "\u{ac00}",
        "\u{1100}\u{1161}",
        "中文键",
        "數據庫記錄",
        "😀🚀",
        "\u{1F468}\u{200D}\u{1F469}\u{200D}\u{1F467}",
        "Ｆｕｌｌｗｉｄｔｈ",
        "tab\there",
        "line\nbreak",
    ]
    .map(String::from)
    .to_vec();
    keys.push("長".repeat(3334)); // 10,002 bytes of UTF-8
    keys.push("k".repeat(10_000));
    keys
}

fn fixtures() -> Vec<Fixture> {
    let records = |n: usize| (0..n).map(|i| format!("record-{i}")).collect::<Vec<_>>();
    let mut seed_keys = records(80);
    seed_keys.push(String::new());
    vec![
        Fixture {
            name: "seed-contract",
            config: FilterConfig::seed_teaching(),
            generation: 0,
            keys: seed_keys,
        },
        Fixture {
            name: "unicode-nfc",
            config: FilterConfig::new(params(2048, 7)).with_encoding(KeyEncoding::Nfc),
            generation: 14,
            keys: unicode_keys(),
        },
        Fixture {
            name: "unicode-utf8",
            config: FilterConfig::new(params(2048, 7)).with_encoding(KeyEncoding::Utf8),
            generation: 14,
            keys: unicode_keys(),
        },
        Fixture {
            name: "salted-trim-lower",
            config: FilterConfig::new(params(1000, 5))
                .with_encoding(KeyEncoding::NfcTrimLowercase)
                .with_salt(Salt::new(b"golden-fixture-salt-v1").expect("short salt")),
            generation: 3,
            keys: [
                "  Record-1",
                "RECORD-2 ",
                "Straße",
                "ÉCOLE",
                "\u{3000}中文\u{3000}",
            ]
            .map(String::from)
            .to_vec(),
        },
        Fixture {
            name: "large-k",
            config: FilterConfig::new(params(65_537, 48)).with_encoding(KeyEncoding::Bytes),
            generation: 1_000_000,
            keys: records(200),
        },
        Fixture {
            name: "nearly-saturated",
            config: FilterConfig::new(params(256, 4))
                .with_rule(PositionRule::Sha256Split4)
                .expect("k = 4 fits split4")
                .with_encoding(KeyEncoding::Utf8),
            generation: u64::MAX,
            keys: records(300),
        },
    ]
}

/// Every file this build generates, by path relative to the workspace root.
fn generate() -> BTreeMap<PathBuf, Vec<u8>> {
    let mut files = BTreeMap::new();
    for fixture in fixtures() {
        let mut filter = BloomFilter::new(fixture.config).expect("small fixture filters allocate");
        filter.insert_all(&fixture.keys);
        let snapshot = filter.to_snapshot(fixture.generation);
        let keys: String = fixture
            .keys
            .iter()
            .map(|k| serde_json::to_string(k).expect("strings serialize") + "\n")
            .collect();
        let dir = Path::new(DIR);
        files.insert(
            dir.join(format!("{}.bloom", fixture.name)),
            snapshot.encode().to_vec(),
        );
        files.insert(
            dir.join(format!("{}.keys", fixture.name)),
            keys.into_bytes(),
        );
        files.insert(
            dir.join(format!("{}.header.txt", fixture.name)),
            snapshot.dump_header().into_bytes(),
        );
    }
    files
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives inside the workspace")
        .to_path_buf()
}

pub(crate) fn run(mode: Mode) -> ExitCode {
    let root = workspace_root();
    let files = generate();
    let mut problems = Vec::new();
    for (path, contents) in &files {
        let full = root.join(path);
        let current = fs::read(&full).ok();
        if current.as_deref() == Some(contents.as_slice()) {
            continue;
        }
        match mode {
            Mode::Check => problems.push(format!(
                "{} is {}",
                path.display(),
                if current.is_some() {
                    "stale"
                } else {
                    "missing"
                }
            )),
            Mode::Write => {
                if let Err(e) = fs::create_dir_all(full.parent().unwrap_or(&root))
                    .and_then(|()| fs::write(&full, contents))
                {
                    eprintln!("cannot write {}: {e}", path.display());
                    return ExitCode::FAILURE;
                }
                println!("wrote {}", path.display());
            }
        }
    }
    let dir = root.join(DIR);
    if let Ok(entries) = fs::read_dir(&dir) {
        for entry in entries.flatten() {
            let path = Path::new(DIR).join(entry.file_name());
            if !files.contains_key(&path) {
                match mode {
                    Mode::Check => {
                        problems.push(format!("{} is not generated by xtask", path.display()));
                    }
                    Mode::Write => {
                        if let Err(e) = fs::remove_file(root.join(&path)) {
                            eprintln!("cannot remove {}: {e}", path.display());
                            return ExitCode::FAILURE;
                        }
                        println!("removed {}", path.display());
                    }
                }
            }
        }
    }
    if problems.is_empty() {
        println!("{} fixture files in {DIR} are current", files.len());
        return ExitCode::SUCCESS;
    }
    for p in &problems {
        eprintln!("error: {p}");
    }
    eprintln!(
        "the golden fixtures are out of date: run `cargo xtask fixtures` and commit the result"
    );
    ExitCode::FAILURE
}
