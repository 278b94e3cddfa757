//! The arguments of `bloom redis`: its commands, where the filter lives, and what a new
//! filter asks of every writer.

use std::path::PathBuf;

use bloom_core::{KeyEncoding, PositionRule, Salt};
use clap::{ArgGroup, Args, Subcommand};

use super::values::{parse_salt, parse_timeout};
use super::{KeyInput, SizeLimit, Sizing};

/// The `bloom redis` commands.
#[derive(Subcommand)]
pub(crate) enum RedisCommand {
    /// Create a filter in Redis (sized like `build`; sharded layout).
    Create(RedisCreateArgs),
    /// Insert keys (pipelined: one BITFIELD, or one BLOOM.MADD with the module, per shard per batch).
    Add(RedisAddArgs),
    /// Print `maybe<TAB>KEY` or `absent<TAB>KEY` for each key, as `bloom check` does.
    Check(RedisCheckArgs),
    /// Write the filter as a snapshot file, byte-identical to a local filter's.
    Export(RedisExportArgs),
    /// Load a snapshot file of the sharded layout into a new Redis filter.
    Import(RedisImportArgs),
    /// Print the filter's metadata, set bits and estimates; checks every shard.
    Info(RedisInfoArgs),
    /// Delete the filter: its metadata and every shard.
    Delete(RedisDeleteArgs),
}

/// Where the filter lives.
#[derive(Args)]
pub(crate) struct RedisAt {
    /// Redis URL: `redis://[[user]:password@]host:port/db`, or `rediss://` for TLS. With
    /// --cluster, any node of the cluster; with --sentinel, a Sentinel (repeat for more).
    /// Never printed, but visible to anyone who can list processes: a URL with a password
    /// belongs in --url-env or --url-file. Without any of the three, $BLOOM_REDIS_URL.
    #[arg(long, value_name = "URL", conflicts_with_all = ["url_env", "url_file"])]
    pub(crate) url: Vec<String>,
    /// Read the URL from this environment variable (several URLs separated by spaces).
    #[arg(long, value_name = "VAR", conflicts_with = "url_file")]
    pub(crate) url_env: Option<String>,
    /// Read the URL from this file: one URL per line, blank lines and `#` comments skipped
    /// (at most 64 KiB; keep it readable by its owner only).
    #[arg(long, value_name = "PATH")]
    pub(crate) url_file: Option<PathBuf>,
    /// The URLs are nodes of a Redis Cluster.
    #[arg(long, conflicts_with = "sentinel")]
    pub(crate) cluster: bool,
    /// The URLs are Redis Sentinels; the filter lives on the master they call MASTER (found
    /// again after a failover). The master is reached with the first URL's credentials,
    /// TLS and database.
    #[arg(long, value_name = "MASTER")]
    pub(crate) sentinel: Option<String>,
    /// Verify `rediss://` servers with this certificate authority (PEM) instead of the
    /// system's roots.
    #[arg(long, value_name = "FILE")]
    pub(crate) tls_ca: Option<PathBuf>,
    /// The filter's name: 1 to 200 of A-Z a-z 0-9 . _ -
    #[arg(long, value_name = "NAME")]
    pub(crate) name: String,
    /// Seconds the whole command may take, everything included (connecting, every batch,
    /// retries, redirects, reconnects): past it the command stops with exit 3. Without it,
    /// no single wait on Redis lasts more than 5 seconds.
    #[arg(long, value_name = "SECONDS", value_parser = parse_timeout)]
    pub(crate) timeout: Option<f64>,
    /// Whether to use the bloom Redis module's commands (keys hashed inside the server):
    /// auto (when the servers list it in MODULE LIST), never, or required (a command that
    /// reads or writes bits exits 3 without it). Both ways write the same bits.
    #[arg(long, value_name = "USE", default_value = "auto", value_parser = parse_module_use)]
    pub(crate) module: bloom_redis::ModuleUse,
}

fn parse_module_use(text: &str) -> Result<bloom_redis::ModuleUse, String> {
    text.parse()
}

