//! The module's commands: the arguments checked, the shard opened, the work of [`crate::shard`]
//! done on its bytes in place, the reply built. What a command changed is replicated as its
//! effect, in plain commands (`SETRANGE` of the changed bytes, `SET` and `APPEND` of a new
//! shard), so that replicas and the AOF never need the module: a replica without it would
//! otherwise drop the writes while acknowledging them.

use redis_module::{
    Context, KeyType, RedisError, RedisResult, RedisString, RedisValue, raw, redis_module,
};

use bloom_redis_protocol::config::{LAYOUTS, RULES};
use bloom_redis_protocol::module::{self, COUNTED};

use crate::shard::{self, CommandError, Mode, Plan};

fn refused(error: CommandError) -> RedisError {
    RedisError::String(format!("{} {error}", error.code()))
}

/// The plan for a command's shard: arguments 1 to 3 are the shard key, the creation, the
/// configuration text.
fn plan(args: &[RedisString]) -> Result<Plan, RedisError> {
    let [_, key, creation, config, ..] = args else {
        return Err(RedisError::WrongArity);
    };
    Plan::new(key.as_slice(), creation.as_slice(), config.as_slice()).map_err(refused)
}

fn markers_reply((head, tail): (i64, i64), more: usize) -> Vec<RedisValue> {
    let mut reply = Vec::with_capacity(2 + more);
    reply.push(RedisValue::Integer(head));
    reply.push(RedisValue::Integer(tail));
    reply
}

/// One byte per key, `1` or `0` (ASCII): a single bulk string costs the server one reply
/// where an integer per key would cost one each.
fn flags(all_set: impl Iterator<Item = bool>) -> RedisValue {
    RedisValue::StringBuffer(all_set.map(|set| if set { b'1' } else { b'0' }).collect())
}

/// The positions of the keys from argument 5 on, in the mode of argument 4.
fn key_positions(
    plan: &Plan,
    args: &[RedisString],
    adding: bool,
) -> Result<(Vec<u64>, Vec<bool>), RedisError> {
    let Some((mode, keys)) = args.get(4..).and_then(<[RedisString]>::split_first) else {
        return Err(RedisError::WrongArity);
    };
    let mode = Mode::parse(mode.as_slice()).map_err(refused)?;
    // Bounded before anything is allocated for the keys.
    let most = shard::MAX_POSITIONS / plan.hashes().max(1);
    if keys.len() > most {
        return Err(refused(CommandError::TooManyKeys { most }));
    }
    let mut positions = Vec::with_capacity(keys.len() * plan.hashes());
    let mut maybe = Vec::with_capacity(keys.len());
    plan.positions(
        keys.iter().map(RedisString::as_slice),
        mode,
        adding,
        &mut positions,
        &mut maybe,
    )
    .map_err(refused)?;
    Ok((positions, maybe))
}

/// `BLOOM.MADD shard creation config ENCODED|RAW key [key ...]`.
fn madd(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    if args.len() < 6 {
        return Err(RedisError::WrongArity);
    }
    let plan = plan(&args)?;
    let key = ctx.open_key_writable(&args[1]);
    match key.key_type() {
        KeyType::Empty => return Ok(RedisValue::Array(markers_reply((0, 0), 0))),
        KeyType::String => {}
        _ => return Err(RedisError::WrongType),
    }
    let mut value = key.as_string_dma()?;
    if !plan.is_whole(&value) {
        return Ok(RedisValue::Array(markers_reply(plan.markers(&value), 0)));
    }
    // Every key is checked (its shard, its encoding) before any bit is set.
    let (positions, _) = key_positions(&plan, &args, true)?;
    let mut all_set = Vec::with_capacity(args.len() - 5);
    let mut dirty = shard::Dirty::new(value.len());
    shard::set_bits(
        &mut value,
        &positions,
        plan.hashes(),
        &mut all_set,
        &mut dirty,
    );
    // A counted shard's write counter moves with its bits, in this one command.
    let counter = plan.advance(&mut value, &mut dirty);
    let mut reply = markers_reply(plan.markers(&value), 2);
    reply.push(flags(all_set.into_iter()));
    reply.extend(counter.map(RedisValue::Integer));
    for (start, end) in dirty.ranges(value.len()) {
        let offset = start.to_string();
        let bytes = value.get(start..end).unwrap_or_default();
        ctx.replicate(
            "SETRANGE",
            &[args[1].as_slice(), offset.as_bytes(), bytes][..],
        );
    }
    Ok(RedisValue::Array(reply))
}

