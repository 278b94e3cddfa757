//! The golden fixtures: deterministic snapshots, their key lists and header dumps.
//!
//! Only this module writes `fixtures/`, and only the current format version's directory. The
//! directories of earlier versions are frozen forever: this module never writes them, and
//! `--check` proves them byte for byte against the digests in [`FROZEN`], so an accidental
//! edit fails CI. The golden tests read every version's directory.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use bloom_core::{
    BloomFilter, CountingBloomFilter, Filter, FilterConfig, FilterParams, KeyEncoding, Layout,
    PositionRule, Salt, ScalableBloomFilter,
};
use bloom_format::{DatasetGeneration, FormatVersion, HistoryDigest, StoreBinding, StoreIdentity};

use crate::frozen::{V1_FILES, V2_FILES};
use crate::workspace::{sha256_hex, workspace_root};

/// The directory this build generates: the current format version's.
const DIR: &str = "fixtures/v3";

/// The frozen directories of released format versions, with the SHA-256 of every file.
const FROZEN: &[(&str, &[(&str, &str)])] = &[("fixtures/v1", V1_FILES), ("fixtures/v2", V2_FILES)];

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
    store: Option<StoreBinding>,
    /// Inserted, in order (a key listed twice is inserted twice); all must be found.
    keys: Vec<String>,
    /// `Some` for a counting filter: keys inserted after `keys`, then removed again, in
    /// order (written to `NAME.removed`).
    removed: Option<Vec<String>>,
}

fn params(bits: u64, hashes: u32) -> FilterParams {
    FilterParams::new(bits, hashes).expect("fixture parameters are valid")
}

/// A standard-layout `sha256-double` configuration: the rule every fixture of format
/// version 1 used, named explicitly so that a change of default never changes a fixture.
fn sha256(bits: u64, hashes: u32) -> FilterConfig {
    FilterConfig::new(params(bits, hashes))
        .with_rule(PositionRule::Sha256Double)
        .expect("sha256-double takes any k")
}

