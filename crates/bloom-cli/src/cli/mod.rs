//! The command line: every command, flag and value, and how values are checked (a value that
//! cannot be right is a usage error, exit 2, reported by clap).

mod parquet;
mod redis;
mod values;

use std::path::PathBuf;

use bloom_core::{KeyEncoding, Layout, MAX_BITS, MAX_HASHES, PositionRule, Salt};
use bloom_format::GuavaFunnel;
use clap::{ArgGroup, Args, Parser, Subcommand, ValueEnum};

use crate::keys::{DEFAULT_MAX_KEY_BYTES, KeySource, LineFormat};

pub(crate) use parquet::*;
pub(crate) use redis::*;
pub(crate) use values::{layout_for, plan_params, planned_layout, rule_for};
use values::{parse_key_limit, parse_rate, parse_salt, parse_size};

/// The key-file grammar: the end of `--help` for `bloom` and for every command that reads
/// keys.
macro_rules! key_files {
    () => {
        "Key files (--keys PATH, or - for standard input): one key per line, LF or CRLF line endings,
the last line with or without a line feed. A UTF-8 byte order mark at the start is ignored.
Empty lines are skipped. A NUL byte is refused (a binary or UTF-16 file). Keys longer than
--max-key-bytes (default 64 KiB) are refused by line number. With --jsonl every line is a
JSON string, which can hold any key (empty, with line breaks, tabs or NUL), or an object
{\"key_hex\": \"...\"} for keys that are not UTF-8."
    };
}

/// What `--help` of a command that reads keys ends with.
pub(crate) const KEY_FILES: &str = key_files!();

const AFTER_HELP: &str = concat!(
    "\
Exit codes:
  0    success
  1    bad input: a damaged or invalid snapshot, an invalid key or key file; `verify` found
       a damaged or unverified file; `remove` left keys it reports absent
  2    usage error: flags or values that do not make sense
  3    environment failure: a file is missing, unreadable or not a regular file, a file or
       standard output could not be written, a lock could not be taken, memory could not be
       allocated, Redis could not be reached, refused a command, or did not finish within
       --timeout
  4    `check --exit-status`: at least one key is absent
  5    a Redis filter is unverified: Redis may have lost writes it acknowledged (a restart
       from an older save, a failover to a replica that missed writes); nothing is answered
       from it until `bloom redis add --complete` adds every key again, or it is rebuilt
  129  interrupted by SIGHUP, 130 by SIGINT, 143 by SIGTERM (a snapshot being written is
       left unchanged, and no temporary file is left behind)
A closed standard output (`bloom check ... | head`) ends the command quietly.

",
    key_files!(),
    "

Limits: snapshots with a payload over --max-bytes (default 1 GiB) are refused before any of
their payload is read, and `build` refuses to make one; sizes take K, M, G or T suffixes
(powers of 1024). `verify` and `inspect` stream in constant memory, and so does `check` of
a few keys, given as arguments or in a regular --keys file of at most 1 MiB (up to 65,536
positions: about 8,000 keys of 8 positions; more keys, and keys from standard input or a
pipe, are answered by the loaded filter); for them the limit only bounds the time a file
can take (`verify` reports a larger file as unverified)."
);

#[derive(Parser)]
#[command(
    name = "bloom",
    version,
    about = "Build, check, inspect and verify Bloom filter snapshots",
    after_long_help = AFTER_HELP
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Subcommand)]
pub(crate) enum Command {
    /// Print m, k, size and predicted false-positive rate for a plan, for the standard,
    /// blocked-512, split-block-256, split-block-512 and counting layouts side by side, each
    /// sized with its own false-positive formula, and the default layout for the rate.
    Plan(PlanArgs),
    /// Build a snapshot from keys and write it atomically.
    Build(BuildArgs),
    /// Insert keys into a snapshot and rewrite it atomically, under a lock.
    Add(AddArgs),
    /// Remove keys from a counting snapshot (`build --counting`) and rewrite it atomically,
    /// under a lock. Keys the filter reports absent are listed on standard output and left
    /// alone (exit 1 if any).
    Remove(RemoveArgs),
    /// Print `maybe<TAB>KEY` or `absent<TAB>KEY` for each key, in input order. A few keys
    /// (up to 65,536 positions, about 8,000 keys of 8), given as arguments or in a regular
    /// --keys file of at most 1 MiB, are answered in one pass over the snapshot without
    /// loading it, in memory for the keys and their positions only.
    Check(CheckArgs),
    /// Print every header field, fill, estimates and checksum status.
    Inspect(InspectArgs),
    /// Check every snapshot completely (streaming, constant memory); one line per file (ok,
    /// unverified, damaged, not-a-snapshot, missing, unreadable); exit 1 if any is damaged,
    /// not a snapshot or unverified, otherwise 3 if any is missing or unreadable.
    Verify(VerifyArgs),
    /// Import a seed raw file, a Guava `BloomFilter` stream or a Parquet column chunk's Bloom
    /// filter into a checked snapshot.
    Import(ImportArgs),
    /// Export a snapshot as a seed raw file or a Guava `BloomFilter` stream.
    Export(ExportArgs),
    /// Measure the false-positive rate on a fixed inserted set and a disjoint query set.
    Measure(MeasureArgs),
    /// A filter shared by a fleet, held in Redis or Redis Cluster (one shard key per shard,
    /// a metadata hash beside them).
    #[command(subcommand)]
    Redis(RedisCommand),
    /// The split-block Bloom filters inside Apache Parquet files, read bit for bit.
    #[command(subcommand)]
    Parquet(ParquetCommand),
    /// Print a shell completion script (bash, elvish, fish, powershell, zsh), generated from
    /// this command line: `bloom completions bash > /etc/bash_completion.d/bloom`.
    Completions(CompletionsArgs),
    /// Print a manual page (roff), generated from this command line: `bloom man > bloom.1`,
    /// `bloom man redis create > bloom-redis-create.1`.
    Man(ManArgs),
}

