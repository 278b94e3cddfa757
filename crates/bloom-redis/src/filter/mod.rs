//! [`RedisFilter`]: a sharded Bloom filter held in Redis: the handle, its metadata writes,
//! its shards' allocation and the nodes it records for them.
//!
//! Its life (creation, opening, deletion) is in `lifecycle.rs`, inserts and queries in
//! `bits/`, whole-filter checks and copies in `copy.rs`; the key scheme and the name rules
//! are `bloom_redis_protocol::keys`.

mod allocator;
mod bits;
mod copy;
mod counters;
mod coverage;
mod lifecycle;
mod observed;

pub use allocator::{fit_to_allocator, plan_for_allocator};
pub(crate) use counters::Seen;

pub(crate) use bits::ints;
pub use bits::{Inserts, Lookups, Restore};
pub use copy::Info;

use std::collections::HashSet;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use bloom_core::{FilterConfig, Layout};
use bloom_format::{DatasetGeneration, StoreBinding};
use bloom_redis_protocol::config::RULES;
use bloom_redis_protocol::coverage::coverage_fields;
use bloom_redis_protocol::epoch::WRITES_FIELD;
use bloom_redis_protocol::keys::{self, epoch_key, meta_key, shard_key};
use bloom_redis_protocol::marker::{MARKER_BYTES, ShardMarkers};
use bloom_redis_protocol::meta::{Creation, Durability};
use bloom_redis_protocol::module::COUNTED;
use bloom_redis_protocol::shard::{COUNTER_BYTES, MAX_SHARD_BYTES, ShardLayout};
use redis::Value;

use crate::connection::{Conn, RedisTarget};
use crate::epoch;
use crate::error::RedisFilterError;
use crate::module::{self, ModuleUse};
use crate::wire::Commands;

/// The bytes of a new (counted) shard besides its bits: both markers and the counter.
pub(crate) const SHARD_FRAME_BYTES: u64 = 2 * MARKER_BYTES + COUNTER_BYTES;
/// A shard is created with one `SET` up to this size, and grown with `APPEND` past it (Redis
/// then over-allocates by at most 1 MiB).
const WHOLE_SHARD_BYTES: u64 = 8 << 20;
/// Shards per pipeline of shard commands.
pub(crate) const SHARDS_PER_PIPELINE: u32 = 256;

/// Checks a filter name by the protocol's rules ([`keys::check_name`]).
pub(crate) fn check_name(name: &str) -> Result<(), RedisFilterError> {
    keys::check_name(name).map_err(|_| RedisFilterError::InvalidName {
        name: name.to_owned(),
    })
}

/// Checks that `config` can be held in Redis; returns the shard count and bits per shard.
pub(crate) fn shard_geometry(config: &FilterConfig) -> Result<(u32, u64), RedisFilterError> {
    let (Layout::Sharded { shards } | Layout::ShardedV2 { shards }) = config.layout() else {
        return Err(RedisFilterError::NotSharded {
            layout: config.layout().to_string(),
            rule: config.rule().to_string(),
        });
    };
    if !RULES.contains(&config.rule().id()) {
        return Err(RedisFilterError::NotSharded {
            layout: config.layout().to_string(),
            rule: config.rule().to_string(),
        });
    }
    let shard_bits = config.bits() / u64::from(shards);
    if !ShardLayout::new(shard_bits).fits(true) {
        let per_shard = (MAX_SHARD_BYTES - SHARD_FRAME_BYTES) * 8;
        return Err(RedisFilterError::ShardTooLarge {
            shard_bits,
            needed: config.bits().div_ceil(per_shard),
        });
    }
    Ok((shards, shard_bits))
}

