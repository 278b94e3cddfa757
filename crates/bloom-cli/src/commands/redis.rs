//! `bloom redis`: a filter held in Redis or Redis Cluster. Redis errors (unreachable, lost
//! shards, metadata that does not check) are bad input for the command: exit 1, naming the
//! cause; never an answer.

use std::time::Duration;

use bloom_core::{FilterConfig, FilterParams, Layout, PositionRule};
use bloom_redis::{RedisFilter, RedisFilterError, RedisTarget};
use serde_json::json;

use crate::cli::{
    RedisAt, RedisCheckArgs, RedisCommand, RedisCreateArgs, RedisDeleteArgs, RedisExportArgs,
    RedisImportArgs, RedisInfoArgs, RedisKeysArgs, Size,
};
use crate::commands::{key_batches, require_keys};
use crate::error::{CmdResult, Exit, Failure};
use crate::output::{Answers, Out, number, show};

/// Shards when none are asked for: 16, or enough to keep each under 256 MiB.
const DEFAULT_SHARDS: u32 = 16;
const PREFERRED_SHARD_BYTES: u64 = 256 << 20;

pub(crate) fn run(command: &RedisCommand) -> CmdResult<u8> {
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

fn target(at: &RedisAt) -> RedisTarget {
    let target = if at.cluster {
        RedisTarget::cluster(at.url.iter().cloned())
    } else {
        RedisTarget::single(at.url.first().cloned().unwrap_or_default())
    };
    target.with_timeout(Duration::from_secs_f64(at.timeout))
}

fn failure(name: &str, error: &RedisFilterError) -> Failure {
    match error {
        RedisFilterError::InvalidName { .. }
        | RedisFilterError::NotSharded { .. }
        | RedisFilterError::ShardTooLarge { .. } => Failure::usage(error),
        // These carry no name of their own.
        RedisFilterError::Redis(_)
        | RedisFilterError::Timeout { .. }
        | RedisFilterError::Protocol(_)
        | RedisFilterError::NotAcknowledged { .. }
        | RedisFilterError::Key(_) => Failure::input(format!("redis filter {name}: {error}")),
        _ => Failure::input(error),
    }
}

fn open(at: &RedisAt) -> CmdResult<RedisFilter> {
    RedisFilter::open(&target(at), &at.name).map_err(|e| failure(&at.name, &e))
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
            FilterParams::planned(layout_for(rough.bits())?, items, fpr, rule.max_hashes())
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
    let config = FilterConfig::new(params)
        .with_encoding(args.encoding)
        .with_salt(args.salt.clone())
        .and_then(|c| c.with_rule(rule))
        .map_err(|e| Failure::usage(format!("invalid parameters: {e}")))?;
    let filter = RedisFilter::create(&target(&args.at), &args.at.name, config)
        .map_err(|e| failure(&args.at.name, &e))?;
    let c = filter.config();
    crate::warn(&format!(
        "created redis filter {}: m = {}, k = {}, {}, {}, {}",
        args.at.name,
        c.bits(),
        c.hashes(),
        c.layout(),
        c.rule(),
        c.encoding()
    ));
    Ok(())
}

fn add(args: &RedisKeysArgs) -> CmdResult {
    require_keys(&args.keys, &args.input)?;
    let filter = open(&args.at)?;
    let name = &args.at.name;
    let mut changed = 0u64;
    key_batches(filter.config(), &args.keys, &args.input, |_, encoded| {
        changed += filter
            .insert_all_encoded(encoded.keys())
            .map_err(|e| failure(name, &e))?;
        Ok(())
    })?;
    crate::warn(&format!("{changed} keys changed the filter"));
    Ok(())
}

fn check(args: &RedisCheckArgs) -> CmdResult<u8> {
    let keys = &args.keys;
    require_keys(&keys.keys, &keys.input)?;
    let filter = open(&keys.at)?;
    let name = &keys.at.name;
    let mut answers = Answers::new(args.json);
    key_batches(
        filter.config(),
        &keys.keys,
        &keys.input,
        |originals, encoded| {
            let maybe = filter
                .contains_each_encoded(encoded.keys())
                .map_err(|e| failure(name, &e))?;
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
    filter
        .export(&args.output)
        .map_err(|e| match e {
            RedisFilterError::Write(e) => Failure::environment(e),
            other => failure(&args.at.name, &other),
        })
        .map(|_| ())
}

fn import(args: &RedisImportArgs) -> CmdResult {
    RedisFilter::import(
        &target(&args.at),
        &args.at.name,
        &args.snapshot,
        args.limit.max_bytes,
    )
    .map_err(|e| match e {
        RedisFilterError::Read(e) => crate::files::read_failure(&args.snapshot, &e),
        other => failure(&args.at.name, &other),
    })
    .map(|_| ())
}

fn info(args: &RedisInfoArgs) -> CmdResult {
    let filter = open(&args.at)?;
    let info = filter.info().map_err(|e| failure(&args.at.name, &e))?;
    let h = &info.header;
    let c = filter.config();
    let mut out = Out::new();
    if args.json {
        let value = json!({
            "name": args.at.name,
            "bit_count": h.bit_count,
            "hash_count": h.hash_count,
            "position_rule": h.position_rule.name(),
            "layout": c.layout().to_string(),
            "shards": c.layout().shards(),
            "key_encoding": {"name": h.key_encoding.id.name(), "version": h.key_encoding.version},
            "salted": !h.salt.is_empty(),
            "dataset_generation": h.dataset_generation.get(),
            "item_count": h.item_count,
            "store_identity": h.store.map(|b| b.identity.to_string()),
            "history_digest": h.store.map(|b| b.history.to_string()),
            "set_bits": info.set_bits,
            "estimated_items": number(info.estimated_items),
            "estimated_false_positive_rate": number(info.estimated_false_positive_rate),
            "shards_intact": true,
        });
        out.text(&format!("{value:#}\n"))?;
    } else {
        out.text(&format!(
            "name: {}\nbit count (m): {}\npositions per key (k): {}\nposition rule: {}\nlayout: {}\nkey encoding: {} v{}\nsalted: {}\ndataset generation: {}\nitem count: {}\nstore identity: {}\nset bits: {}\nestimated items: {}\nestimated false-positive rate: {}\nshards: intact\n",
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
            info.set_bits,
            show(info.estimated_items),
            show(info.estimated_false_positive_rate),
        ))?;
    }
    out.flush()
}

fn delete(args: &RedisDeleteArgs) -> CmdResult {
    let existed = RedisFilter::delete(&target(&args.at), &args.at.name, args.shards)
        .map_err(|e| failure(&args.at.name, &e))?;
    if !existed {
        return Err(Failure::input(format!(
            "no redis filter named {} (nothing deleted); if its creation was interrupted before its metadata was written, pass --shards S",
            args.at.name
        )));
    }
    Ok(())
}
