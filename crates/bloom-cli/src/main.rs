//! `bloom`: build, query, inspect, verify, import and measure Bloom filter snapshots.
//!
//! Exit codes: 0 success, 1 damaged or invalid input, 2 usage error. Errors are one line on
//! stderr: what went wrong, where, and what to do.

mod keys;

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use bloom_core::{BloomFilter, FilterConfig, FilterParams, KeyEncoding, PositionRule, Salt};
use bloom_format::{
    DecodeOptions, FormatVersion, Snapshot, export_seed_raw, import_seed_raw, write_atomic,
};
use clap::{Args, Parser, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::json;

use crate::keys::LineFormat;

/// A failure to report: one line, exit code 1.
#[derive(Debug)]
pub(crate) struct Failure(String);

impl Failure {
    pub(crate) fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }
}

#[derive(Parser)]
#[command(
    name = "bloom",
    version,
    about = "Build, check, inspect and verify Bloom filter snapshots"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print m, k, size and predicted false-positive rate for a plan.
    Plan {
        /// Expected number of keys.
        #[arg(long)]
        items: u64,
        /// Target false-positive rate, between 0 and 1.
        #[arg(long)]
        fpr: f64,
    },
    /// Build a snapshot from keys and write it atomically.
    Build(BuildArgs),
    /// Insert keys into a snapshot and rewrite it atomically.
    Add {
        /// The snapshot to update.
        snapshot: PathBuf,
        #[command(flatten)]
        input: KeyInput,
        /// Dataset generation to record (default: keep the current one).
        #[arg(long)]
        generation: Option<u64>,
    },
    /// Print `maybe<TAB>KEY` or `absent<TAB>KEY` for each key, in input order.
    Check {
        /// The snapshot to query.
        snapshot: PathBuf,
        /// Keys to check (in addition to --keys).
        keys: Vec<String>,
        #[command(flatten)]
        input: KeyInput,
        /// Print a JSON array instead.
        #[arg(long)]
        json: bool,
    },
    /// Print every header field, fill, estimates and checksum status.
    Inspect {
        /// The snapshot to inspect.
        snapshot: PathBuf,
        /// Print JSON instead.
        #[arg(long)]
        json: bool,
    },
    /// Exit 0 if every snapshot is intact; otherwise print one line per damaged file and exit 1.
    Verify {
        /// Snapshots to verify.
        #[arg(required = true)]
        snapshots: Vec<PathBuf>,
    },
    /// Import a legacy raw snapshot.
    Import {
        /// The legacy layout of the input.
        #[arg(long, value_enum)]
        from: Legacy,
        /// The raw file.
        input: PathBuf,
        /// Where to write the snapshot.
        #[arg(short, long)]
        output: PathBuf,
    },
    /// Export a snapshot to a legacy raw layout.
    Export {
        /// The legacy layout to write.
        #[arg(long, value_enum)]
        to: Legacy,
        /// The snapshot.
        snapshot: PathBuf,
        /// Where to write the raw bytes.
        #[arg(short, long)]
        output: PathBuf,
    },
    /// Measure the false-positive rate on a fixed inserted set and a disjoint query set.
    Measure {
        /// Keys to insert.
        #[arg(long)]
        items: u64,
        /// Target false-positive rate the filter is planned for.
        #[arg(long)]
        fpr: f64,
        /// Number of absent keys to query.
        #[arg(long, default_value_t = 100_000)]
        queries: u64,
        /// Seed that names the key sets.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Position rule.
        #[arg(long, default_value = "sha256-double")]
        rule: PositionRule,
    },
}

/// The legacy layouts.
#[derive(Clone, Copy, ValueEnum)]
enum Legacy {
    /// The reference article's raw 128 bytes: 1024 bits, 4 positions, sha256-split4, UTF-8.
    SeedRaw,
}

#[derive(Args)]
struct KeyInput {
    /// Read keys from a file, one per line (`-` for standard input).
    #[arg(long = "keys", value_name = "PATH|-")]
    path: Option<PathBuf>,
    /// Each line is a JSON string (keys may contain newlines or tabs, or be empty).
    #[arg(long)]
    jsonl: bool,
}

