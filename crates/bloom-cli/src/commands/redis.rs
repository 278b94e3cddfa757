//! `bloom redis`: a filter held in Redis, Redis Cluster or a Sentinel-managed master.
//! Redis errors are never an answer: a damaged or lost filter is exit 1, Redis unreachable,
//! refusing or too slow is exit 3, a filter Redis may have lost writes of is exit 5 (with
//! the way out in the message).

use std::io::Read as _;
use std::path::Path;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use bloom_core::{FilterConfig, FilterParams, Layout, PositionRule};
use bloom_redis::{Durability, RedisFilter, RedisFilterError, RedisTarget};
use serde_json::json;

use crate::cli::{
    DurabilityArgs, RedisAddArgs, RedisAt, RedisCheckArgs, RedisCommand, RedisCreateArgs,
    RedisDeleteArgs, RedisExportArgs, RedisImportArgs, RedisInfoArgs, Size,
};
use crate::commands::{key_batches_of, require_keys};
use crate::error::{CmdResult, Exit, Failure};
use crate::output::{Answers, Out, encoding_json, layout_of, number, rule_json, show};

/// Shards when none are asked for: 16, or enough to keep each under 256 MiB.
const DEFAULT_SHARDS: u32 = 16;
const PREFERRED_SHARD_BYTES: u64 = 256 << 20;
/// Keys per call to the filter: it pipelines them 4096 to a batch, up to three batches in flight.
const KEYS_PER_CALL: usize = 1 << 16;
/// The environment variable read when no URL is given.
const URL_VARIABLE: &str = "BLOOM_REDIS_URL";
/// The longest URL file read.
const MAX_URL_FILE: u64 = 64 << 10;

/// When the command started: `--timeout` counts from here.
static STARTED: OnceLock<Instant> = OnceLock::new();

pub(crate) fn run(command: &RedisCommand) -> CmdResult<u8> {
    STARTED.get_or_init(Instant::now);
    let done = |r: CmdResult| r.map(|()| 0);
    match command {
        RedisCommand::Create(args) => done(create(args)),
        RedisCommand::Add(args) => done(add(args)),
        RedisCommand::Check(args) => check(args),
        RedisCommand::Export(args) => done(export(args)),
        RedisCommand::Import(args) => done(import(args)),
        RedisCommand::Info(args) => done(info(args)),
        RedisCommand::Delete(args) => done(delete(args)),
    }
}

/// The URLs: --url, --url-env, --url-file, or $BLOOM_REDIS_URL. No message repeats them.
fn urls(at: &RedisAt) -> CmdResult<Vec<String>> {
    let split = |text: &str| -> Vec<String> {
        text.lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .flat_map(str::split_whitespace)
            .map(str::to_owned)
            .collect()
    };
    let (urls, from) = if !at.url.is_empty() {
        (at.url.clone(), "--url".to_owned())
    } else if let Some(var) = &at.url_env {
        let value = std::env::var(var).map_err(|e| {
            Failure::usage(format!(
                "--url-env {var}: the variable is {}",
                match e {
                    std::env::VarError::NotPresent => "not set",
                    std::env::VarError::NotUnicode(_) => "not UTF-8",
                }
            ))
        })?;
        (split(&value), format!("--url-env {var}"))
    } else if let Some(path) = &at.url_file {
        (
            split(&read_url_file(at, path)?),
            format!("--url-file {}", path.display()),
        )
    } else if let Ok(value) = std::env::var(URL_VARIABLE) {
        (split(&value), format!("${URL_VARIABLE}"))
    } else {
        return Err(Failure::usage(format!(
            "where is the filter? give --url URL, --url-env VAR or --url-file PATH (or set {URL_VARIABLE})"
        )));
    };
    if urls.is_empty() {
        return Err(Failure::usage(format!("{from} holds no URL")));
    }
    if urls.len() > 1 && !at.cluster && at.sentinel.is_none() {
        return Err(Failure::usage(format!(
            "{from} gives {} URLs: several are for --cluster (nodes) or --sentinel MASTER (Sentinels)",
            urls.len()
        )));
    }
    Ok(urls)
}