#[derive(Args)]
pub(crate) struct ManArgs {
    /// The command whose page to print (`plan`, `redis create`, ...); none for `bloom(1)`.
    pub(crate) command: Vec<String>,
}

#[derive(Args)]
pub(crate) struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub(crate) shell: clap_complete::Shell,
}

#[derive(Args)]
pub(crate) struct PlanArgs {
    /// Expected number of keys.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) items: u64,
    /// Target false-positive rate, strictly between 0 and 1.
    #[arg(long, value_parser = parse_rate)]
    pub(crate) fpr: f64,
    /// Plan this layout only (standard, blocked-512, split-block-256, split-block-512,
    /// sharded-v2-S, sharded-S) instead of the layouts side by side.
    #[arg(long)]
    pub(crate) layout: Option<Layout>,
    /// Print JSON instead.
    #[arg(long)]
    pub(crate) json: bool,
}

/// The foreign forms a filter is imported from or exported to.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Legacy {
    /// The reference article's raw 128 bytes: 1024 bits, 4 positions, sha256-split4, UTF-8.
    SeedRaw,
    /// Guava's `BloomFilter.writeTo` stream (both strategies; see --funnel).
    Guava,
}

/// The foreign forms a filter is imported from.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ImportForm {
    /// The reference article's raw 128 bytes: 1024 bits, 4 positions, sha256-split4, UTF-8.
    SeedRaw,
    /// Guava's `BloomFilter.writeTo` stream (both strategies; see --funnel).
    Guava,
    /// The Bloom filter of one column chunk of a Parquet file (--column, --row-group): a
    /// split-block-256 snapshot with the xxh64 rule that answers as Parquet's filter.
    Parquet,
}