#[derive(Args)]
struct BuildArgs {
    /// Expected number of keys (with --fpr).
    #[arg(long, requires = "fpr", conflicts_with_all = ["bits", "hashes"])]
    items: Option<u64>,
    /// Target false-positive rate (with --items).
    #[arg(long, requires = "items")]
    fpr: Option<f64>,
    /// Bit count m (with --hashes).
    #[arg(long, requires = "hashes")]
    bits: Option<u64>,
    /// Positions per key k (with --bits).
    #[arg(long, requires = "bits")]
    hashes: Option<u32>,
    /// Position rule.
    #[arg(long, default_value = "sha256-double")]
    rule: PositionRule,
    /// Key encoding.
    #[arg(long, default_value = "nfc")]
    encoding: KeyEncoding,
    /// Salt: `none`, `random`, or hex bytes (at most 32).
    #[arg(long, default_value = "none")]
    salt: String,
    /// Dataset generation to record.
    #[arg(long, default_value_t = 0)]
    generation: u64,
    #[command(flatten)]
    input: KeyInput,
    /// Where to write the snapshot.
    #[arg(short, long)]
    output: PathBuf,
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    match run(cli.command) {
        Ok(code) => code,
        Err(Failure(message)) => {
            // Not eprintln!: it panics when stderr is closed.
            let _ = writeln!(std::io::stderr(), "error: {message}");
            ExitCode::from(1)
        }
    }
}

fn run(command: Command) -> Result<ExitCode, Failure> {
    match command {
        Command::Plan { items, fpr } => plan(items, fpr),
        Command::Build(args) => build(args),
        Command::Add {
            snapshot,
            input,
            generation,
        } => add(&snapshot, &input, generation),
        Command::Check {
            snapshot,
            keys,
            input,
            json,
        } => check(&snapshot, &keys, &input, json),
        Command::Inspect { snapshot, json } => inspect(&snapshot, json),
        Command::Verify { snapshots } => return Ok(verify(&snapshots)),
        Command::Import {
            from: Legacy::SeedRaw,
            input,
            output,
        } => import(&input, &output),
        Command::Export {
            to: Legacy::SeedRaw,
            snapshot,
            output,
        } => export(&snapshot, &output),
        Command::Measure {
            items,
            fpr,
            queries,
            seed,
            rule,
        } => measure(items, fpr, queries, seed, rule),
    }
    .map(|()| ExitCode::SUCCESS)
}

type CmdResult = Result<(), Failure>;

fn out() -> std::io::StdoutLock<'static> {
    std::io::stdout().lock()
}

fn emit(text: &str) -> Result<(), Failure> {
    let mut o = out();
    o.write_all(text.as_bytes())
        .and_then(|()| o.flush())
        .map_err(|e| Failure::new(format!("cannot write to standard output: {e}")))
}

fn plan(items: u64, fpr: f64) -> CmdResult {
    let params = FilterParams::for_false_positive_rate(items, fpr)
        .map_err(|e| Failure::new(format!("cannot plan: {e}")))?;
    emit(&format!(
        "items: {items}\ntarget false-positive rate: {fpr}\nbits (m): {}\npositions per key (k): {}\nbytes: {}\nbits per key: {:.3}\npredicted false-positive rate: {:.6}\n",
        params.bits(),
        params.hashes(),
        params.byte_len(),
        params.bits_per_key(items),
        params.predicted_false_positive_rate(items),
    ))?;
    Ok(())
}

fn parse_salt(text: &str) -> Result<Salt, Failure> {
    match text {
        "none" => Ok(Salt::none()),
        "random" => Salt::random().map_err(|e| Failure::new(e.to_string())),
        hex => {
            let bad = || {
                Failure::new(format!(
                    "--salt {hex:?} is not `none`, `random` or an even number of hex digits"
                ))
            };
            if hex.len() % 2 != 0 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(bad());
            }
            let bytes: Vec<u8> = (0..hex.len())
                .step_by(2)
                .map(|i| {
                    hex.get(i..i + 2)
                        .and_then(|h| u8::from_str_radix(h, 16).ok())
                        .ok_or_else(bad)
                })
                .collect::<Result<_, _>>()?;
            Salt::new(&bytes).map_err(|e| Failure::new(format!("--salt: {e}")))
        }
    }
}