fn with(layout: Layout, rule: PositionRule, bits: u64, hashes: u32) -> FilterConfig {
    FilterConfig::new(FilterParams::with_layout(layout, bits, hashes).expect("valid"))
        .with_rule(rule)
        .expect("the rule works with the layout")
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
    // Keys a counting fixture inserts after its own and then removes.
    let removed = |range: std::ops::Range<usize>| {
        Some(range.map(|i| format!("removed-{i}")).collect::<Vec<_>>())
    };
    let mut seed_keys = records(80);
    seed_keys.push(String::new());
    // The same two filters in each sharded layout: layout 3 (`sharded`) and layout 5.
    let sharded = |names: [&'static str; 2], layout: fn(u32) -> Result<Layout, _>| {
        [
            Fixture {
                name: names[0],
                config: with(
                    layout(8).expect("8 shards"),
                    PositionRule::Xxh3_128,
                    8192,
                    7,
                )
                .with_encoding(KeyEncoding::Nfc),
                generation: 120,
                store: None,
                removed: None,
                keys: records(120),
            },
            Fixture {
                name: names[1],
                config: with(
                    layout(3).expect("3 shards"),
                    PositionRule::Sha256Double,
                    3072,
                    5,
                )
                .with_encoding(KeyEncoding::Utf8)
                .with_salt(Salt::new(b"golden-fixture-salt-shards").expect("short salt"))
                .expect("salted sha256"),
                generation: 64,
                store: None,
                removed: None,
                keys: unicode_keys(),
            },
        ]
    };
    let mut all = vec![
        Fixture {
            name: "seed-contract",
            config: FilterConfig::seed_teaching(),
            generation: 0,
            store: None,
            removed: None,
            keys: seed_keys,
        },
        Fixture {
            name: "unicode-nfc",
            config: sha256(2048, 7).with_encoding(KeyEncoding::Nfc),
            generation: 14,
            store: None,
            removed: None,
            keys: unicode_keys(),
        },
        Fixture {
            name: "unicode-utf8",
            config: sha256(2048, 7).with_encoding(KeyEncoding::Utf8),
            generation: 14,
            store: None,
            removed: None,
            keys: unicode_keys(),
        },
        Fixture {
            name: "salted-trim-lower",
            config: sha256(1000, 5)
                .with_encoding(KeyEncoding::NfcTrimLowercase)
                .with_salt(Salt::new(b"golden-fixture-salt-v1").expect("short salt"))
                .expect("salted sha256"),
            generation: 3,
            store: None,
            removed: None,
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
            config: sha256(65_537, 48).with_encoding(KeyEncoding::Bytes),
            generation: 1_000_000,
            store: None,
            removed: None,
            keys: records(200),
        },
        Fixture {
            name: "nearly-saturated",
            config: FilterConfig::new(params(256, 4))
                .with_rule(PositionRule::Sha256Split4)
                .expect("k = 4 fits split4")
                .with_encoding(KeyEncoding::Utf8),
            generation: u64::MAX,
            store: None,
            removed: None,
            keys: records(300),
        },
        Fixture {
            name: "store-bound",
            config: sha256(4096, 7).with_encoding(KeyEncoding::Nfc),
            generation: 120,
            store: Some(StoreBinding::new(
                StoreIdentity::from_bytes(*b"golden-store-id!"),
                HistoryDigest::from_bytes(*b"history@gen-120!"),
            )),
            removed: None,
            keys: records(120),
        },
        Fixture {
            name: "xxh3-standard",
            config: with(Layout::Standard, PositionRule::Xxh3_128, 3001, 7)
                .with_encoding(KeyEncoding::Nfc),
            generation: 200,
            store: None,
            removed: None,
            keys: records(200),
        },
        Fixture {
            name: "xxh3-blocked",
            config: with(Layout::Blocked512, PositionRule::Xxh3_128, 4096, 6)
                .with_encoding(KeyEncoding::Nfc),
            generation: 300,
            store: None,
            removed: None,
            keys: records(300),
        },
        Fixture {
            name: "xxh3-blocked-salted-large-k",
            config: with(Layout::Blocked512, PositionRule::Xxh3_128, 2048, 23)
                .with_encoding(KeyEncoding::Utf8)
                .with_salt(Salt::new(b"golden-fixture-salt-xxh3").expect("short salt"))
                .expect("salted xxh3"),
            generation: 50,
            store: None,
            removed: None,
            keys: unicode_keys(),
        },
        Fixture {
            name: "sha256-blocked",
            config: with(Layout::Blocked512, PositionRule::Sha256Double, 4096, 6)
                .with_encoding(KeyEncoding::Bytes),
            generation: 300,
            store: None,
            removed: None,
            keys: records(300),
        },
        Fixture {
            name: "sha256-blocked-salted",
            config: with(Layout::Blocked512, PositionRule::Sha256Double, 1536, 9)
                .with_encoding(KeyEncoding::NfcTrimLowercase)
                .with_salt(Salt::new(b"golden-fixture-salt-v2").expect("short salt"))
                .expect("salted sha256"),
            generation: 7,
            store: None,
            removed: None,
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
            // An odd m, so the last byte's high nibble is padding; "record-0" is counted
            // three times.
            name: "counting-xxh3",
            config: with(Layout::Standard, PositionRule::Xxh3_128, 2001, 5)
                .with_encoding(KeyEncoding::Utf8),
            generation: 250,
            store: None,
            removed: removed(152..202),
            keys: [records(150), vec!["record-0".into(), "record-0".into()]].concat(),
        },
        Fixture {
            // Too small for its keys: many counters saturate, and removals leave them at 15.
            name: "counting-sha256-salted-saturated",
            config: with(Layout::Standard, PositionRule::Sha256Double, 61, 4)
                .with_encoding(KeyEncoding::Nfc)
                .with_salt(Salt::new(b"golden-fixture-salt-counting").expect("short salt"))
                .expect("salted sha256"),
            generation: 160,
            store: None,
            removed: removed(120..160),
            keys: records(120),
        },
    ];
    // Format version 3: plans recorded, within and past them, and the split-block layouts.
    all.extend([
        Fixture {
            name: "planned-split-512",
            config: FilterConfig::planned(500, 0.01).expect("a valid plan"),
            generation: 400,
            store: None,
            removed: None,
            keys: records(400),
        },
        Fixture {
            name: "planned-over-capacity",
            config: bloom_core::BloomFilter::builder(100)
                .false_positive_rate(0.01)
                .layout(Layout::Blocked512)
                .rule(PositionRule::Sha256Double)
                .config()
                .expect("a valid plan"),
            generation: 300,
            store: None,
            removed: None,
            keys: records(300),
        },
        Fixture {
            name: "split-256-xxh64",
            config: with(Layout::SplitBlock256, PositionRule::Xxh64, 4096, 8)
                .with_encoding(KeyEncoding::Bytes),
            generation: 200,
            store: None,
            removed: None,
            keys: records(200),
        },
    ]);
    all.extend(sharded(
        ["xxh3-sharded", "sha256-sharded-salted"],
        Layout::sharded_v1,
    ));
    all.extend(sharded(
        ["xxh3-sharded-v2", "sha256-sharded-v2-salted"],
        Layout::sharded,
    ));
    all
}

/// The scalable fixtures: name, chain, keys, generation.
fn scalable_fixtures() -> Vec<(&'static str, ScalableBloomFilter, Vec<String>, u64)> {
    let records = |n: usize| (0..n).map(|i| format!("record-{i}")).collect::<Vec<_>>();
    vec![
        (
            "scalable-xxh3",
            ScalableBloomFilter::builder(100)
                .build()
                .expect("a valid chain"),
            records(1000),
            1000,
        ),
        (
            "scalable-sha256-salted",
            ScalableBloomFilter::builder(8)
                .growth(3)
                .tightening(0.8)
                .false_positive_rate(0.05)
                .rule(PositionRule::Sha256Double)
                .encoding(KeyEncoding::NfcTrimLowercase)
                .salt(Salt::new(b"golden-fixture-salt-scalable").expect("short salt"))
                .build()
                .expect("a valid chain"),
            unicode_keys(),
            17,
        ),
    ]
}