/// A Bloom filter held in Redis (one server, a Redis Cluster, or a Sentinel-managed master)
/// in the sharded layout: `S` shard keys of `m / S` bits each between two 64-bit markers, an
/// epoch record beside each shard, and a metadata hash that holds what a snapshot header
/// holds.
///
/// - **A key's bits in one shard, on one node**: a batch of keys is one `BITFIELD` per shard
///   it touches, pipelined (one round trip per node); cluster redirects (`MOVED`, `ASK`) are
///   followed inside the pipeline, so a reshard fails no call.
/// - **Lost state is detected, never answered from**: every command reads the shard's two
///   markers (derived from the creation id, the configuration and the shard's number) in
///   the same step. A shard that is missing, was emptied (`FLUSHALL`, a Redis restarted
///   without persistence), truncated, renamed or copied from another shard, belongs to a
///   filter created since, or is read with edited metadata, reads another marker, and the
///   operation fails with [`RedisFilterError::LostState`].
/// - **Lost writes are detected, never answered from**: the node answering for a shard is
///   judged against the shard's epoch record (see the `epoch` module's table): a restart or a
///   failover since the filter last knew the shard whole may have lost acknowledged writes,
///   and the operation fails with [`RedisFilterError::Unverified`], unless the filter's
///   [`Durability`] made every write survive it. [`RedisFilter::restore_whole`] adds every
///   key again and records the nodes.
/// - **Durability on request**: [`Durability::Replicas`] makes every insert wait for replicas
///   (`WAIT`), [`Durability::Aof`] for the AOF's fsync (`WAITAOF`, or `appendfsync always`);
///   [`RedisFilter::require_replica_acks`] asks it of one handle.
/// - **One deadline per operation**: [`RedisTarget::with_timeout`] bounds a whole call,
///   retries and reconnects included.
/// - **Bit-exact with the snapshot format**: [`RedisFilter::export`] writes the snapshot a
///   local filter with the same configuration and keys would write; [`RedisFilter::import`]
///   loads one back. Redis numbers bits from the most significant bit of each byte, the
///   snapshot format from the least significant; the copy reverses each byte.
pub struct RedisFilter {
    pub(crate) target: RedisTarget,
    conn: Mutex<Conn>,
    pub(crate) name: String,
    pub(crate) config: FilterConfig,
    pub(crate) creation: Creation,
    pub(crate) markers: ShardMarkers,
    /// The configuration as the `bloom` module takes it (`bloom_redis_protocol::config`).
    pub(crate) config_text: String,
    /// Whether batches use the `bloom` module's commands (see [`crate::ModuleUse`]).
    pub(crate) module: AtomicBool,
    pub(crate) shard_bits: u64,
    pub(crate) shards: u32,
    pub(crate) durability: Durability,
    pub(crate) acks: Option<(usize, Duration)>,
    /// The shards whose node was judged on the connection that answered (by serial).
    pub(crate) verified: Mutex<HashSet<(u64, u32)>>,
    /// The shards this handle has read both markers of (`BITFIELD_RO`) before its first
    /// write to them: a write to a shard whose markers are not the filter's (edited
    /// metadata, a deleted or replaced key) would grow or recreate the key.
    pub(crate) marked: Mutex<HashSet<u32>>,
    /// The metadata says (schema 3 or 5) that keys of other Unicode tables than the
    /// recorded ones went in; set before the first such key's bits.
    pub(crate) tables_mixed: AtomicBool,
    /// Every shard ends with a write counter (schema 4 or 5; every filter this build makes).
    pub(crate) counted: bool,
    /// The highest write count this process has seen of each shard (shared by every handle
    /// of the process on this filter).
    pub(crate) seen: std::sync::Arc<counters::Seen>,
}

/// Names the filter and its size; never its salt, URLs or bits.
impl fmt::Debug for RedisFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisFilter")
            .field("name", &self.name)
            .field("target", &self.target)
            .field("config", &self.config)
            .field("shards", &self.shards)
            .field("durability", &self.durability)
            .finish_non_exhaustive()
    }
}

pub(crate) fn int(value: &Value) -> Result<i64, RedisFilterError> {
    match value {
        Value::Int(n) => Ok(*n),
        other => Err(RedisFilterError::Protocol(format!(
            "expected an integer, got {}",
            kind_of(other)
        ))),
    }
}

/// A reply's kind, for messages (never its contents, which may be large or hostile).
pub(crate) fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Nil => "nil",
        Value::Int(_) => "an integer",
        Value::BulkString(_) => "a string",
        Value::Array(_) => "an array",
        Value::SimpleString(_) => "a status",
        Value::Okay => "OK",
        Value::Map(_) => "a map",
        Value::ServerError(_) => "an error",
        _ => "another kind of reply",
    }
}

/// `HSET` of `ARGV[2..]` on `KEYS[1]` only if its `creation` is `ARGV[1]`; -1 otherwise.
pub(crate) const GUARDED_HSET: &str = "if redis.call('HGET', KEYS[1], 'creation') ~= ARGV[1] then return -1 end \
     return redis.call('HSET', KEYS[1], unpack(ARGV, 2))";