/// `BLOOM.MEXISTS shard creation config ENCODED|RAW key [key ...]`.
fn mexists(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    if args.len() < 6 {
        return Err(RedisError::WrongArity);
    }
    let plan = plan(&args)?;
    let key = ctx.open_key(&args[1]);
    let value = match key.key_type() {
        KeyType::Empty => return Ok(RedisValue::Array(markers_reply((0, 0), 0))),
        KeyType::String => key.read()?.unwrap_or_default(),
        _ => return Err(RedisError::WrongType),
    };
    if !plan.is_whole(value) {
        return Ok(RedisValue::Array(markers_reply(plan.markers(value), 0)));
    }
    let (positions, maybe) = key_positions(&plan, &args, false)?;
    let mut all_set = Vec::with_capacity(args.len() - 5);
    shard::test_bits(value, &positions, plan.hashes(), &mut all_set);
    let mut reply = markers_reply(plan.markers(value), 2);
    reply.push(flags(
        all_set
            .iter()
            .zip(&maybe)
            .map(|(&set, &maybe)| set || maybe),
    ));
    reply.extend(plan.counter(value).map(RedisValue::Integer));
    Ok(RedisValue::Array(reply))
}

/// The most bytes the replicated `SET` of a new shard carries (`docs/format.md`: 8 MiB).
const WHOLE_SHARD_BYTES: usize = 8 << 20;

/// `BLOOM.RESERVE shard creation config [COUNTED]`: the shard made whole and empty, its
/// markers at both ends (and, with `COUNTED`, a write counter of 0 after them), replacing
/// whatever the key held (as the plain path's `SET` does) unless it is already this shard,
/// whole: that would empty a live filter's shard.
fn reserve(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    let counted = match args.get(4).map(RedisString::as_slice) {
        None if args.len() == 4 => false,
        Some(word) if word == COUNTED && args.len() == 5 => true,
        Some(_) if args.len() == 5 => return Err(refused(CommandError::Shape)),
        _ => return Err(RedisError::WrongArity),
    };
    let plan = plan(&args)?;
    let key = ctx.open_key_writable(&args[1]);
    if key.key_type() == KeyType::String && plan.is_whole(&key.as_string_dma()?) {
        return Err(refused(CommandError::Exists));
    }
    if !key.is_empty() {
        key.delete()?;
    }
    drop(key);
    // A new string of the shard's length, zeroed, allocated at that size (what
    // `RedisModule_StringTruncate` makes of an empty key): no buffer of that size in the
    // module, and none on the wire.
    let raw_key = raw::open_key(ctx.ctx, args[1].inner, raw::KeyMode::WRITE);
    let sized = raw::string_truncate(raw_key, plan.len_of(counted));
    raw::close_key(raw_key);
    if sized != raw::Status::Ok {
        return Err(RedisError::Str("ERR bloom: Redis refused the shard's size"));
    }
    let key = ctx.open_key_writable(&args[1]);
    let mut value = key.as_string_dma()?;
    plan.write_markers(&mut value);
    let markers = plan.markers(&value);
    // Replicated in plain commands: the whole value with SET, or for a shard over 8 MiB its
    // first 8 MiB and then the end marker (and the counter) by SETRANGE, which pads with
    // zeros (a copy of at most 8 MiB is held for replication, whatever the shard's size).
    let name = args[1].as_slice();
    let end = plan.len_of(counted) - plan.len_of(false) + 8;
    match (value.get(..WHOLE_SHARD_BYTES), value.len().checked_sub(end)) {
        (Some(first), Some(tail)) if value.len() > WHOLE_SHARD_BYTES => {
            ctx.replicate("SET", &[name, first][..]);
            let offset = tail.to_string();
            let marker = value.get(tail..).unwrap_or_default();
            ctx.replicate("SETRANGE", &[name, offset.as_bytes(), marker][..]);
        }
        _ => ctx.replicate("SET", &[name, &value[..]][..]),
    }
    Ok(RedisValue::Array(markers_reply(markers, 0)))
}

