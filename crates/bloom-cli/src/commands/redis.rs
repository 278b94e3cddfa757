//! `bloom redis`: a filter held in Redis, Redis Cluster or a Sentinel-managed master.
//! Redis errors are never an answer: a damaged or lost filter is exit 1, Redis unreachable,
//! refusing or too slow is exit 3, a filter Redis may have lost writes of is exit 5 (with
//! the way out in the message).

use std::collections::VecDeque;
use std::path::Path;
use std::time::Duration;

use bloom_core::{FilterConfig, FilterParams, Layout, PositionRule};
use bloom_redis::{Durability, RedisFilter, RedisFilterError};
use serde_json::json;

use crate::cli::{
    DurabilityArgs, RedisAddArgs, RedisAt, RedisCheckArgs, RedisCommand, RedisCreateArgs,
    RedisDeleteArgs, RedisExportArgs, RedisImportArgs, RedisInfoArgs, Size,
};
use crate::commands::redis_at::{self, failure, open, target};
use crate::commands::{KeyBatch, key_batches_of, require_keys};
use crate::error::{CmdResult, Exit, Failure};
use crate::output::{Answers, Out, encoding_json, layout_of, number, rule_json, show};

/// Shards when none are asked for: 16, or enough to keep each under 256 MiB.
const DEFAULT_SHARDS: u32 = 16;
const PREFERRED_SHARD_BYTES: u64 = 256 << 20;

pub(crate) fn run(command: &RedisCommand) -> CmdResult<u8> {
    redis_at::started();
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
    let name = format!("redis filter {}", at.name);
    // The plan the filter was created with (`create --items --fpr`), and the items counted
    // so far: `--strict` stops at the plan instead of going past it. A restore (`--complete`)
    // puts back keys that were counted already, and must put back every one of them.
    let plan = if args.complete {
        None
    } else {
        let header = filter.header().map_err(|e| failure(at, &e))?;
        header.plan.map(|plan| (plan, header.item_count))
    };
    if args.full.strict
        && let Some((plan, items)) = plan
    {
        // The estimate needs `info`'s rights (STRLEN, BITCOUNT); without them the count in
        // the header is the judge.
        let over_by_estimate = filter
            .info()
            .is_ok_and(|standing| standing.capacity.is_some_and(|c| c.is_over()));
        if over_by_estimate || items > plan.capacity {
            return Err(Failure::input(format!(
                "{name} is over its plan already ({items} items for a capacity of {}); --strict: nothing was added (create a larger filter and add every key to it, or leave out --strict)",
                plan.capacity
            )));
        }
    }
    // `--complete` adds every key again through a restore, which then declares the filter
    // whole; otherwise the keys are inserted. Either way the batches stream: each is sent as
    // it is read, up to three on the wire.
    let mut restore = args.complete.then(|| filter.restore());
    let mut inserted = filter.inserts();
    let inserts = match &mut restore {
        Some(restore) => restore.inserts(),
        None => &mut inserted,
    };
    let mut added = 0u64;
    let read = key_batches_of(
        inserts.batch_len(),
        filter.config(),
        &keys.keys,
        &keys.input,
        |batch| {
            let total = batch.len();
            // With --strict, no more keys than the plan has room for: known once every batch
            // before was read back.
            let room = match plan {
                Some((plan, items)) if args.full.strict && total > 0 => {
                    inserts.flush().map_err(|e| failure(at, &e))?;
                    usize::try_from(plan.capacity.saturating_sub(items + inserts.changed()))
                        .unwrap_or(usize::MAX)
                }
                _ => usize::MAX,
            };
            let take = total.min(room);
            if take > 0 {
                inserts
                    .send(batch.encoded().take(take))
                    .map_err(|e| failure(at, &e))?;
                added += take as u64;
            }
            if let (true, Some((plan, _))) = (take < total, plan) {
                inserts.flush().map_err(|e| failure(at, &e))?;
                return Err(Failure::input(format!(
                    "{name} reached its plan of {} items after {added} keys ({} new); --strict: the keys after those were not added (create a larger filter and add every key to it, or leave out --strict)",
                    plan.capacity,
                    inserts.changed()
                )));
            }
            Ok(())
        },
    );
    // The keys sent before a failure (a bad line, the plan reached) are in, counted and
    // durable before it is reported; a restore that failed declares nothing.
    let finished = match restore {
        Some(restore) if read.is_ok() => restore.finish(None),
        Some(restore) => restore.stop(),
        None => inserted.finish(),
    };
    read?;
    let changed = finished.map_err(|e| failure(at, &e))?;
    let s = if added == 1 { "" } else { "s" };
    if args.complete {
        crate::warn(&format!(
            "added {added} key{s} ({changed} new) to {name}; it is declared whole"
        ));
    } else {
        crate::warn(&format!("added {added} key{s} ({changed} new) to {name}"));
    }
    // Past its plan: judged as `bloom redis info` (and a local filter) judges it.
    if let Some((plan, _)) = plan
        && let Some(why) = over_plan(&filter, &name, plan)
    {
        let remedy = "create a larger filter and add every key to it";
        if args.full.strict {
            return Err(Failure::input(format!(
                "{why}; --strict: the keys are in ({remedy}, or leave out --strict)"
            )));
        }
        crate::warn(&format!(
            "warning: {why}; \"maybe\" answers will be more frequent than planned: {remedy}"
        ));
    }
    Ok(())
}

