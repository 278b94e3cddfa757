//! `cargo xtask fuzz [--time SECONDS] [TARGET...]`: builds the libFuzzer targets of `fuzz/`
//! on the stable toolchain (coverage instrumentation by `-C passes=sancov-module`, no
//! sanitizer; `fuzz/README.md` says how to add AddressSanitizer), seeds each target's corpus
//! from `fixtures/` (and a few inputs made here), and runs every target for the given time
//! (30 s by default) with the memory and time limits of the README. Any crash, leak of the
//! memory limit or hang fails the command, naming the input libFuzzer saved; the inputs in
//! `fuzz/regressions/TARGET/` (crashes found before, kept) are run first, every time.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use bloom_format::{DecodeOptions, Snapshot};

/// Every target, as `fuzz/Cargo.toml` names it.
const TARGETS: &[&str] = &[
    "snapshot",
    "guava",
    "seed_raw",
    "key_file",
    "store_open",
    "sqlite_open",
    "redis_replies",
    "planning",
    "parquet",
    "bindings",
];

/// What libFuzzer is given on every run: no input above 1 MiB, 2 GiB of memory at most (and
/// no single allocation above it), 10 s per input.
const LIMITS: &[&str] = &[
    "-rss_limit_mb=2048",
    "-malloc_limit_mb=2048",
    "-timeout=10",
    "-max_len=1048576",
    "-print_final_stats=1",
];

/// The instrumentation cargo-fuzz gives a target without a sanitizer.
const RUSTFLAGS: &str = "-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
     -Cllvm-args=-sanitizer-coverage-inline-8bit-counters \
     -Cllvm-args=-sanitizer-coverage-pc-table -Cllvm-args=-sanitizer-coverage-trace-compares \
     --cfg fuzzing -Cdebug-assertions -Coverflow-checks";

pub(crate) fn run(args: &[&str]) -> ExitCode {
    let mut seconds = 30u64;
    let mut chosen = Vec::new();
    let mut args = args.iter();
    while let Some(&arg) = args.next() {
        match arg {
            "--time" => match args.next().and_then(|s| s.parse().ok()) {
                Some(s) => seconds = s,
                None => return usage("--time needs a number of seconds"),
            },
            t if TARGETS.contains(&t) => chosen.push(t),
            other => return usage(&format!("unknown target or option {other:?}")),
        }
    }
    if chosen.is_empty() {
        chosen = TARGETS.to_vec();
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap_or(Path::new("."))
        .to_path_buf();
    let fuzz = root.join("fuzz");
    let triple = match host_triple() {
        Ok(t) => t,
        Err(e) => return fail(&e),
    };
    println!("== building the fuzz targets ({triple}, release, coverage-instrumented)");
    let status = Command::new(env!("CARGO"))
        .args([
            "build",
            "--release",
            "--locked",
            "--bins",
            "--target",
            &triple,
        ])
        .arg("--manifest-path")
        .arg(fuzz.join("Cargo.toml"))
        .env("CARGO_TARGET_DIR", fuzz.join("target"))
        .env("RUSTFLAGS", RUSTFLAGS)
        .status();
    if !matches!(status, Ok(s) if s.success()) {
        return fail("building the fuzz targets failed");
    }
    let mut results = Vec::new();
    for target in chosen {
        let corpus = fuzz.join("corpus").join(target);
        if let Err(e) = seed(&root, target, &corpus) {
            return fail(&format!("seeding {target}: {e}"));
        }
        let artifacts = fuzz.join("artifacts").join(target);
        if let Err(e) = std::fs::create_dir_all(&artifacts) {
            return fail(&format!("{}: {e}", artifacts.display()));
        }
        let mut command = Command::new(
            fuzz.join("target")
                .join(&triple)
                .join("release")
                .join(target),
        );
        command
            .arg(&corpus)
            .args(LIMITS)
            .arg(format!("-max_total_time={seconds}"))
            .arg(format!("-artifact_prefix={}/", artifacts.display()));
        let regressions = fuzz.join("regressions").join(target);
        if regressions.is_dir() {
            command.arg(&regressions);
        }
        println!("== fuzzing {target} for {seconds} s");
        let output = match command.output() {
            Ok(o) => o,
            Err(e) => return fail(&format!("{target}: {e}")),
        };
        let log = String::from_utf8_lossy(&output.stderr);
        let runs = stat(&log, "stat::number_of_executed_units:");
        let coverage = log
            .lines()
            .rev()
            .find_map(|l| l.split("cov: ").nth(1)?.split_whitespace().next())
            .unwrap_or("?")
            .to_owned();
        if !output.status.success() {
            let tail: Vec<&str> = log.lines().rev().take(40).collect();
            for line in tail.iter().rev() {
                eprintln!("{line}");
            }
            return fail(&format!(
                "{target} failed after {runs} runs; the input is in {} (keep it in fuzz/regressions/{target}/ once fixed)",
                artifacts.display()
            ));
        }
        results.push((target, runs, coverage));
    }
    println!("target          executions   coverage (edges)");
    let mut total = 0u64;
    for (target, runs, coverage) in &results {
        println!("{target:<15} {runs:>10}   {coverage}");
        total += runs;
    }
    println!("all targets     {total:>10}   no crash, no hang, within the memory limit");
    ExitCode::SUCCESS
}

fn usage(message: &str) -> ExitCode {
    eprintln!(
        "{message}\nusage: cargo xtask fuzz [--time SECONDS] [{}]",
        TARGETS.join("|")
    );
    ExitCode::from(2)
}

fn fail(message: &str) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::FAILURE
}