/// Sets `schema` to `ARGV[2]` only if `creation` is `ARGV[1]` (else -1), and never over
/// schema 3 or 5 (mixed tables: a writer may have set it since this handle read the
/// metadata).
pub(crate) const GUARDED_SCHEMA: &str = "if redis.call('HGET', KEYS[1], 'creation') ~= ARGV[1] then return -1 end \
     local now = redis.call('HGET', KEYS[1], 'schema') \
     if now == 'bloom-redis/3' or now == 'bloom-redis/5' then return 0 end \
     return redis.call('HSET', KEYS[1], 'schema', ARGV[2])";

/// `HINCRBY KEYS[1] items ARGV[2]` only if its `creation` is `ARGV[1]`; -1 otherwise.
pub(crate) const GUARDED_HINCRBY: &str = "if redis.call('HGET', KEYS[1], 'creation') ~= ARGV[1] then return -1 end \
     return redis.call('HINCRBY', KEYS[1], 'items', ARGV[2])";

impl RedisFilter {
    /// The filter's name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The filter's configuration (sharded layout).
    #[must_use]
    pub fn config(&self) -> &FilterConfig {
        &self.config
    }

    /// What the filter asks of every writer, as its metadata records it.
    #[must_use]
    pub fn durability(&self) -> Durability {
        self.durability
    }

    /// Requires every insert through this handle to be acknowledged by `replicas` replicas
    /// within `timeout` (Redis `WAIT` on each node written) before it returns, besides what
    /// the filter's [`Durability`] asks: an insert that is not acknowledged fails with
    /// [`RedisFilterError::NotAcknowledged`], so a caller that sets bits before committing a
    /// record does not commit it. Redis replication stays asynchronous: this narrows what a
    /// failover can lose to writes no replica had.
    pub fn require_replica_acks(&mut self, replicas: usize, timeout: Duration) {
        let timeout = timeout.min(Duration::from_secs(86_400));
        self.acks = (replicas > 0).then_some((replicas, timeout));
    }

    pub(crate) fn conn(&self) -> MutexGuard<'_, Conn> {
        // A panic while holding the connection leaves nothing half-written on our side.
        self.conn.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn meta_key(&self) -> String {
        meta_key(&self.name)
    }