/// A URL file: a regular file (or a pipe) of at most 64 KiB of UTF-8.
fn read_url_file(at: &RedisAt, path: &Path) -> CmdResult<String> {
    let name = path.display();
    let bytes = read_small_file(at, path, MAX_URL_FILE, "--url-file")?;
    String::from_utf8(bytes).map_err(|_| Failure::usage(format!("--url-file {name} is not UTF-8")))
}

/// Reads a small file given by `flag` (a URL file, a CA file): at most `limit` bytes, within
/// the command's deadline (its `--timeout`, or the default wait on Redis), so that a named pipe
/// nobody writes to, or a slow one, ends the command instead of hanging it. A directory or
/// a file over the limit is a usage error.
fn read_small_file(at: &RedisAt, path: &Path, limit: u64, flag: &str) -> CmdResult<Vec<u8>> {
    let name = path.display().to_string();
    if std::fs::metadata(path).is_ok_and(|m| m.is_dir()) {
        return Err(Failure::usage(format!("{flag} {name} is a directory")));
    }
    let wait = at
        .timeout
        .map_or(bloom_redis::DEFAULT_TIMEOUT, Duration::from_secs_f64);
    let started = *STARTED.get_or_init(Instant::now);
    let left = (started + wait).saturating_duration_since(Instant::now());
    let (tx, rx) = std::sync::mpsc::channel();
    let owned = path.to_path_buf();
    // On a thread of its own: opening a named pipe blocks until a writer comes. Given up on
    // at the deadline (the process then ends, and the thread with it).
    std::thread::spawn(move || {
        let read = std::fs::File::open(&owned).and_then(|file| {
            let mut bytes = Vec::new();
            file.take(limit + 1).read_to_end(&mut bytes).map(|_| bytes)
        });
        let _ = tx.send(read);
    });
    let bytes = match rx.recv_timeout(left) {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(e)) => return Err(Failure::environment(format!("{flag} {name}: {e}"))),
        Err(_) => {
            return Err(Failure::environment(format!(
                "{flag} {name}: nothing to read within {} s (a named pipe nobody writes to?)",
                wait.as_secs_f64()
            )));
        }
    };
    if bytes.len() as u64 > limit {
        return Err(Failure::usage(format!(
            "{flag} {name} is over {} KiB: not such a file",
            limit >> 10
        )));
    }
    Ok(bytes)
}

fn target(at: &RedisAt) -> CmdResult<RedisTarget> {
    let urls = urls(at)?;
    let target = match &at.sentinel {
        Some(master) => RedisTarget::sentinel(urls, master.clone()),
        None if at.cluster => RedisTarget::cluster(urls),
        None => RedisTarget::single(urls.into_iter().next().unwrap_or_default()),
    };
    let target = match at.timeout {
        Some(seconds) => {
            let timeout = Duration::from_secs_f64(seconds);
            let started = *STARTED.get_or_init(Instant::now);
            target
                .with_timeout(timeout)
                .with_deadline(started + timeout)
        }
        None => target.with_timeout(bloom_redis::DEFAULT_TIMEOUT),
    };
    let target = target.with_module(at.module);
    match &at.tls_ca {
        Some(path) => Ok(target.with_tls_ca(read_small_file(at, path, 1 << 20, "--tls-ca")?)),
        None => Ok(target),
    }
}