/// How the JVM side turned keys into bytes (the Guava stream does not record it).
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Funnel {
    /// `Funnels.stringFunnel(UTF_8)`: keys are text, hashed as UTF-8.
    Utf8,
    /// `Funnels.unencodedCharsFunnel()`: keys are text, hashed as UTF-16 code units.
    Chars,
    /// `Funnels.byteArrayFunnel()` (and `integerFunnel`/`longFunnel`, whose keys are the
    /// number's little-endian bytes): keys are bytes.
    Bytes,
}

impl Funnel {
    pub(crate) fn guava(self) -> GuavaFunnel {
        match self {
            Self::Utf8 => GuavaFunnel::Utf8,
            Self::Chars => GuavaFunnel::Chars,
            Self::Bytes => GuavaFunnel::Bytes,
        }
    }
}

/// Where keys come from, besides the command line.
#[derive(Args)]
pub(crate) struct KeyInput {
    /// Read keys from a file, one per line (`-` for standard input). The grammar is at the end
    /// of this command's `--help`.
    #[arg(long = "keys", value_name = "PATH|-")]
    pub(crate) path: Option<PathBuf>,
    /// Each line is a JSON string (keys may contain newlines or tabs, or be empty).
    #[arg(long)]
    pub(crate) jsonl: bool,
    /// The longest key accepted, in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_MAX_KEY_BYTES as u64, value_parser = parse_key_limit)]
    pub(crate) max_key_bytes: u64,
}

impl KeyInput {
    pub(crate) fn source(&self) -> Option<KeySource> {
        self.path.as_ref().map(|path| KeySource {
            path: path.clone(),
            format: if self.jsonl {
                LineFormat::Json
            } else {
                LineFormat::Plain
            },
            max_key_bytes: usize::try_from(self.max_key_bytes).unwrap_or(usize::MAX),
        })
    }
}

/// The largest snapshot payload to read or build.
#[derive(Args, Clone, Copy)]
pub(crate) struct SizeLimit {
    /// Refuse snapshots whose payload is larger (K, M, G, T suffixes). The default, 1 GiB,
    /// holds about 900 million keys at 1% (a counting filter, about 220 million).
    #[arg(long, value_name = "BYTES", default_value = "1G", value_parser = parse_size)]
    pub(crate) max_bytes: u64,
}

/// Taking the lock that serializes writers of one snapshot.
#[derive(Args, Clone, Copy)]
pub(crate) struct LockWait {
    /// Fail at once (exit 3) if another bloom process is updating the snapshot, instead of
    /// waiting for it.
    #[arg(long)]
    pub(crate) no_wait: bool,
}