    /// Sets metadata fields only if the metadata is still this filter's (same creation id),
    /// atomically: a handle to a filter deleted or recreated meanwhile writes nothing.
    pub(crate) fn set_fields<'f>(
        &self,
        fields: impl IntoIterator<Item = (&'f str, &'f str)>,
    ) -> Result<(), RedisFilterError> {
        let key = self.meta_key();
        let creation = self.creation.hex();
        let mut args: Vec<&[u8]> = vec![
            b"EVAL",
            GUARDED_HSET.as_bytes(),
            b"1",
            key.as_bytes(),
            creation.as_bytes(),
        ];
        let fields: Vec<(&str, &str)> = fields.into_iter().collect();
        for (field, value) in &fields {
            args.push(field.as_bytes());
            args.push(value.as_bytes());
        }
        self.guarded(&args)
    }

    pub(crate) fn guarded(&self, args: &[&[u8]]) -> Result<(), RedisFilterError> {
        let key = self.meta_key();
        let reply = self.conn().query(args, Some(key.as_bytes()))?;
        self.check_guarded(&reply)
    }

    /// The reply of a guarded script: -1 says the metadata is gone or another filter's.
    pub(crate) fn check_guarded(&self, reply: &Value) -> Result<(), RedisFilterError> {
        match int(reply)? {
            n if n >= 0 => Ok(()),
            _ => Err(self.lost(
                0,
                "the metadata is gone or another filter's: the filter was deleted or recreated",
            )),
        }
    }

    pub(crate) fn lost(&self, shard: u32, detail: impl Into<String>) -> RedisFilterError {
        RedisFilterError::LostState {
            name: self.name.clone(),
            shard,
            key: shard_key(&self.name, shard),
            detail: detail.into(),
        }
    }

    /// Where the parts of each shard are.
    pub(crate) fn layout(&self) -> ShardLayout {
        ShardLayout::new(self.shard_bits)
    }

    /// A shard's length: its markers, its bits, and its counter if it is counted.
    pub(crate) fn shard_len(&self) -> u64 {
        self.layout().len(self.counted)
    }

    /// The bit offset of a counted shard's write counter: after both markers and the bits.
    pub(crate) fn counter_offset(&self) -> u64 {
        self.layout().counter_offset()
    }

    /// The end of a new shard: its end marker, and a counter of 0 if it is counted.
    fn shard_end(&self, shard: u32) -> Vec<u8> {
        let mut end = self.markers.bytes(shard).to_vec();
        if self.counted {
            end.extend_from_slice(&[0; COUNTER_BYTES as usize]);
        }
        end
    }

    /// The bytes of a new shard: its marker, zeros, its marker.
    fn shard_value(&self, shard: u32, zeros: u64) -> Vec<u8> {
        let marker = self.markers.bytes(shard);
        let mut value = Vec::with_capacity(usize::try_from(zeros).unwrap_or(0) + 16);
        value.extend_from_slice(&marker);
        value.resize(value.len() + usize::try_from(zeros).unwrap_or(0), 0);
        value
    }

    /// Writes every shard whole (its head marker, zeros, its tail marker) with `SET`, so that
    /// Redis allocates it at its size; a shard past [`WHOLE_SHARD_BYTES`] is grown with
    /// `APPEND`s of at most that much.
    fn allocate_shards(&self) -> Result<(), RedisFilterError> {
        let all: Vec<u32> = (0..self.shards).collect();
        let plain = if self.module.load(Ordering::Acquire) {
            self.reserve_shards(&all)?
        } else {
            all
        };
        self.set_shards(&plain)
    }

    /// Makes shards whole and empty with the module's `BLOOM.RESERVE` (allocated by the
    /// server: no zeros on the wire); returns the shards whose node refused it.
    fn reserve_shards(&self, shards: &[u32]) -> Result<Vec<u32>, RedisFilterError> {
        let creation = self.creation.hex();
        let mut refused = Vec::new();
        let mut conn = self.conn();
        for group in shards.chunks(SHARDS_PER_PIPELINE as usize) {
            let deadline = self.target.deadline_from_now();
            let mut commands = Commands::new();
            let mut keys = Vec::with_capacity(group.len());
            for &s in group {
                let key = shard_key(&self.name, s);
                let mut args: Vec<&[u8]> = vec![
                    b"BLOOM.RESERVE",
                    key.as_bytes(),
                    creation.as_bytes(),
                    self.config_text.as_bytes(),
                ];
                if self.counted {
                    args.push(COUNTED);
                }
                commands.push(&args);
                keys.push(key.into_bytes());
            }
            for (&s, value) in group
                .iter()
                .zip(conn.pipeline_by(commands, keys, deadline)?.values)
            {
                if module::refused_here(&value) {
                    if self.target.module() == ModuleUse::Required {
                        return Err(RedisFilterError::ModuleMissing);
                    }
                    self.module.store(false, Ordering::Release);
                    refused.push(s);
                    continue;
                }
                let markers = bits::ints(&crate::connection::server_error(value)?)?;
                if markers != [self.markers.of(s); 2] {
                    return Err(RedisFilterError::Protocol(
                        "BLOOM.RESERVE made a shard without this filter's markers".into(),
                    ));
                }
            }
        }
        Ok(refused)
    }

    /// Writes shards whole with `SET` (and `APPEND`s): the markers and zeros between.
    fn set_shards(&self, shards: &[u32]) -> Result<(), RedisFilterError> {
        let bytes = self.shard_bits / 8;
        let first_zeros = bytes.min(WHOLE_SHARD_BYTES);
        let per_pipeline: usize = if bytes > 1 << 20 { 1 } else { 64 };
        let mut conn = self.conn();
        for group in shards.chunks(per_pipeline) {
            let deadline = self.target.deadline_from_now();
            let mut commands = Commands::new();
            let mut keys = Vec::new();
            for &s in group {
                let key = shard_key(&self.name, s);
                let mut value = self.shard_value(s, first_zeros);
                if first_zeros == bytes {
                    value.extend_from_slice(&self.shard_end(s));
                }
                commands.push(&[b"SET", key.as_bytes(), &value]);
                keys.push(key.clone().into_bytes());
                let mut written = first_zeros;
                while written < bytes {
                    let chunk = (bytes - written).min(WHOLE_SHARD_BYTES);
                    let mut zeros = vec![0u8; usize::try_from(chunk).unwrap_or(0)];
                    written += chunk;
                    if written == bytes {
                        zeros.extend_from_slice(&self.shard_end(s));
                    }
                    commands.push(&[b"APPEND", key.as_bytes(), &zeros]);
                    keys.push(key.clone().into_bytes());
                }
            }
            for value in conn.pipeline_by(commands, keys, deadline)?.values {
                crate::connection::server_error(value)?;
            }
        }
        Ok(())
    }

    /// Records, for every shard, the node that holds it now (and, with `coverage`, the
    /// point of the primary store it covers). Only what is known whole may be recorded: a
    /// new filter, or one whose every key was just added again.
    ///
    /// `written` names the connection that took each shard's keys just before: a shard now
    /// answered by another connection (its node restarted or failed over meanwhile) is not
    /// recorded, and the call fails with [`RedisFilterError::NodeChanged`].
    pub(crate) fn record_nodes(
        &self,
        coverage: Option<(DatasetGeneration, Option<StoreBinding>)>,
        written: &[(u64, u32)],
    ) -> Result<(), RedisFilterError> {
        // The connection that took each shard's keys; `None` when its keys went over more
        // than one (a reconnect between batches: the node may have restarted in between).
        let mut took: std::collections::HashMap<u32, Option<u64>> =
            std::collections::HashMap::new();
        for &(serial, shard) in written {
            let entry = took.entry(shard).or_insert(Some(serial));
            if *entry != Some(serial) {
                *entry = None;
            }
        }
        let mut conn = self.conn();
        for first in (0..self.shards).step_by(SHARDS_PER_PIPELINE as usize) {
            let deadline = self.target.deadline_from_now();
            let range: Vec<u32> = (first..self.shards.min(first + SHARDS_PER_PIPELINE)).collect();
            // Who holds each shard: the connection that answers a read of it.
            let mut probe = Commands::new();
            let mut keys = Vec::new();
            for &s in &range {
                let key = shard_key(&self.name, s);
                probe.push(&[b"STRLEN", key.as_bytes()]);
                keys.push(key.into_bytes());
            }
            let answered = conn.pipeline_by(probe, keys, deadline)?.answered_by;
            let live = conn.live(deadline)?;
            let mut records = Commands::new();
            let mut routes = Vec::with_capacity(range.len());
            for (&s, &serial) in range.iter().zip(&answered) {
                if took.get(&s).is_some_and(|&by| by != Some(serial)) {
                    return Err(RedisFilterError::NodeChanged);
                }
                let node = live
                    .iter()
                    .find(|(id, _)| *id == serial)
                    .map(|(_, node)| node.clone())
                    .ok_or(RedisFilterError::NodeChanged)?;
                let record = epoch::record_of(&node);
                let key = epoch_key(&self.name, s);
                let mut args: Vec<Vec<u8>> = vec![b"HSET".to_vec(), key.clone().into_bytes()];
                for (field, value) in record.fields() {
                    args.push(field.as_bytes().to_vec());
                    args.push(value.as_bytes().to_vec());
                }
                if let Some((generation, binding)) = coverage {
                    for (field, value) in coverage_fields(generation, binding) {
                        args.push(field.as_bytes().to_vec());
                        args.push(value.into_bytes());
                    }
                }
                if self.counted {
                    // The count this node holds every key at: 0 for a new shard, the renewed
                    // count once every key was added again (what this process saw on this
                    // node; 0 when it saw none there).
                    let seen = self.seen.floor(s);
                    let here = counters::node_key(&node.run_id, &node.replid);
                    let writes = if seen.node == here { seen.count } else { 0 };
                    args.push(WRITES_FIELD.as_bytes().to_vec());
                    args.push(writes.to_string().into_bytes());
                }
                let args: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
                records.push(&args);
                routes.push(key.into_bytes());
            }
            let replies = conn.pipeline_by(records, routes, deadline)?;
            for ((&s, value), (&probed, &wrote)) in range
                .iter()
                .zip(replies.values)
                .zip(answered.iter().zip(&replies.answered_by))
            {
                crate::connection::server_error(value)?;
                // The record went to the node it names (not one that took over meanwhile).
                if probed != wrote {
                    return Err(RedisFilterError::NodeChanged);
                }
                self.verified_set().insert((probed, s));
            }
        }
        Ok(())
    }

    pub(crate) fn verified_set(&self) -> MutexGuard<'_, HashSet<(u64, u32)>> {
        self.verified.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// What this process has seen of the shards' write counts (shared by every handle of
    /// the process on this filter, for as long as one holds it).
    pub(crate) fn seen(&self) -> std::sync::Arc<Seen> {
        std::sync::Arc::clone(&self.seen)
    }

    /// The deadline of an operation starting now.
    pub(crate) fn deadline(&self) -> Instant {
        self.target.deadline_from_now()
    }
}