fn failure(at: &RedisAt, error: &RedisFilterError) -> Failure {
    let name = &at.name;
    match error {
        RedisFilterError::InvalidName { .. }
        | RedisFilterError::NotSharded { .. }
        | RedisFilterError::ShardTooLarge { .. }
        | RedisFilterError::InvalidUrl { .. }
        | RedisFilterError::TlsUnavailable => Failure::usage(error),
        RedisFilterError::Unverified { .. } => Failure::unverified(error),
        // A key of the filter holding another type: retyped by hand or by another program,
        // so the filter is damaged (as a lost shard is), not Redis failing.
        RedisFilterError::Server { code, .. } if code == "WRONGTYPE" => Failure::input(format!(
            "redis filter {name}: {error}: a key of the filter holds another type (the filter is damaged; delete it and create it again)"
        )),
        RedisFilterError::Timeout { .. } => Failure::environment(match at.timeout {
            Some(seconds) => format!(
                "redis filter {name}: the command did not finish within --timeout {seconds} s (Redis is slow, stopped or unreachable, or the keys came slowly); nothing more was answered"
            ),
            None => format!(
                "redis filter {name}: {error} (Redis is slow, stopped or unreachable; --timeout SECONDS gives the whole command longer)"
            ),
        }),
        RedisFilterError::Redis(_)
        | RedisFilterError::Server { .. }
        | RedisFilterError::NotAcknowledged { .. }
        | RedisFilterError::NotDurable { .. }
        | RedisFilterError::NodeChanged
        | RedisFilterError::TooLarge { .. }
        | RedisFilterError::Unavailable(_)
        | RedisFilterError::ModuleMissing
        | RedisFilterError::TlsCa(_) => {
            Failure::environment(format!("redis filter {name}: {error}"))
        }
        // These carry no name of their own.
        RedisFilterError::Protocol(_) | RedisFilterError::Key(_) => {
            Failure::input(format!("redis filter {name}: {error}"))
        }
        _ => Failure::input(error),
    }
}

fn open(at: &RedisAt) -> CmdResult<RedisFilter> {
    RedisFilter::open(&target(at)?, &at.name).map_err(|e| failure(at, &e))
}

fn durability(args: &DurabilityArgs) -> Durability {
    let timeout_ms = (args.durable_timeout * 1000.0).ceil() as u64;
    match (args.replicas, args.aof) {
        (Some(replicas), _) => Durability::Replicas {
            replicas,
            timeout_ms,
        },
        (None, true) => Durability::Aof { timeout_ms },
        (None, false) => Durability::None,
    }
}

fn create(args: &RedisCreateArgs) -> CmdResult {
    let rule = args.rule.unwrap_or(if args.salt.is_empty() {
        PositionRule::Xxh3_128
    } else {
        PositionRule::Sha256Double
    });
    let layout_for = |bits: u64| -> CmdResult<Layout> {
        let shards = args.shards.unwrap_or_else(|| {
            let needed = (bits / 8).div_ceil(PREFERRED_SHARD_BYTES);
            u32::try_from(needed)
                .unwrap_or(u32::MAX)
                .clamp(DEFAULT_SHARDS, bloom_core::MAX_SHARDS)
        });
        Layout::sharded(shards).map_err(|e| Failure::usage(format!("invalid parameters: {e}")))
    };
    let params = match args.size.size()? {
        Size::Planned { items, fpr } => {
            let rough = FilterParams::for_false_positive_rate(items, fpr)
                .map_err(|e| Failure::usage(format!("invalid parameters: {e}")))?;
            let least = layout_for(rough.bits())?.shards();
            // Each shard grown to the allocation Redis makes for it anyway; without
            // --shards, the count (up to twice the least) that wastes least of it.
            let most = if args.shards.is_some() {
                least
            } else {
                least.saturating_mul(2).min(bloom_core::MAX_SHARDS)
            };
            bloom_redis::plan_for_allocator(rule, items, fpr, least..=most)
        }
        Size::Explicit { bits, hashes } => {
            FilterParams::with_layout(layout_for(bits)?, bits, hashes)
        }
    }
    .map_err(|e| Failure::usage(format!("invalid parameters: {e}")))?;
    if params.byte_len() > args.limit.max_bytes {
        return Err(Failure::usage(format!(
            "the filter would be {} bytes of Redis memory, over --max-bytes {}; raise --max-bytes to create it",
            params.byte_len(),
            args.limit.max_bytes
        )));
    }
    // The plan is recorded in the metadata, for `redis info` to judge the filter against.
    let plan = match args.size.size()? {
        Size::Planned { items, fpr } => bloom_core::Plan::new(items, fpr),
        Size::Explicit { .. } => None,
    };
    let config = FilterConfig::new(params)
        .with_plan(plan)
        .with_encoding(args.encoding)
        .with_salt(args.salt.clone())
        .and_then(|c| c.with_rule(rule))
        .map_err(|e| Failure::usage(format!("invalid parameters: {e}")))?;
    let filter = RedisFilter::create_with(
        &target(&args.at)?,
        &args.at.name,
        config,
        durability(&args.durability),
    )
    .map_err(|e| failure(&args.at, &e))?;
    let c = filter.config();
    crate::warn(&format!(
        "created redis filter {}: m = {}, k = {}, {}, {}, {}, durability {}",
        args.at.name,
        c.bits(),
        c.hashes(),
        c.layout(),
        c.rule(),
        c.encoding(),
        durability_text(filter.durability()),
    ));
    Ok(())
}