fn stat(log: &str, name: &str) -> u64 {
    log.lines()
        .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
        .unwrap_or(0)
}

fn host_triple() -> Result<String, String> {
    let out = Command::new("rustc")
        .arg("-vV")
        .output()
        .map_err(|e| format!("rustc -vV: {e}"))?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: ").map(str::to_owned))
        .ok_or_else(|| "rustc -vV named no host".to_owned())
}

/// Files of `dir` (one level) whose name ends with `suffix`.
fn files(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(suffix))
        .collect();
    out.sort();
    out
}

/// Adds the seeds of `target` to its corpus (kept between runs, so a corpus grows).
fn seed(root: &Path, target: &str, corpus: &Path) -> Result<(), String> {
    std::fs::create_dir_all(corpus).map_err(|e| e.to_string())?;
    let fixtures = root.join("fixtures");
    let snapshots: Vec<PathBuf> = ["v1", "v2", "v3"]
        .iter()
        .flat_map(|v| files(&fixtures.join(v), ".bloom"))
        .chain(files(
            &root.join("crates/bloom-store/tests/fixtures"),
            ".bloom",
        ))
        .collect();
    let read = |p: &Path| std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()));
    let mut seeds: Vec<(String, Vec<u8>)> = Vec::new();
    match target {
        "snapshot" | "store_open" | "bindings" => {
            for path in &snapshots {
                seeds.push((name_of(path), read(path)?));
            }
        }
        "guava" => {
            for path in files(&fixtures.join("guava"), ".guava") {
                let name = name_of(&path);
                let funnel = if name.contains("utf8") {
                    0
                } else if name.contains("chars") {
                    1
                } else {
                    2
                };
                let mut bytes = vec![funnel];
                bytes.extend(read(&path)?);
                seeds.push((name, bytes));
            }
        }
        "seed_raw" => {
            for path in &snapshots {
                let snapshot = Snapshot::decode(read(path)?, &DecodeOptions::unlimited())
                    .map_err(|e| format!("{}: {e}", path.display()))?;
                if let Ok(raw) = bloom_format::export_seed_raw(&snapshot) {
                    seeds.push((name_of(path), raw));
                }
            }
            seeds.push(("zeros".into(), vec![0; bloom_format::SEED_RAW_LEN]));
            seeds.push(("short".into(), vec![0xff; bloom_format::SEED_RAW_LEN - 1]));
        }
        "key_file" => {
            for path in ["v1", "v2", "v3"]
                .iter()
                .flat_map(|v| files(&fixtures.join(v), ".keys"))
                .chain(files(&fixtures.join("guava"), ".keys"))
            {
                let keys = read(&path)?;
                let mut plain = vec![4u8 << 1];
                plain.extend(&keys);
                seeds.push((format!("{}-plain", name_of(&path)), plain));
                let mut json = vec![1u8 | (4u8 << 1)];
                for line in String::from_utf8_lossy(&keys).lines() {
                    json.extend(serde_json::to_string(line).unwrap_or_default().bytes());
                    json.push(b'\n');
                }
                json.extend(b"{\"key_hex\": \"fffe00\"}\r\n");
                seeds.push((format!("{}-json", name_of(&path)), json));
            }
        }
        "sqlite_open" => {
            seeds.push(("schema-3".into(), sqlite_seed(corpus)?));
            for path in files(&root.join("crates/bloom-store/tests/fixtures"), ".sqlite") {
                seeds.push((name_of(&path), read(&path)?));
            }
        }
        "redis_replies" => seeds.extend(redis_seeds()),
        "planning" => {
            let plan = |items: u64, fpr: f64, k: u32, layout: u8, shards: u16, m: u64| {
                let mut b = Vec::new();
                b.extend(items.to_le_bytes());
                b.extend(fpr.to_bits().to_le_bytes());
                b.extend(k.to_le_bytes());
                b.push(layout);
                b.extend(shards.to_le_bytes());
                b.extend(m.to_le_bytes());
                b.extend(7u32.to_le_bytes());
                b.extend((m / 2).to_le_bytes());
                b
            };
            seeds.push((
                "standard".into(),
                plan(1_000_000, 0.01, 64, 0, 0, 9_585_059),
            ));
            seeds.push(("blocked".into(), plan(1 << 60, 1e-3, 64, 1, 0, 512)));
            seeds.push(("sharded".into(), plan(1000, 1e-3, 64, 4, 256, 1 << 20)));
            seeds.push(("split-256".into(), plan(1000, 1e-2, 64, 2, 0, 256 * 40)));
            seeds.push(("split-512".into(), plan(1 << 40, 1e-3, 64, 3, 0, 512)));
        }
        "parquet" => {
            let data = root.join("crates/bloom-parquet/tests/data");
            for path in files(&data, ".parquet")
                .into_iter()
                .chain(files(&data.join("parquet-testing"), ".parquet"))
            {
                let mut bytes = vec![1u8];
                bytes.extend(read(&path)?);
                seeds.push((name_of(&path), bytes));
            }
            for path in files(&data.join("parquet-testing"), ".bin") {
                let mut bytes = vec![0u8];
                bytes.extend(read(&path)?);
                seeds.push((name_of(&path), bytes));
            }
        }
        _ => return Err(format!("no seeds for {target}")),
    }
    for (name, bytes) in seeds {
        std::fs::write(corpus.join(format!("seed-{name}")), bytes).map_err(|e| e.to_string())?;
    }
    Ok(())
}