/// Why the filter is past `plan` now, or `None` if it is not. Judged as `bloom redis info`
/// judges it (the count and the estimate from the bits); a user without `info`'s rights
/// (STRLEN, BITCOUNT) is judged by the count in the header alone, and one who cannot read
/// even that is told the plan was not checked.
fn over_plan(filter: &RedisFilter, name: &str, plan: bloom_core::Plan) -> Option<String> {
    match filter.info() {
        Ok(info) => info.capacity.filter(bloom_core::Capacity::is_over).map(|c| {
            format!(
                "{name} is over its plan: {} items for a capacity of {}, estimated false-positive rate {} against a target of {}",
                c.items,
                c.plan.capacity,
                show(c.estimated_false_positive_rate),
                show(c.plan.false_positive_rate),
            )
        }),
        Err(info_failed) => match filter.header() {
            Ok(header) => (header.item_count > plan.capacity).then(|| {
                format!(
                    "{name} is over its plan: {} items for a capacity of {}",
                    header.item_count, plan.capacity
                )
            }),
            Err(_) => {
                crate::warn(&format!(
                    "warning: the keys are in, but {name}'s plan was not checked: {info_failed}"
                ));
                None
            }
        },
    }
}

fn check(args: &RedisCheckArgs) -> CmdResult<u8> {
    let keys = &args.keys;
    require_keys(&keys.keys, &keys.input)?;
    crate::progress::reports_on_stdout();
    let filter = open(&keys.at)?;
    let at = &keys.at;
    let mut answers = Answers::new(args.json).every_key(args.exit_status);
    let mut lookups = filter.lookups();
    let size = lookups.batch_len();
    // The keys as given of the batches on the wire, oldest first, and emptied ones to reuse.
    let mut sent: VecDeque<KeyBatch> = VecDeque::new();
    let mut spare: Vec<KeyBatch> = Vec::new();
    let answer = |maybe: Vec<bool>,
                  sent: &mut VecDeque<KeyBatch>,
                  spare: &mut Vec<KeyBatch>,
                  answers: &mut Answers| {
        let batch = sent
            .pop_front()
            .ok_or_else(|| Failure::environment("answers came back for no batch sent"))?;
        answers.answer_all(batch.given(), maybe)?;
        spare.push(batch);
        Ok::<(), Failure>(())
    };
    let read = key_batches_of(size, filter.config(), &keys.keys, &keys.input, |batch| {
        if batch.is_empty() {
            return Ok(());
        }
        // With other Unicode tables the answer depends on the raw key (ASCII keys are
        // exact), as for a local filter; otherwise the encoded batch is asked.
        let answered = if filter.config().has_foreign_tables() {
            lookups.send(batch.given())
        } else {
            lookups.send(batch.encoded())
        }
        .map_err(|e| failure(at, &e))?;
        let empty = spare.pop().unwrap_or_else(|| KeyBatch::with_size(size));
        sent.push_back(std::mem::replace(batch, empty));
        if let Some(maybe) = answered {
            answer(maybe, &mut sent, &mut spare, &mut answers)?;
        }
        Ok(())
    });
    // The keys read before a bad line are answered before it is reported.
    let drained = (|| {
        while let Some(maybe) = lookups.next_answers().map_err(|e| failure(at, &e))? {
            answer(maybe, &mut sent, &mut spare, &mut answers)?;
        }
        Ok::<(), Failure>(())
    })();
    read?;
    drained?;
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
            "observed_false_positives": info.observed.false_positives,
            "observed_absent_queries": info.observed.absent,
            "observed_false_positive_rate": info.observed.rate().map(number),
            "observed_over_target": info.capacity.map(|_| info.observed_over_target()),
        });
        out.text(&format!("{value:#}\n"))?;
    } else {
        out.text(&format!(
            "name: {}\nbit count (m): {}\npositions per key (k): {}\nposition rule: {}\nlayout: {}\nkey encoding: {} v{}\nsalted: {}\ndataset generation: {}\nitem count: {}\nstore identity: {}\nunicode tables: {}\nset bits: {}\nfill ratio: {}\nestimated items: {}\nestimated false-positive rate: {}\n{}{}durability: {}\nshards: intact\n",
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
            observed_text(&info),
            durability_text(info.durability),
        ))?;
    }
    out.flush()
}

/// The `measured false-positive rate` line of `bloom redis info`: what every process
/// measured (`SharedFilteredStore::metrics` records it), judged against the plan.
fn observed_text(info: &bloom_redis::Info) -> String {
    let observed = info.observed;
    let Some(rate) = observed.rate() else {
        return "measured false-positive rate: none measured yet (SharedFilteredStore::metrics records each process's)\n".to_owned();
    };
    let verdict = match info.capacity {
        None => "",
        Some(_) if info.observed_over_target() => {
            ": OVER THE TARGET by more than chance allows, rebuild it"
        }
        Some(_) => ": within chance of the target",
    };
    format!(
        "measured false-positive rate: {} ({} false positives of {} queries for absent keys, by every process){verdict}\n",
        show(rate),
        observed.false_positives,
        observed.absent,
    )
}

fn delete(args: &RedisDeleteArgs) -> CmdResult {
    let target = target(&args.at)?;
    // What is about to go, for the report (a filter whose metadata is gone still has its
    // shards deleted, by every name they could have).
    let shards = RedisFilter::open(&target, &args.at.name)
        .ok()
        .map(|f| f.config().layout().shards());
    let existed = RedisFilter::delete(&target, &args.at.name).map_err(|e| failure(&args.at, &e))?;
    if !existed {
        return Err(Failure::input(format!(
            "no redis filter named {} (nothing deleted)",
            args.at.name
        )));
    }
    crate::warn(&match shards {
        Some(shards) => format!(
            "deleted redis filter {}: its metadata ({}), {shards} shards and their epoch records",
            args.at.name,
            bloom_redis::meta_key(&args.at.name)
        ),
        None => format!(
            "deleted what was left of redis filter {} (its metadata was gone or damaged): every shard and epoch record it could have",
            args.at.name
        ),
    });
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