fn durability_text(durability: Durability) -> String {
    match durability {
        Durability::Replicas {
            replicas,
            timeout_ms,
        } => format!("{replicas} replicas (WAIT, {timeout_ms} ms)"),
        Durability::Aof { timeout_ms } => {
            format!("aof (WAITAOF or appendfsync always, {timeout_ms} ms)")
        }
        _ => "none".to_owned(),
    }
}

fn add(args: &RedisAddArgs) -> CmdResult {
    let keys = &args.keys;
    require_keys(&keys.keys, &keys.input)?;
    let mut filter = open(&keys.at)?;
    if let Some(replicas) = args.replicas {
        filter.require_replica_acks(
            replicas as usize,
            Duration::from_secs_f64(args.replicas_timeout),
        );
    }
    let at = &keys.at;
    let mut changed = 0u64;
    // `--complete` adds every key again through a restore, which then declares the filter
    // whole; otherwise the keys are inserted.
    let mut restore = args.complete.then(|| filter.restore());
    key_batches_of(
        KEYS_PER_CALL,
        filter.config(),
        &keys.keys,
        &keys.input,
        |_, encoded| {
            changed += match &mut restore {
                Some(restore) => restore.add(encoded.encoded()),
                None => filter.insert_all(encoded.encoded()),
            }
            .map_err(|e| failure(at, &e))?;
            Ok(())
        },
    )?;
    match restore {
        Some(restore) => {
            restore.finish(None).map_err(|e| failure(at, &e))?;
            crate::warn(&format!(
                "{changed} keys changed the filter; redis filter {} is declared whole",
                at.name
            ));
        }
        None => crate::warn(&format!("{changed} keys changed the filter")),
    }
    Ok(())
}

fn check(args: &RedisCheckArgs) -> CmdResult<u8> {
    let keys = &args.keys;
    require_keys(&keys.keys, &keys.input)?;
    crate::progress::reports_on_stdout();
    let filter = open(&keys.at)?;
    let at = &keys.at;
    let mut answers = Answers::new(args.json);
    key_batches_of(
        KEYS_PER_CALL,
        filter.config(),
        &keys.keys,
        &keys.input,
        |originals, encoded| {
            // With other Unicode tables the answer depends on the raw key (ASCII keys are
            // exact), as for a local filter; otherwise the encoded batch is asked.
            let maybe = if filter.config().has_foreign_tables() {
                filter.contains_each(originals.keys())
            } else {
                filter.contains_each(encoded.encoded())
            }
            .map_err(|e| failure(at, &e))?;
            for (key, maybe) in originals.keys().zip(maybe) {
                answers.answer(key, maybe)?;
            }
            Ok(())
        },
    )?;
    let any_absent = answers.finish()?;
    Ok(if args.exit_status && any_absent {
        Exit::Absent as u8
    } else {
        0
    })
}

