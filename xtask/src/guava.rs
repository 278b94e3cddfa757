//! `cargo xtask guava-fixtures`: golden files written and answered by real Guava.
//!
//! Compiles and runs `xtask/guava/GuavaFixtures.java` against Debian's `libguava-java` (Java
//! and Guava are installed with apt where missing; CI never needs them):
//!
//! 1. Guava writes streams for several (n, p), both strategies, and the UTF-8, chars and long
//!    funnels, with its own `mightContain` answers for inserted and never-inserted keys.
//! 2. bloom builds filters with the Guava rules from its own key lists and exports them;
//!    Guava reads each with `BloomFilter.readFrom` and answers probes (the `rust-*` files).
//! 3. `fixtures/guava/MANIFEST` records the SHA-256 of every file, of the Java program, and
//!    the Java and Guava versions.
//!
//! `cargo xtask fixtures --check` then proves, without Java, that the files are the ones the
//! manifest names, that the Java program has not changed since, and that this build still
//! writes the `rust-*` streams Guava answered for, byte for byte.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use bloom_core::{BloomFilter, Filter, FilterConfig, FilterParams, KeyEncoding, PositionRule};

use crate::workspace::{sha256_hex, workspace_root};

/// Where the fixtures live, relative to the workspace root.
pub(crate) const DIR: &str = "fixtures/guava";
/// The Java program, relative to the workspace root.
const SOURCE: &str = "xtask/guava/GuavaFixtures.java";
/// The default location of Debian's Guava jar (`GUAVA_JAR` overrides it).
const DEFAULT_JAR: &str = "/usr/share/java/guava.jar";

/// A filter bloom builds for Guava to read back.
struct RustCase {
    name: &'static str,
    rule: PositionRule,
    funnel: &'static str,
    items: u64,
    fpr: f64,
}

const RUST_CASES: &[RustCase] = &[
    RustCase {
        name: "rust-mitz64-utf8-2000",
        rule: PositionRule::GuavaMitz64,
        funnel: "utf8",
        items: 2000,
        fpr: 0.01,
    },
    RustCase {
        name: "rust-mitz64-chars-1000",
        rule: PositionRule::GuavaMitz64,
        funnel: "chars",
        items: 1000,
        fpr: 0.001,
    },
    RustCase {
        name: "rust-mitz64-long-1500",
        rule: PositionRule::GuavaMitz64,
        funnel: "long",
        items: 1500,
        fpr: 0.01,
    },
    RustCase {
        name: "rust-mitz32-utf8-1000",
        rule: PositionRule::GuavaMitz32,
        funnel: "utf8",
        items: 1000,
        fpr: 0.02,
    },
];

/// The key encoding that produces the bytes a funnel hashes.
pub(crate) fn encoding_of(funnel: &str) -> KeyEncoding {
    match funnel {
        "chars" => KeyEncoding::Utf16Le,
        "long" => KeyEncoding::Bytes,
        _ => KeyEncoding::Utf8,
    }
}

/// The bytes to insert for one line of a key file: the text, or for the long funnel the
/// number's 8 little-endian bytes (what `Funnels.longFunnel()` hashes).
fn key_bytes(funnel: &str, line: &str) -> Result<Vec<u8>, String> {
    if funnel == "long" {
        let n: i64 = line
            .parse()
            .map_err(|e| format!("bad long key {line:?}: {e}"))?;
        Ok(n.to_le_bytes().to_vec())
    } else {
        Ok(line.as_bytes().to_vec())
    }
}

/// bloom's Guava-sized filter of `keys`, as a Guava stream.
fn build_stream(case: &RustCase, keys: &str) -> Result<Vec<u8>, String> {
    let params = FilterParams::for_guava(case.items, case.fpr).map_err(|e| e.to_string())?;
    let config = FilterConfig::new(params)
        .with_encoding(encoding_of(case.funnel))
        .with_rule(case.rule)
        .map_err(|e| e.to_string())?;
    let mut filter = BloomFilter::new(config).map_err(|e| e.to_string())?;
    for line in keys.lines() {
        filter
            .insert(&key_bytes(case.funnel, line)?)
            .map_err(|e| e.to_string())?;
    }
    let snapshot = filter.to_snapshot(0);
    let mut stream = Vec::new();
    bloom_format::export_guava(&snapshot, &mut stream).map_err(|e| e.to_string())?;
    Ok(stream)
}