/// `BLOOM.SHARD shard creation config`: its markers, its length and its set bits (0 when
/// the markers are not the shard's).
fn shard_info(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    if args.len() != 4 {
        return Err(RedisError::WrongArity);
    }
    let plan = plan(&args)?;
    let key = ctx.open_key(&args[1]);
    let value = match key.key_type() {
        KeyType::Empty => &[][..],
        KeyType::String => key.read()?.unwrap_or_default(),
        _ => return Err(RedisError::WrongType),
    };
    let mut reply = markers_reply(plan.markers(value), 3);
    let length = i64::try_from(value.len()).unwrap_or(i64::MAX);
    let set = if plan.is_whole(value) {
        shard::count_bits(value, plan.shard_len())
    } else {
        0
    };
    reply.push(RedisValue::Integer(length));
    reply.push(RedisValue::Integer(i64::try_from(set).unwrap_or(i64::MAX)));
    reply.extend(plan.counter(value).map(RedisValue::Integer));
    Ok(RedisValue::Array(reply))
}

/// `BLOOM.INFO`: what this build of the module implements.
fn info(_: &Context, args: Vec<RedisString>) -> RedisResult {
    if args.len() != 1 {
        return Err(RedisError::WrongArity);
    }
    let names = |names: &[&str]| {
        RedisValue::Array(
            names
                .iter()
                .map(|n| RedisValue::BulkString((*n).to_owned()))
                .collect(),
        )
    };
    // The module's version (clients use commands of this protocol from version
    // `module::MIN_VERSION` on, those of counted shards from `module::MIN_COUNTED_VERSION`),
    // and the rules and layouts of every filter bloom-redis makes.
    let tables = bloom_core::KeyEncoding::NfcTrimLowercase.build_tables();
    let version = |v: Option<bloom_format::UnicodeVersion>| {
        RedisValue::BulkString(v.map(|v| v.to_string()).unwrap_or_default())
    };
    Ok(RedisValue::Array(vec![
        RedisValue::BulkString("version".into()),
        RedisValue::Integer(module::VERSION),
        RedisValue::BulkString("rules".into()),
        names(&RULES.map(bloom_format::PositionRuleId::name)),
        RedisValue::BulkString("layouts".into()),
        names(&LAYOUTS.map(bloom_format::LayoutId::name)),
        RedisValue::BulkString("encodings".into()),
        names(
            &bloom_format::KeyEncodingId::ALL
                .iter()
                .map(|e| e.name())
                .collect::<Vec<_>>(),
        ),
        RedisValue::BulkString("unicode_normalization".into()),
        version(tables.normalization),
        RedisValue::BulkString("unicode_casing".into()),
        version(tables.casing),
    ]))
}

redis_module! {
    name: module::NAME,
    version: module::VERSION,
    // The module's own allocations are a command's position buffers, freed before it
    // returns; the filters are Redis strings, in Redis's memory.
    allocator: (std::alloc::System, std::alloc::System),
    data_types: [],
    commands: [
        ["bloom.madd", madd, "write deny-oom", 1, 1, 1, ""],
        ["bloom.mexists", mexists, "readonly", 1, 1, 1, ""],
        ["bloom.reserve", reserve, "write deny-oom", 1, 1, 1, ""],
        ["bloom.shard", shard_info, "readonly", 1, 1, 1, ""],
        ["bloom.info", info, "readonly fast", 0, 0, 0, ""],
    ],
}