fn export(args: &RedisExportArgs) -> CmdResult {
    let filter = open(&args.at)?;
    let to_stdout = crate::files::is_stdio(&args.output) || args.output == Path::new("/dev/stdout");
    if !to_stdout {
        return export_to(&filter, &args.at, &args.output);
    }
    if std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        return Err(Failure::usage(
            "standard output is a terminal: redirect it to a file or a pipe to write a snapshot there",
        ));
    }
    // A snapshot's header carries the payload's checksum, known only once every shard was
    // read: the export goes to a file in a private directory first, then to standard output.
    let dir = private_dir()?;
    let path = dir.join("export.bloom");
    let exported = export_to(&filter, &args.at, &path).and_then(|()| {
        let mut file = std::fs::File::open(&path)
            .map_err(|e| Failure::environment(format!("cannot read back the export: {e}")))?;
        std::io::copy(&mut file, &mut std::io::stdout().lock())
            .map(|_| ())
            .map_err(|e| Failure::file_to_stdout(&e))
    });
    let _ = std::fs::remove_dir_all(&dir);
    exported
}

fn export_to(filter: &RedisFilter, at: &RedisAt, path: &Path) -> CmdResult {
    filter
        .export(path)
        .map_err(|e| match e {
            RedisFilterError::Write(e) => crate::files::write_failure(e),
            other => failure(at, &other),
        })
        .map(|_| ())
}

/// A new directory only this user can enter, under the system's temporary directory.
fn private_dir() -> CmdResult<std::path::PathBuf> {
    let base = std::env::temp_dir();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    for attempt in 0..16u32 {
        let dir = base.join(format!(
            "bloom-export-{}-{nanos}-{attempt}",
            std::process::id()
        ));
        let mut builder = std::fs::DirBuilder::new();
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        match builder.create(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => {
                return Err(Failure::environment(format!(
                    "cannot make a temporary directory in {}: {e}",
                    base.display()
                )));
            }
        }
    }
    Err(Failure::environment(format!(
        "cannot make a temporary directory in {}: every name was taken",
        base.display()
    )))
}

fn import(args: &RedisImportArgs) -> CmdResult {
    let options = bloom_format::DecodeOptions::with_max_payload_len(args.limit.max_bytes);
    let reader = crate::files::open_input(&args.snapshot, &options)
        .map_err(|e| crate::files::read_failure(&args.snapshot, &e))?;
    if reader.header().layout == bloom_format::LayoutId::Scalable {
        return Err(Failure::input(format!(
            "{}: a scalable filter (a chain of stages) cannot be held in Redis, whose filters are one sharded filter each: build the keys into a sharded one (`bloom build --layout sharded-v2-S`) or `bloom redis create` one and `bloom redis add` them",
            crate::files::shown(&args.snapshot)
        )));
    }
    RedisFilter::import_from(
        &target(&args.at)?,
        &args.at.name,
        reader,
        durability(&args.durability),
    )
    .map_err(|e| match e {
        RedisFilterError::Read(e) => crate::files::read_failure(&args.snapshot, &e),
        other => failure(&args.at, &other),
    })
    .map(|_| ())
}