/// The keys bloom inserts for a round-trip case, and the probes Guava answers.
fn rust_keys(case: &RustCase) -> (String, String) {
    let key = |prefix: &str, i: u64| -> String {
        if case.funnel == "long" {
            let x = (i as i64 + 3).wrapping_mul(-0x61C8_8646_80B5_83EB);
            return if i.is_multiple_of(2) {
                x
            } else {
                -(i as i64) - 11
            }
            .to_string();
        }
        match i % 4 {
            0 => format!("{prefix}-запись-{i}"),
            1 => format!("{prefix}-记录-{i}"),
            2 => format!("{prefix}-\u{1F5DD}-{i}"),
            _ => format!("{prefix}-row-{i}"),
        }
    };
    let keys: String = (0..case.items).map(|i| key("rust", i) + "\n").collect();
    let probes: String = (0..case.items.min(500))
        .map(|i| key("rust", i) + "\n")
        .chain((0..1500).map(|i| key("other", i + 1_000_000) + "\n"))
        .collect();
    (keys, probes)
}

fn tool(name: &str) -> bool {
    Command::new(name)
        .arg("-version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn run_checked(command: &mut Command) -> Result<String, String> {
    let out = command
        .output()
        .map_err(|e| format!("cannot run {command:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{command:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr))
}

/// Java and Guava, installed with apt when missing.
fn ensure_java(jar: &Path) -> Result<(), String> {
    if tool("javac") && tool("java") && jar.is_file() {
        return Ok(());
    }
    eprintln!("installing default-jdk-headless and libguava-java with apt-get");
    run_checked(Command::new("apt-get").args([
        "install",
        "-y",
        "default-jdk-headless",
        "libguava-java",
    ]))?;
    if tool("javac") && jar.is_file() {
        Ok(())
    } else {
        Err(format!(
            "javac or {} is still missing after apt-get",
            jar.display()
        ))
    }
}

/// Regenerates `fixtures/guava/`.
pub(crate) fn generate() -> ExitCode {
    match try_generate() {
        Ok(count) => {
            println!("wrote {count} files in {DIR}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn try_generate() -> Result<usize, String> {
    let root = workspace_root();
    let jar =
        std::env::var_os("GUAVA_JAR").map_or_else(|| PathBuf::from(DEFAULT_JAR), PathBuf::from);
    ensure_java(&jar)?;
    let dir = root.join(DIR);
    let classes = tempdir()?;
    run_checked(
        Command::new("javac")
            .args(["-encoding", "UTF-8", "-d"])
            .arg(&classes)
            .arg("-cp")
            .arg(&jar)
            .arg(root.join(SOURCE)),
    )?;
    let classpath = format!("{}:{}", jar.display(), classes.display());
    if dir.exists() {
        fs::remove_dir_all(&dir).map_err(|e| format!("cannot clear {DIR}: {e}"))?;
    }
    fs::create_dir_all(&dir).map_err(|e| format!("cannot create {DIR}: {e}"))?;
    run_checked(
        Command::new("java")
            .args(["-cp", &classpath, "GuavaFixtures", "generate"])
            .arg(&dir),
    )?;
    for case in RUST_CASES {
        let (keys, probes) = rust_keys(case);
        let stream = build_stream(case, &keys)?;
        let write = |ext: &str, bytes: &[u8]| {
            fs::write(dir.join(format!("{}.{ext}", case.name)), bytes)
                .map_err(|e| format!("cannot write {}.{ext}: {e}", case.name))
        };
        write("guava", &stream)?;
        write("keys", keys.as_bytes())?;
        let questions = classes.join("questions");
        fs::write(&questions, probes).map_err(|e| e.to_string())?;
        run_checked(
            Command::new("java")
                .args(["-cp", &classpath, "GuavaFixtures", "answer"])
                .arg(dir.join(format!("{}.guava", case.name)))
                .arg(case.funnel)
                .arg(&questions)
                .arg(dir.join(format!("{}.probes", case.name))),
        )?;
        let mut index = fs::read_to_string(dir.join("INDEX")).map_err(|e| e.to_string())?;
        let strategy = match case.rule {
            PositionRule::GuavaMitz32 => "MURMUR128_MITZ_32",
            _ => "MURMUR128_MITZ_64",
        };
        writeln!(
            index,
            "{}\t{strategy}\t{}\t{}\t{:?}",
            case.name, case.funnel, case.items, case.fpr
        )
        .map_err(|e| e.to_string())?;
        fs::write(dir.join("INDEX"), index).map_err(|e| e.to_string())?;
    }
    let java = run_checked(Command::new("java").arg("-version"))?;
    let guava = run_checked(Command::new("dpkg-query").args(["-W", "libguava-java"]))
        .unwrap_or_else(|_| format!("{}\n", jar.display()));
    let _ = fs::remove_dir_all(&classes);
    let manifest = manifest(&root, java.lines().next().unwrap_or("java"), guava.trim())?;
    fs::write(dir.join("MANIFEST"), &manifest).map_err(|e| e.to_string())?;
    Ok(manifest.lines().filter(|l| l.starts_with("file ")).count() + 1)
}

fn tempdir() -> Result<PathBuf, String> {
    let dir = std::env::temp_dir().join(format!("bloom-guava-{}", std::process::id()));
    fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    Ok(dir)
}

/// The manifest of `fixtures/guava/` as it is on disk now.
fn manifest(root: &Path, java: &str, guava: &str) -> Result<String, String> {
    let source = fs::read(root.join(SOURCE)).map_err(|e| format!("cannot read {SOURCE}: {e}"))?;
    let mut out = format!(
        "# Written by `cargo xtask guava-fixtures`; checked by `cargo xtask fixtures --check`.\n\
         # java: {java}\n# guava: {guava}\nsource {} {SOURCE}\n",
        sha256_hex(&source)
    );
    for name in listing(&root.join(DIR))? {
        if name == "MANIFEST" {
            continue;
        }
        let bytes = fs::read(root.join(DIR).join(&name)).map_err(|e| e.to_string())?;
        writeln!(out, "file {} {name}", sha256_hex(&bytes)).map_err(|e| e.to_string())?;
    }
    Ok(out)
}

fn listing(dir: &Path) -> Result<Vec<String>, String> {
    // A name that is not UTF-8 is listed lossily, so that it shows up as unexpected.
    let mut names: Vec<String> = fs::read_dir(dir)
        .map_err(|e| format!("cannot list {}: {e}", dir.display()))?
        .filter_map(|e| Some(e.ok()?.file_name().to_string_lossy().into_owned()))
        .collect();
    names.sort();
    Ok(names)
}

/// The problems with `fixtures/guava/`, checked without Java.
pub(crate) fn check(root: &Path) -> Vec<String> {
    let mut problems = Vec::new();
    let regenerate = "run `cargo xtask guava-fixtures` and commit the result";
    let dir = root.join(DIR);
    let Ok(manifest) = fs::read_to_string(dir.join("MANIFEST")) else {
        return vec![format!("{DIR}/MANIFEST is missing: {regenerate}")];
    };
    let mut listed = vec!["MANIFEST".to_owned()];
    let mut source_checked = false;
    for line in manifest.lines().filter(|l| !l.starts_with('#')) {
        let mut fields = line.split(' ');
        let (Some(kind), Some(digest), Some(name), None) =
            (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            problems.push(format!("{DIR}/MANIFEST has a malformed line {line:?}"));
            continue;
        };
        let path = match kind {
            "source" if name == SOURCE => {
                source_checked = true;
                root.join(name)
            }
            "file" if !name.contains('/') => {
                listed.push(name.to_owned());
                dir.join(name)
            }
            _ => {
                problems.push(format!("{DIR}/MANIFEST has a malformed line {line:?}"));
                continue;
            }
        };
        match fs::read(&path) {
            Ok(bytes) if sha256_hex(&bytes) == digest => {}
            Ok(_) if kind == "source" => problems.push(format!(
                "{SOURCE} changed since the Guava fixtures were written: {regenerate}"
            )),
            Ok(_) => problems.push(format!("{DIR}/{name} changed: {regenerate}")),
            Err(e) => problems.push(format!("{} is missing ({e}): {regenerate}", path.display())),
        }
    }
    if !source_checked {
        problems.push(format!(
            "{DIR}/MANIFEST does not record the digest of {SOURCE}: {regenerate}"
        ));
    }
    // Every case the index names has its three files, all in the manifest.
    let index = fs::read_to_string(dir.join("INDEX")).unwrap_or_default();
    let cases: Vec<&str> = index.lines().filter_map(|l| l.split('\t').next()).collect();
    if cases.is_empty() {
        problems.push(format!("{DIR}/INDEX names no case: {regenerate}"));
    }
    for case in cases
        .iter()
        .copied()
        .chain(RUST_CASES.iter().map(|c| c.name))
    {
        for ext in ["guava", "keys", "probes"] {
            let name = format!("{case}.{ext}");
            if !listed.contains(&name) {
                problems.push(format!(
                    "{DIR}/{name} is missing from the manifest: {regenerate}"
                ));
            }
        }
    }
    match listing(&dir) {
        Ok(names) => {
            for name in names.iter().filter(|n| !listed.contains(n)) {
                problems.push(format!("{DIR}/{name} is not in the manifest: {regenerate}"));
            }
        }
        Err(e) => problems.push(e),
    }
    for case in RUST_CASES {
        let (keys, _) = rust_keys(case);
        let committed = fs::read(dir.join(format!("{}.guava", case.name))).unwrap_or_default();
        match build_stream(case, &keys) {
            Ok(stream) if stream == committed => {}
            Ok(_) => problems.push(format!(
                "this build no longer writes {DIR}/{}.guava, the stream Guava answered for: \
                 a change in the Guava rules or sizing, or {regenerate}",
                case.name
            )),
            Err(e) => problems.push(format!("cannot build {}: {e}", case.name)),
        }
    }
    problems
}