/// Every file this build generates, by path relative to the workspace root.
fn generate() -> BTreeMap<PathBuf, Vec<u8>> {
    let mut files = BTreeMap::new();
    let json_lines = |keys: &[String]| -> Vec<u8> {
        keys.iter()
            .map(|k| serde_json::to_string(k).expect("strings serialize") + "\n")
            .collect::<String>()
            .into_bytes()
    };
    for (name, mut chain, keys, generation) in scalable_fixtures() {
        chain.insert_all(&keys);
        let snapshot = chain.to_snapshot(generation);
        assert_eq!(snapshot.format_version(), FormatVersion::CURRENT);
        let dir = Path::new(DIR);
        files.insert(
            dir.join(format!("{name}.bloom")),
            snapshot.encode().to_vec(),
        );
        files.insert(dir.join(format!("{name}.keys")), json_lines(&keys));
        files.insert(
            dir.join(format!("{name}.header.txt")),
            snapshot.dump_header().into_bytes(),
        );
    }
    for fixture in fixtures() {
        let generation = DatasetGeneration::new(fixture.generation);
        let (mut header, payload) = match &fixture.removed {
            None => {
                let mut filter =
                    BloomFilter::new(fixture.config).expect("small fixture filters allocate");
                filter.insert_all(&fixture.keys);
                (filter.header(generation), filter.to_bytes())
            }
            Some(removed) => {
                let mut filter = CountingBloomFilter::new(fixture.config)
                    .expect("small counting fixtures allocate");
                filter.insert_all(fixture.keys.iter().chain(removed));
                for key in removed {
                    filter.remove(key).expect("an inserted key is removable");
                }
                let snapshot = filter.to_snapshot(generation);
                (snapshot.header().clone(), snapshot.payload().to_vec())
            }
        };
        header.store = fixture.store;
        let snapshot = bloom_format::Snapshot::new(header, payload)
            .expect("a filter's own header and bits are a valid snapshot");
        assert_eq!(snapshot.format_version(), FormatVersion::CURRENT);
        let keys: String = fixture
            .keys
            .iter()
            .map(|k| serde_json::to_string(k).expect("strings serialize") + "\n")
            .collect();
        let dir = Path::new(DIR);
        if let Some(removed) = &fixture.removed {
            let removed: String = removed
                .iter()
                .map(|k| serde_json::to_string(k).expect("strings serialize") + "\n")
                .collect();
            files.insert(
                dir.join(format!("{}.removed", fixture.name)),
                removed.into_bytes(),
            );
        }
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

/// Checks every frozen directory against its digests; returns the problems found.
fn check_frozen(root: &Path) -> Vec<String> {
    let mut problems = Vec::new();
    for (dir, files) in FROZEN {
        for (name, digest) in *files {
            let path = Path::new(dir).join(name);
            match fs::read(root.join(&path)) {
                Ok(bytes) => {
                    if sha256_hex(&bytes) != *digest {
                        problems.push(format!(
                            "{} changed: released fixtures are frozen; restore it with `git checkout -- {}`",
                            path.display(),
                            path.display()
                        ));
                    }
                }
                Err(e) => problems.push(format!("{} is missing: {e}", path.display())),
            }
        }
        if let Ok(entries) = fs::read_dir(root.join(dir)) {
            for entry in entries.flatten() {
                let name = entry.file_name();
                if !files.iter().any(|(n, _)| name.to_str() == Some(n)) {
                    problems.push(format!(
                        "{dir}/{} was added to a frozen directory",
                        name.to_string_lossy()
                    ));
                }
            }
        }
    }
    problems
}

pub(crate) fn run(mode: Mode) -> ExitCode {
    let root = workspace_root();
    if FROZEN.iter().any(|(dir, _)| *dir == DIR) {
        eprintln!(
            "error: {DIR} belongs to a released format version and is frozen; refusing to write it"
        );
        return ExitCode::FAILURE;
    }
    let files = generate();
    let mut problems = check_frozen(&root);
    problems.extend(crate::guava::check(&root));
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
        println!(
            "{} fixture files in {DIR} are current; {} frozen directories are intact; {} match their manifest",
            files.len(),
            FROZEN.len(),
            crate::guava::DIR,
        );
        return ExitCode::SUCCESS;
    }
    for p in &problems {
        eprintln!("error: {p}");
    }
    eprintln!(
        "the golden fixtures are out of date: run the command named above (`cargo xtask fixtures` for fixtures/v3) and commit the result"
    );
    ExitCode::FAILURE
}