#[derive(Args)]
#[command(after_long_help = KEY_FILES)]
#[command(group(ArgGroup::new("size").required(true).args(["items", "bits"])))]
pub(crate) struct BuildArgs {
    #[command(flatten)]
    pub(crate) size: Sizing,
    /// Position rule: xxh3-64 (the fastest, split-block layouts only), xxh3-128 (fast, any
    /// layout), sha256-double (with --salt random, the rule for keys an adversary picks:
    /// xxHash has seed-independent collisions, so a salt does not protect the xxHash rules),
    /// xxh64 (Apache Parquet's, split-block layouts only), sha256-split4 (the reference
    /// article's, standard layout only), or guava-mitz64 / guava-mitz32 (Guava's strategies,
    /// sized as Guava 31 sizes with --items and --fpr, for `bloom export --to guava`).
    /// The default is the fastest for the layout (xxh3-64 for the split-block layouts,
    /// xxh3-128 for the others), or sha256-double when --salt is given.
    #[arg(long)]
    pub(crate) rule: Option<PositionRule>,
    /// Layout: split-block-512 (one bit in each of eight words of one 64-byte cache line, k =
    /// 8, about 5% more bits at 1%; the default with --items and --fpr where it costs at
    /// most 10% more bits than standard, about 0.0861% to 3.48%), blocked-512 (all of a key's bits
    /// in one cache line, about 3% more bits at 1%; the default elsewhere and with --bits),
    /// split-block-256 (Apache Parquet's split-block filter, k = 8, about 10% more bits at
    /// 1%), standard (the fewest bits, one cache line per position; the default for
    /// sha256-split4, which works with it only), sharded-v2-S (S shards, as Redis filters
    /// are held), or sharded-S (the superseded sharded layout).
    #[arg(long)]
    pub(crate) layout: Option<Layout>,
    /// Key encoding (default: nfc; utf8 for the Guava rules, whose filters use the encoding
    /// of the JVM side's funnel: utf8, utf16le or bytes).
    #[arg(long)]
    pub(crate) encoding: Option<KeyEncoding>,
    /// Salt: `none`, `random`, or hex bytes (at most 32).
    #[arg(long, default_value = "none", value_parser = parse_salt)]
    pub(crate) salt: Salt,
    /// A counting filter (4-bit counters, layout counting-4bit): keys can be removed later
    /// with `bloom remove`, for four times the bytes of a plain filter at the same rate.
    /// Counters are placed as the standard layout places bits.
    #[arg(long)]
    pub(crate) counting: bool,
    /// A scalable filter (layout scalable): a chain of stages that grows instead of filling
    /// up. --items is the first stage's capacity and --fpr the bound on the whole chain's
    /// false-positive rate, however far it grows; `bloom add` appends a stage each time the
    /// newest fills (each stage --growth times larger, at a rate --tightening times lower),
    /// up to --max-bytes. Each stage gets the layout that suits its rate; lookups cost one
    /// probe per stage. Default rule xxh3-128 (sha256-double with --salt).
    #[arg(long, requires = "items", conflicts_with_all = ["counting", "layout"])]
    pub(crate) scalable: bool,
    /// With --scalable: each stage's capacity over the one before (1 to 1024; default 2).
    #[arg(long, requires = "scalable", value_parser = clap::value_parser!(u32).range(1..=i64::from(bloom_format::MAX_GROWTH)))]
    pub(crate) growth: Option<u32>,
    /// With --scalable: each stage's false-positive rate over the one before, strictly
    /// between 0 and 1 (default 0.5). Closer to 1 makes the first stages smaller and the
    /// later ones larger.
    #[arg(long, requires = "scalable", value_parser = parse_rate)]
    pub(crate) tightening: Option<f64>,
    /// Dataset generation to record.
    #[arg(long, default_value_t = 0)]
    pub(crate) generation: u64,
    #[command(flatten)]
    pub(crate) input: KeyInput,
    #[command(flatten)]
    pub(crate) limit: SizeLimit,
    #[command(flatten)]
    pub(crate) lock: LockWait,
    #[command(flatten)]
    pub(crate) full: OnFull,
    /// Where to write the snapshot (`-` for standard output). A link is written through; an
    /// existing path that is not a regular file is refused.
    #[arg(short, long, value_name = "PATH|-")]
    pub(crate) output: PathBuf,
}

/// What `build` and `add` do with a filter past its plan.
#[derive(Args)]
pub(crate) struct OnFull {
    /// Refuse, with exit status 1 and the snapshot left unchanged, instead of warning when
    /// the filter would hold more keys than it was planned for or its estimated
    /// false-positive rate would pass the target (`--items` / `--fpr`).
    #[arg(long)]
    pub(crate) strict: bool,
}

/// What `redis add` does with a filter past the plan it was created with.
#[derive(Args)]
pub(crate) struct RedisOnFull {
    /// Refuse, with exit status 1, instead of warning, when the filter holds more keys than
    /// it was created for or its estimated false-positive rate passes the target (`redis
    /// create --items --fpr`): nothing is added to a filter past its plan, and an add stops
    /// once the keys it added fill the plan (the keys before are in; the message says how
    /// many).
    #[arg(long)]
    pub(crate) strict: bool,
}