/// What a filter asks of every writer (`redis create`, `redis import`).
#[derive(Args)]
pub(crate) struct DurabilityArgs {
    /// Every add waits (WAIT) until this many replicas have its writes, and fails
    /// otherwise; a failover to such a replica then loses nothing. Recorded in the filter.
    #[arg(long, value_name = "N", conflicts_with = "aof", value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub(crate) replicas: Option<u32>,
    /// Every add waits until its writes are in the server's append-only file on disk
    /// (WAITAOF on Redis 7.2+; before, the server must run `appendfsync always`); a restart
    /// then loses nothing. Recorded in the filter.
    #[arg(long)]
    pub(crate) aof: bool,
    /// How long an add waits for replicas or the disk, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 1.0, value_parser = parse_timeout)]
    pub(crate) durable_timeout: f64,
}

#[derive(Args)]
#[command(group(ArgGroup::new("size").required(true).args(["items", "bits"])))]
pub(crate) struct RedisCreateArgs {
    #[command(flatten)]
    pub(crate) at: RedisAt,
    #[command(flatten)]
    pub(crate) size: Sizing,
    /// Shards (Redis keys). By default, with --items and --fpr, the count from 16 to 32 (or
    /// more for a large filter: each shard is at most 512 MiB) whose shards waste least of
    /// the memory Redis's allocator rounds them to; 16 with --bits.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub(crate) shards: Option<u32>,
    /// Position rule: xxh3-128, or sha256-double (the default with --salt).
    #[arg(long)]
    pub(crate) rule: Option<PositionRule>,
    /// Key encoding.
    #[arg(long, default_value = "nfc")]
    pub(crate) encoding: KeyEncoding,
    /// Salt: `none`, `random`, or hex bytes (at most 32). Kept in the metadata hash: anyone
    /// who can read the Redis keys can read it.
    #[arg(long, default_value = "none", value_parser = parse_salt)]
    pub(crate) salt: Salt,
    #[command(flatten)]
    pub(crate) durability: DurabilityArgs,
    #[command(flatten)]
    pub(crate) limit: SizeLimit,
}

#[derive(Args)]
#[command(after_long_help = super::KEY_FILES)]
pub(crate) struct RedisKeysArgs {
    #[command(flatten)]
    pub(crate) at: RedisAt,
    /// Keys (in addition to --keys).
    pub(crate) keys: Vec<String>,
    #[command(flatten)]
    pub(crate) input: KeyInput,
}

#[derive(Args)]
pub(crate) struct RedisAddArgs {
    #[command(flatten)]
    pub(crate) keys: RedisKeysArgs,
    /// These are every key the filter should hold: add them, then declare the filter whole
    /// again. The way back for a filter Redis may have lost writes of (exit 5).
    #[arg(long)]
    pub(crate) complete: bool,
    /// Besides what the filter asks, wait (WAIT) until this many replicas have each batch.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub(crate) replicas: Option<u32>,
    /// How long to wait for the replicas of --replicas, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 1.0, value_parser = parse_timeout, requires = "replicas")]
    pub(crate) replicas_timeout: f64,
    #[command(flatten)]
    pub(crate) full: super::RedisOnFull,
}

#[derive(Args)]
pub(crate) struct RedisCheckArgs {
    #[command(flatten)]
    pub(crate) keys: RedisKeysArgs,
    /// Print JSON Lines, as `bloom check --json`.
    #[arg(long)]
    pub(crate) json: bool,
    /// Exit 4 if any key is absent.
    #[arg(long)]
    pub(crate) exit_status: bool,
}

#[derive(Args)]
pub(crate) struct RedisExportArgs {
    #[command(flatten)]
    pub(crate) at: RedisAt,
    /// The snapshot file to write (atomically; `-` for standard output).
    #[arg(short, long, value_name = "PATH|-")]
    pub(crate) output: PathBuf,
}

#[derive(Args)]
pub(crate) struct RedisImportArgs {
    /// The snapshot file (sharded layout; `-` for standard input).
    pub(crate) snapshot: PathBuf,
    #[command(flatten)]
    pub(crate) at: RedisAt,
    #[command(flatten)]
    pub(crate) durability: DurabilityArgs,
    #[command(flatten)]
    pub(crate) limit: SizeLimit,
}

#[derive(Args)]
pub(crate) struct RedisInfoArgs {
    #[command(flatten)]
    pub(crate) at: RedisAt,
    /// Print JSON instead.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Args)]
pub(crate) struct RedisDeleteArgs {
    #[command(flatten)]
    pub(crate) at: RedisAt,
}