fn progress(label: &'static str) -> ProgressBar {
    let bar = ProgressBar::new_spinner();
    if std::io::stderr().is_terminal() {
        bar.set_style(
            ProgressStyle::with_template("{spinner} {msg} {human_pos} keys ({per_sec})")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        bar.set_message(label);
        bar.enable_steady_tick(std::time::Duration::from_millis(120));
    } else {
        bar.set_draw_target(ProgressDrawTarget::hidden());
    }
    bar
}

/// Inserts every key of `input` into `filter`; nothing is written by the caller on error.
fn insert_keys(filter: &mut BloomFilter, input: &KeyInput) -> Result<u64, Failure> {
    let Some(path) = &input.path else {
        return Ok(0);
    };
    let source = if path == Path::new("-") {
        "standard input".to_owned()
    } else {
        path.display().to_string()
    };
    let reader = keys::open(path)?;
    let format = if input.jsonl {
        LineFormat::Json
    } else {
        LineFormat::Plain
    };
    let bar = progress("inserting");
    let count = keys::for_each(reader, &source, format, |key, line| {
        filter
            .insert_bytes(key)
            .map_err(|e| Failure::new(format!("{source} line {line}: {e}")))?;
        if line % 4096 == 0 {
            bar.set_position(line);
        }
        Ok(())
    })?;
    bar.finish_and_clear();
    Ok(count)
}

fn build(args: BuildArgs) -> CmdResult {
    let params = match (args.items, args.fpr, args.bits, args.hashes) {
        (Some(items), Some(fpr), None, None) => FilterParams::for_false_positive_rate(items, fpr),
        (None, None, Some(bits), Some(hashes)) => FilterParams::new(bits, hashes),
        _ => {
            return Err(Failure::new(
                "give either --items N --fpr P or --bits M --hashes K",
            ));
        }
    }
    .map_err(|e| Failure::new(format!("invalid parameters: {e}")))?;
    let config = FilterConfig::new(params)
        .with_encoding(args.encoding)
        .with_salt(parse_salt(&args.salt)?)
        .with_rule(args.rule)
        .map_err(|e| Failure::new(format!("invalid parameters: {e}")))?;
    let mut filter = BloomFilter::new(config).map_err(|e| Failure::new(e.to_string()))?;
    insert_keys(&mut filter, &args.input)?;
    write_snapshot(&filter.to_snapshot(args.generation), &args.output)?;
    Ok(())
}

fn write_snapshot(snapshot: &Snapshot, path: &Path) -> Result<(), Failure> {
    snapshot
        .write_file(path)
        .map_err(|e| Failure::new(e.to_string()))
}

fn load(path: &Path) -> Result<(Snapshot, BloomFilter), Failure> {
    let snapshot = Snapshot::read_file(path, &DecodeOptions::unlimited())
        .map_err(|e| Failure::new(format!("{}: {e}", path.display())))?;
    let filter = BloomFilter::from_snapshot(&snapshot)
        .map_err(|e| Failure::new(format!("{}: {e}", path.display())))?;
    Ok((snapshot, filter))
}

fn add(path: &Path, input: &KeyInput, generation: Option<u64>) -> CmdResult {
    let (snapshot, mut filter) = load(path)?;
    if input.path.is_none() {
        return Err(Failure::new(
            "no keys given: pass --keys PATH (or - for standard input)",
        ));
    }
    insert_keys(&mut filter, input)?;
    let generation = generation.unwrap_or(snapshot.header().dataset_generation.get());
    write_snapshot(&filter.to_snapshot(generation), path)?;
    Ok(())
}

fn check(path: &Path, args: &[String], input: &KeyInput, json: bool) -> CmdResult {
    let (_, filter) = load(path)?;
    // Answers stream out as they are computed, so memory stays at one key however many are
    // checked.
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let write_failed =
        |e: std::io::Error| Failure::new(format!("cannot write to standard output: {e}"));
    let mut first = true;
    let mut answer = |key: &[u8], line: Option<u64>| -> Result<(), Failure> {
        let maybe = filter.contains_bytes(key).map_err(|e| match line {
            Some(n) => Failure::new(format!("key on line {n}: {e}")),
            None => Failure::new(format!("key {:?}: {e}", String::from_utf8_lossy(key))),
        })?;
        let verdict = if maybe { "maybe" } else { "absent" };
        if json {
            let item = json!({"key": String::from_utf8_lossy(key), "answer": verdict});
            let sep = if first { "[" } else { "," };
            write!(out, "{sep}{item}").map_err(write_failed)?;
        } else {
            out.write_all(verdict.as_bytes())
                .and_then(|()| out.write_all(b"\t"))
                .and_then(|()| out.write_all(key))
                .and_then(|()| out.write_all(b"\n"))
                .map_err(write_failed)?;
        }
        first = false;
        Ok(())
    };
    for key in args {
        answer(key.as_bytes(), None)?;
    }
    if let Some(keys_path) = &input.path {
        let source = keys_path.display().to_string();
        let format = if input.jsonl {
            LineFormat::Json
        } else {
            LineFormat::Plain
        };
        keys::for_each(keys::open(keys_path)?, &source, format, |k, n| {
            answer(k, Some(n))
        })?;
    }
    if json {
        let close = if first { "[]\n" } else { "]\n" };
        out.write_all(close.as_bytes()).map_err(write_failed)?;
    }
    out.flush().map_err(write_failed)?;
    Ok(())
}

fn inspect(path: &Path, json: bool) -> CmdResult {
    let (snapshot, filter) = load(path)?;
    let h = snapshot.header();
    if json {
        let value = json!({
            "path": path.display().to_string(),
            "format_version": snapshot.format_version().value(),
            "header_length": snapshot.header_len(),
            "bit_count": h.bit_count,
            "hash_count": h.hash_count,
            "position_rule": h.position_rule.name(),
            "layout": h.layout.name(),
            "key_encoding": h.key_encoding.id.name(),
            "key_encoding_version": h.key_encoding.version,
            "unicode_version": h.key_encoding.normalization_unicode.map(|v| v.to_string()),
            "salt_hex": bloom_format::hex(&h.salt),
            "dataset_generation": h.dataset_generation.get(),
            "item_count": h.item_count,
            "payload_length": snapshot.payload().len(),
            "payload_crc32": snapshot.payload_crc32(),
            "checksums": "ok",
            "fill_ratio": filter.fill_ratio(),
            "estimated_items": filter.estimated_items(),
            "estimated_false_positive_rate": filter.estimated_false_positive_rate(),
        });
        emit(&format!("{value:#}\n"))?;
    } else {
        emit(&format!(
            "{}fill ratio: {:.6}\nestimated items: {:.1}\nestimated false-positive rate: {:.6}\nchecksums: ok (header and payload)\n",
            snapshot.dump_header(),
            filter.fill_ratio(),
            filter.estimated_items(),
            filter.estimated_false_positive_rate(),
        ))?;
    }
    Ok(())
}

fn verify(paths: &[PathBuf]) -> ExitCode {
    let mut damaged = 0;
    let mut report = String::new();
    for path in paths {
        match load(path) {
            Ok(_) => report.push_str(&format!("ok\t{}\n", path.display())),
            Err(Failure(message)) => {
                damaged += 1;
                report.push_str(&format!("damaged\t{message}\n"));
            }
        }
    }
    if emit(&report).is_err() {
        return ExitCode::from(1);
    }
    if damaged == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

fn import(input: &Path, output: &Path) -> CmdResult {
    let raw = std::fs::read(input)
        .map_err(|e| Failure::new(format!("cannot read {}: {e}", input.display())))?;
    let snapshot =
        import_seed_raw(&raw).map_err(|e| Failure::new(format!("{}: {e}", input.display())))?;
    write_snapshot(&snapshot, output)?;
    Ok(())
}

fn export(path: &Path, output: &Path) -> CmdResult {
    let (snapshot, _) = load(path)?;
    let raw =
        export_seed_raw(&snapshot).map_err(|e| Failure::new(format!("{}: {e}", path.display())))?;
    write_atomic(output, &raw).map_err(|e| Failure::new(e.to_string()))?;
    Ok(())
}

/// Wilson score interval at 95%.
fn wilson(hits: u64, n: u64) -> (f64, f64) {
    let z = 1.959_963_984_540_054_f64;
    let n = n as f64;
    let p = hits as f64 / n;
    let denom = 1.0 + z * z / n;
    let centre = (p + z * z / (2.0 * n)) / denom;
    let half = z * (p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt() / denom;
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

fn measure(items: u64, fpr: f64, queries: u64, seed: u64, rule: PositionRule) -> CmdResult {
    if queries == 0 {
        return Err(Failure::new("--queries must be at least 1"));
    }
    let params = FilterParams::for_false_positive_rate(items, fpr)
        .map_err(|e| Failure::new(format!("cannot plan: {e}")))?;
    let config = FilterConfig::new(params)
        .with_rule(rule)
        .map_err(|e| Failure::new(format!("invalid parameters: {e}")))?;
    let mut filter = BloomFilter::new(config).map_err(|e| Failure::new(e.to_string()))?;
    let bar = progress("measuring");
    filter.insert_all((0..items).map(|i| {
        if i % 4096 == 0 {
            bar.set_position(i);
        }
        format!("inserted/{seed}/{i}")
    }));
    // The query keys have another prefix, so the two sets are disjoint.
    let hits = filter
        .contains_each((0..queries).map(|i| format!("query/{seed}/{i}")))
        .filter(|&maybe| maybe)
        .count() as u64;
    bar.finish_and_clear();
    let (low, high) = wilson(hits, queries);
    emit(&format!(
        "rule: {rule}\nformat version: {}\nbits (m): {}\npositions per key (k): {}\ninserted keys: {items}\nqueries (disjoint): {queries}\nfalse positives: {hits}\nmeasured false-positive rate: {:.6} (95% Wilson interval {low:.6} .. {high:.6}, query sampling only; the fill of one filter also varies with --seed)\npredicted false-positive rate: {:.6}\n",
        FormatVersion::CURRENT.value(),
        filter.config().bits(),
        filter.config().hashes(),
        hits as f64 / queries as f64,
        filter
            .config()
            .params()
            .predicted_false_positive_rate(items),
    ))?;
    Ok(())
}