fn info(args: &RedisInfoArgs) -> CmdResult {
    let filter = open(&args.at)?;
    let info = filter.info().map_err(|e| failure(&args.at, &e))?;
    let h = &info.header;
    let c = filter.config();
    let mut out = Out::new();
    if args.json {
        let value = json!({
            "name": args.at.name,
            "bit_count": h.bit_count,
            "hash_count": h.hash_count,
            "position_rule": rule_json(h.position_rule),
            "layout": layout_of(c.layout()),
            "key_encoding": encoding_json(h.key_encoding.id, h.key_encoding.version),
            "salted": !h.salt.is_empty(),
            "dataset_generation": h.dataset_generation.get(),
            "item_count": h.item_count,
            "store_identity": h.store.map(|b| b.identity.to_string()),
            "history_digest": h.store.map(|b| b.history.to_string()),
            "unicode_version_normalization": h.key_encoding.normalization_unicode.map(|v| v.to_string()),
            "unicode_version_casing": h.key_encoding.casing_unicode.map(|v| v.to_string()),
            "unicode_tables_match_this_build": !c.has_foreign_tables(),
            "set_bits": info.set_bits,
            "fill_ratio": number(bloom_core::estimate::fill_ratio(info.set_bits, h.bit_count)),
            "estimated_items": number(info.estimated_items),
            "estimated_false_positive_rate": number(info.estimated_false_positive_rate),
            "durability": durability_json(info.durability),
            "shards_intact": true,
            "planned_capacity": h.plan.map(|p| p.capacity),
            "target_false_positive_rate": h.plan.map(|p| number(p.false_positive_rate)),
            "false_positive_rate_limit": info.capacity.map(|c| number(c.rate_limit)),
            "remaining_capacity": info.capacity.map(|c| c.remaining()),
            "over_capacity": info.capacity.map(|c| c.is_over()),
        });
        out.text(&format!("{value:#}\n"))?;
    } else {
        out.text(&format!(
            "name: {}\nbit count (m): {}\npositions per key (k): {}\nposition rule: {}\nlayout: {}\nkey encoding: {} v{}\nsalted: {}\ndataset generation: {}\nitem count: {}\nstore identity: {}\nunicode tables: {}\nset bits: {}\nfill ratio: {}\nestimated items: {}\nestimated false-positive rate: {}\n{}durability: {}\nshards: intact\n",
            args.at.name,
            h.bit_count,
            h.hash_count,
            h.position_rule,
            c.layout(),
            h.key_encoding.id,
            h.key_encoding.version,
            if h.salt.is_empty() { "no" } else { "yes" },
            h.dataset_generation,
            h.item_count,
            h.store.map_or_else(|| "none".to_owned(), |b| b.identity.to_string()),
            if c.has_foreign_tables() {
                "differ from this build's (or are not recorded): keys outside ASCII answer maybe"
            } else {
                "this build's"
            },
            info.set_bits,
            show(bloom_core::estimate::fill_ratio(info.set_bits, h.bit_count)),
            show(info.estimated_items),
            show(info.estimated_false_positive_rate),
            info.capacity.map_or_else(
                || "capacity: not recorded (created without --items and --fpr)\n".to_owned(),
                |c| format!(
                    "capacity: {} of {} items ({} remaining); estimated false-positive rate {} against a target of {}: {}\n",
                    c.items,
                    c.plan.capacity,
                    c.remaining(),
                    show(c.estimated_false_positive_rate),
                    show(c.plan.false_positive_rate),
                    if c.is_over() {
                        "OVER CAPACITY, rebuild it larger"
                    } else {
                        "within plan"
                    }
                )
            ),
            durability_text(info.durability),
        ))?;
    }
    out.flush()
}

fn delete(args: &RedisDeleteArgs) -> CmdResult {
    let existed = RedisFilter::delete(&target(&args.at)?, &args.at.name)
        .map_err(|e| failure(&args.at, &e))?;
    if !existed {
        return Err(Failure::input(format!(
            "no redis filter named {} (nothing deleted)",
            args.at.name
        )));
    }
    Ok(())
}

fn durability_json(durability: Durability) -> serde_json::Value {
    match durability {
        Durability::Replicas {
            replicas,
            timeout_ms,
        } => json!({"mode": "replicas", "replicas": replicas, "timeout_ms": timeout_ms}),
        Durability::Aof { timeout_ms } => json!({"mode": "aof", "timeout_ms": timeout_ms}),
        _ => json!({"mode": "none"}),
    }
}