fn name_of(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// A schema-3 database with inserts and removals, closed (its log checkpointed into it).
fn sqlite_seed(scratch: &Path) -> Result<Vec<u8>, String> {
    use bloom_store::PrimaryStore;
    let dir = scratch.join(".seed-db");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let path = dir.join("keys.sqlite");
    {
        let store = bloom_store::SqliteStore::open(&path).map_err(|e| e.to_string())?;
        for i in 0..40 {
            store
                .insert(format!("k-{i}").as_bytes())
                .map_err(|e| e.to_string())?;
        }
        for i in 0..5 {
            store
                .remove(format!("k-{i}").as_bytes())
                .map_err(|e| e.to_string())?;
        }
        store
            .claim_key_encoding("nfc v1")
            .map_err(|e| e.to_string())?;
    }
    let bytes = std::fs::read(&path).map_err(|e| e.to_string())?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(bytes)
}

/// Replies a fake server gives after its canned `INFO` (see the target): the metadata of a
/// 4-shard filter named `f`, its shards' epoch records naming the fake node, and `BITFIELD`
/// replies whose markers are the shards' (computed as docs/format.md says), separated by the
/// bytes `ff fe`.
fn redis_seeds() -> Vec<(String, Vec<u8>)> {
    let creation: [u8; 16] = core::array::from_fn(|i| i as u8 + 1);
    let fields: [(&str, String); 18] = [
        ("schema", "bloom-redis/2".into()),
        ("creation", bloom_format::hex(&creation)),
        ("state", "ready".into()),
        ("bits", "4096".into()),
        ("hashes", "3".into()),
        ("rule", "xxh3-128".into()),
        ("layout", "sharded".into()),
        ("shards", "4".into()),
        ("encoding", "bytes".into()),
        ("encoding_version", "1".into()),
        ("unicode_normalization", String::new()),
        ("unicode_casing", String::new()),
        ("salt", String::new()),
        ("generation", "0".into()),
        ("items", "0".into()),
        ("store_identity", String::new()),
        ("history_digest", String::new()),
        ("durability", "none".into()),
    ];
    let bulk = |s: &str| format!("${}\r\n{s}\r\n", s.len());
    let mut meta = format!("*{}\r\n", 2 * fields.len());
    for (field, value) in &fields {
        meta.push_str(&bulk(field));
        meta.push_str(&bulk(value));
    }
    // The marker of each shard (docs/format.md, "Shards and markers").
    let mut described = Vec::new();
    for field in bloom_redis_protocol::config::CONFIG_FIELDS {
        let value = fields
            .iter()
            .find(|(f, _)| *f == field)
            .map(|(_, v)| v.as_str());
        described.extend(value.unwrap_or_default().bytes());
        described.push(b'\n');
    }
    let markers = bloom_redis_protocol::marker::ShardMarkers::new(&creation, &described);
    let marker = |s: u64| markers.of(u32::try_from(s).unwrap_or(u32::MAX));
    let epoch = format!(
        "*3\r\n{}{}{}",
        bulk("0123456789abcdef0123456789abcdef01234567"),
        bulk("89abcdef0123456789abcdef0123456789abcdef"),
        bulk("")
    );
    let bitfield = |s: u64, bits: usize| {
        let mut reply = format!("*{}\r\n", 2 + bits);
        let m = marker(s);
        reply.push_str(&format!(":{m}\r\n:{m}\r\n"));
        for _ in 0..bits {
            reply.push_str(":1\r\n");
        }
        reply
    };
    let join = |parts: &[String]| {
        let mut out = Vec::new();
        for (i, part) in parts.iter().enumerate() {
            if i > 0 {
                out.extend(b"\xff\xfe");
            }
            out.extend(part.as_bytes());
        }
        out
    };
    let mut deep = vec![meta.clone()];
    for s in 0..4 {
        deep.push(epoch.clone());
        deep.push(bitfield(s, 3));
    }
    for s in 0..4 {
        deep.push(bitfield(s, 9));
    }
    deep.push(":0\r\n".into());
    vec![
        ("meta".into(), meta.clone().into_bytes()),
        ("deep".into(), join(&deep)),
        (
            "errors".into(),
            join(&[meta, "-NOPERM no\r\n".into(), "$-1\r\n".into()]),
        ),
    ]
}