/// How big a new filter is: planned for a key count and a rate, or given as `m` and `k`.
#[derive(Args)]
pub(crate) struct Sizing {
    /// Expected number of keys (with --fpr).
    #[arg(long, requires = "fpr", conflicts_with_all = ["bits", "hashes"], value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) items: Option<u64>,
    /// Target false-positive rate, strictly between 0 and 1 (with --items).
    #[arg(long, requires = "items", value_parser = parse_rate)]
    pub(crate) fpr: Option<f64>,
    /// Bit count m (with --hashes; a whole number of the layout's blocks: 512 bits for
    /// blocked-512, 64 bits per shard for a sharded filter).
    #[arg(long, requires = "hashes", value_parser = clap::value_parser!(u64).range(1..=MAX_BITS))]
    pub(crate) bits: Option<u64>,
    /// Positions per key k (with --bits).
    #[arg(long, requires = "bits", value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_HASHES)))]
    pub(crate) hashes: Option<u32>,
}

/// A [`Sizing`] after parsing: one of its two forms.
pub(crate) enum Size {
    Planned { items: u64, fpr: f64 },
    Explicit { bits: u64, hashes: u32 },
}

impl Sizing {
    pub(crate) fn size(&self) -> Result<Size, crate::error::Failure> {
        match (self.items, self.fpr, self.bits, self.hashes) {
            (Some(items), Some(fpr), None, None) => Ok(Size::Planned { items, fpr }),
            (None, None, Some(bits), Some(hashes)) => Ok(Size::Explicit { bits, hashes }),
            _ => Err(crate::error::Failure::usage(
                "give either --items N --fpr P or --bits M --hashes K",
            )),
        }
    }
}

#[derive(Args)]
#[command(after_long_help = KEY_FILES)]
pub(crate) struct AddArgs {
    /// The snapshot to update.
    pub(crate) snapshot: PathBuf,
    /// Keys to insert (in addition to --keys).
    pub(crate) keys: Vec<String>,
    #[command(flatten)]
    pub(crate) input: KeyInput,
    /// Dataset generation to record (default: keep the current one).
    #[arg(long)]
    pub(crate) generation: Option<u64>,
    #[command(flatten)]
    pub(crate) limit: SizeLimit,
    #[command(flatten)]
    pub(crate) lock: LockWait,
    #[command(flatten)]
    pub(crate) full: OnFull,
}

#[derive(Args)]
#[command(after_long_help = KEY_FILES)]
pub(crate) struct RemoveArgs {
    /// The counting snapshot to update.
    pub(crate) snapshot: PathBuf,
    /// Keys to remove (in addition to --keys). Remove only keys that were inserted: a key
    /// that was never inserted but reads "maybe" (a false positive) would take a count from
    /// other keys, which could then be reported absent.
    pub(crate) keys: Vec<String>,
    #[command(flatten)]
    pub(crate) input: KeyInput,
    /// Dataset generation to record (default: keep the current one). A snapshot bound to a
    /// store loses the binding: its keys no longer follow the store's history.
    #[arg(long)]
    pub(crate) generation: Option<u64>,
    #[command(flatten)]
    pub(crate) limit: SizeLimit,
    #[command(flatten)]
    pub(crate) lock: LockWait,
}

#[derive(Args)]
#[command(after_long_help = KEY_FILES)]
pub(crate) struct CheckArgs {
    /// The snapshot to query (`-` for standard input).
    pub(crate) snapshot: PathBuf,
    /// Keys to check (in addition to --keys).
    pub(crate) keys: Vec<String>,
    #[command(flatten)]
    pub(crate) input: KeyInput,
    /// Print JSON Lines, one `{"key": ..., "answer": "maybe"|"absent"}` object per key (`key_hex`
    /// instead of `key` for keys that are not UTF-8). Text output escapes `\`, control
    /// characters and non-UTF-8 bytes in keys.
    #[arg(long)]
    pub(crate) json: bool,
    /// Exit 4 if any key is absent (like grep's status); errors keep their codes.
    #[arg(long)]
    pub(crate) exit_status: bool,
    #[command(flatten)]
    pub(crate) limit: SizeLimit,
}

#[derive(Args)]
pub(crate) struct InspectArgs {
    /// The snapshot to inspect (`-` for standard input).
    pub(crate) snapshot: PathBuf,
    /// Print JSON instead.
    #[arg(long)]
    pub(crate) json: bool,
    #[command(flatten)]
    pub(crate) limit: SizeLimit,
}

#[derive(Args)]
pub(crate) struct VerifyArgs {
    /// Snapshots to verify (`-` for standard input, once).
    #[arg(required = true)]
    pub(crate) snapshots: Vec<PathBuf>,
    /// Refuse snapshots whose payload is larger, without reading it (memory stays constant
    /// whatever the size; the limit bounds the time a tiny sparse file claiming a huge
    /// payload can take).
    #[arg(long, value_name = "BYTES", default_value = "1G", value_parser = parse_size)]
    pub(crate) max_bytes: u64,
    /// Print one JSON object per file (`path`, `status`, `detail`) instead.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Args)]
pub(crate) struct ImportArgs {
    /// The form of the input.
    #[arg(long, value_enum)]
    pub(crate) from: ImportForm,
    /// With --from guava (required there): the funnel the JVM side hashed keys with. A wrong
    /// funnel answers "absent" for keys that are there.
    #[arg(long, value_enum)]
    pub(crate) funnel: Option<Funnel>,
    /// With --from parquet (required there): the column, by dotted path or unique name. The
    /// snapshot's key encoding follows the column's type: utf8 for strings, bytes (the plain
    /// encoding: little-endian integers and floats) for the others.
    #[arg(long, value_name = "NAME")]
    pub(crate) column: Option<String>,
    /// With --from parquet (required there): the row group whose filter to import.
    #[arg(long, value_name = "N")]
    pub(crate) row_group: Option<usize>,
    /// The file (`-` for standard input; a Parquet file must be a path).
    pub(crate) input: PathBuf,
    #[command(flatten)]
    pub(crate) limit: SizeLimit,
    /// Where to write the snapshot (`-` for standard output).
    #[arg(short, long, value_name = "PATH|-")]
    pub(crate) output: PathBuf,
    #[command(flatten)]
    pub(crate) lock: LockWait,
}

#[derive(Args)]
pub(crate) struct ExportArgs {
    /// The form to write.
    #[arg(long, value_enum)]
    pub(crate) to: Legacy,
    /// The snapshot (`-` for standard input).
    pub(crate) snapshot: PathBuf,
    #[command(flatten)]
    pub(crate) limit: SizeLimit,
    /// Where to write (`-` for standard output). An existing file is replaced only if it is
    /// empty or already in the form written (a 128-byte seed raw file; a Guava stream whose
    /// length agrees with its word count).
    #[arg(short, long, value_name = "PATH|-")]
    pub(crate) output: PathBuf,
    #[command(flatten)]
    pub(crate) lock: LockWait,
}

#[derive(Args)]
pub(crate) struct MeasureArgs {
    /// Keys to insert.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) items: u64,
    /// Target false-positive rate the filter is planned for, strictly between 0 and 1.
    #[arg(long, value_parser = parse_rate)]
    pub(crate) fpr: f64,
    /// Number of absent keys to query.
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) queries: u64,
    /// Seed that names the key sets.
    #[arg(long, default_value_t = 0)]
    pub(crate) seed: u64,
    /// Position rule. Default: the fastest for the layout (xxh3-64 for the split-block
    /// layouts, xxh3-128 for the others).
    #[arg(long)]
    pub(crate) rule: Option<PositionRule>,
    /// Layout: standard, blocked-512, split-block-256, split-block-512, sharded-v2-S (S
    /// shards), or sharded-S (the superseded sharded layout). Default: as `build`.
    #[arg(long)]
    pub(crate) layout: Option<Layout>,
    #[command(flatten)]
    pub(crate) limit: SizeLimit,
    /// Print JSON instead.
    #[arg(long)]
    pub(crate) json: bool,
}
