//! Whole-filter operations of a [`RedisFilter`]: checking every shard, its header and
//! coverage record, info, export to a snapshot file and import from one, and the memory check
//! before a filter is created.

use std::collections::HashMap;
use std::fmt;
use std::path::Path;

use bloom_core::{Capacity, ObservedRate, estimate};
use bloom_format::{
    AtomicFile, DecodeOptions, Header, SnapshotReader, SnapshotWriter, WriteOptions,
};
use bloom_redis_protocol::keys::{meta_key, shard_key};
use bloom_redis_protocol::marker::MARKER_BYTES;
use bloom_redis_protocol::meta::{self, BUILDING, Durability, Meta, MetaError, READY};
use redis::Value;

use super::ints;
use crate::connection::{Conn, RedisTarget, server_error};
use crate::error::RedisFilterError;
use crate::filter::{RedisFilter, SHARDS_PER_PIPELINE, int};
use crate::node::text;
use crate::wire::Commands;

/// Bytes per `GETRANGE`/`SETRANGE` when a shard is copied.
const COPY_BYTES: u64 = 1 << 20;

/// What [`RedisFilter::info`] reports. Its `Debug` form leaves out the salt.
#[derive(Clone)]
#[non_exhaustive]
pub struct Info {
    /// The filter's header, as its metadata holds it.
    pub header: Header,
    /// What the filter asks of its writers.
    pub durability: Durability,
    /// The bits set, over all shards.
    pub set_bits: u64,
    /// The estimated number of keys.
    pub estimated_items: f64,
    /// The false-positive rate at the current fill (the mean over shards).
    pub estimated_false_positive_rate: f64,
    /// How the filter stands against the plan its metadata records (`capacity`,
    /// `target_fpr`), judged as local filters are ([`Capacity::from_estimate`] with the
    /// metadata's `items`); `None` for a filter created without a plan.
    pub capacity: Option<Capacity>,
    /// The false positives every process measured on the filter since it was created, of
    /// the queries for absent keys it answered ([`RedisFilter::record_observed`]; each
    /// `SharedFilteredStore::metrics` call adds its process's).
    pub observed: ObservedRate,
}

impl Info {
    /// Whether the false positives every process measured pass the planned rate by more
    /// than chance allows ([`ObservedRate::passes`]); `false` for a filter without a plan.
    #[must_use]
    pub fn observed_over_target(&self) -> bool {
        self.capacity
            .is_some_and(|c| self.observed.passes(c.plan.false_positive_rate))
    }
}

impl fmt::Debug for Info {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Info")
            .field("bit_count", &self.header.bit_count)
            .field("hash_count", &self.header.hash_count)
            .field("position_rule", &self.header.position_rule)
            .field("salted", &!self.header.salt.is_empty())
            .field("dataset_generation", &self.header.dataset_generation)
            .field("durability", &self.durability)
            .field("set_bits", &self.set_bits)
            .field("estimated_items", &self.estimated_items)
            .field(
                "estimated_false_positive_rate",
                &self.estimated_false_positive_rate,
            )
            .field("capacity", &self.capacity)
            .field("observed", &self.observed)
            .finish_non_exhaustive()
    }
}

pub(crate) fn read_meta(conn: &mut Conn, name: &str) -> Result<Meta, RedisFilterError> {
    let key = meta_key(name);
    let value = conn.query(&[b"HGETALL", key.as_bytes()], Some(key.as_bytes()))?;
    let mut map: HashMap<String, String> = HashMap::new();
    match value {
        Value::Map(pairs) => {
            for (field, value) in pairs {
                if let (Some(field), Some(value)) = (text(&field), text(&value)) {
                    map.insert(field, value);
                }
            }
        }
        Value::Array(items) => {
            for pair in items.chunks(2) {
                if let [field, value] = pair
                    && let (Some(field), Some(value)) = (text(field), text(value))
                {
                    map.insert(field, value);
                }
            }
        }
        _ => {}
    }
    if map.is_empty() {
        return Err(RedisFilterError::NotFound {
            name: name.to_owned(),
            key,
        });
    }
    let get = |field: &'static str| map.get(field).map_or("", String::as_str);
    meta::parse(get).map_err(|e| match e {
        MetaError::NotReady { state } => RedisFilterError::NotReady {
            name: name.to_owned(),
            state,
        },
        MetaError::Field { field, expected } => RedisFilterError::Metadata {
            name: name.to_owned(),
            field,
            // The salt is a secret: never echoed, even when malformed.
            found: if field == "salt" {
                format!("<{} characters>", get(field).len())
            } else {
                get(field).to_owned()
            },
            expected,
        },
        MetaError::Invalid(cause) => RedisFilterError::Invalid {
            name: name.to_owned(),
            cause,
        },
        other => RedisFilterError::Protocol(format!("the metadata of {name}: {other}")),
    })
}

impl RedisFilter {
    /// Checks every shard (present, full size, with this filter's markers) and judges the
    /// node of each against its epoch record.
    ///
    /// # Errors
    /// [`RedisFilterError::LostState`] naming the first shard that is not intact,
    /// [`RedisFilterError::Unverified`], or a Redis error.
    pub fn check_shards(&self) -> Result<(), RedisFilterError> {
        let expected = i64::try_from(self.shard_len()).unwrap_or(i64::MAX);
        for first in (0..self.shards).step_by(SHARDS_PER_PIPELINE as usize) {
            let deadline = self.deadline();
            let range: Vec<u32> = (first..self.shards.min(first + SHARDS_PER_PIPELINE)).collect();
            let mut commands = Commands::new();
            let mut keys = Vec::new();
            // What this process had seen of each counter before the reads went out.
            let floors: Vec<_> = range.iter().map(|&s| self.seen.floor(s)).collect();
            for &s in &range {
                let key = shard_key(&self.name, s);
                commands.push(&[b"STRLEN", key.as_bytes()]);
                keys.push(key.into_bytes());
                keys.push(if self.counted {
                    self.push_counter_read(&mut commands, s)
                } else {
                    self.push_marker_read(&mut commands, s)
                });
            }
            let replies = self.conn().pipeline_by(commands, keys, deadline)?;
            let nodes = if self.counted {
                self.node_keys(deadline)?
            } else {
                HashMap::new()
            };
            let mut answered = Vec::new();
            let mut counts = Vec::new();
            let mut deferred = None;
            for (i, &shard) in range.iter().enumerate() {
                let (Some(len), Some(marker)) =
                    (replies.values.get(2 * i), replies.values.get(2 * i + 1))
                else {
                    return Err(RedisFilterError::Protocol("a reply is missing".into()));
                };
                let len = int(&server_error(len.clone())?)?;
                let read = ints(&server_error(marker.clone())?)?;
                let markers = read.get(..2).unwrap_or_default();
                if len != expected || !self.markers_intact(shard, markers) {
                    return Err(self.lost(
                        shard,
                        if len == 0 {
                            "the key is missing".to_owned()
                        } else if len != expected {
                            format!("it is {len} bytes, expected {expected}")
                        } else {
                            "its markers are not this filter's (another filter, another shard, or edited metadata)".to_owned()
                        },
                    ));
                }
                let serial = replies.answered_by.get(2 * i + 1).copied();
                if let (true, Some(&counter)) = (self.counted, read.get(2)) {
                    let floor = floors.get(i).copied().unwrap_or_default();
                    let node = serial.and_then(|s| nodes.get(&s).copied());
                    match self.take_counter(shard, counter, floor, node, (false, true), None) {
                        Ok(count) => counts.push((shard, count)),
                        // After the nodes are judged: a node that changed says more.
                        Err(e) if e.is_unverified() => deferred = deferred.or(Some(e)),
                        Err(e) => return Err(e),
                    }
                }
                if let Some(serial) = serial {
                    answered.push((serial, shard));
                }
            }
            self.verify_shards(&answered, &counts, deadline)?;
            if let Some(e) = deferred {
                return Err(e);
            }
        }
        Ok(())
    }

    /// The filter's header as its metadata holds it now (generation, binding, items).
    ///
    /// # Errors
    /// As [`RedisFilter::open`] for the metadata.
    pub fn header(&self) -> Result<Header, RedisFilterError> {
        let meta = read_meta(&mut self.conn(), &self.name)?;
        if meta.creation != self.creation {
            return Err(self.lost(
                0,
                "the metadata is another filter's: the filter was recreated",
            ));
        }
        let mut header = meta.header;
        if meta.tables_mixed {
            // As a local filter records it: the tables are not recorded.
            header.key_encoding.normalization_unicode = None;
            header.key_encoding.casing_unicode = None;
        }
        Ok(header)
    }

    /// Set bits and estimates, counted by Redis (`BITCOUNT` per shard).
    ///
    /// # Errors
    /// As [`RedisFilter::check_shards`].
    pub fn info(&self) -> Result<Info, RedisFilterError> {
        let header = self.header()?;
        self.check_shards()?;
        let mut per_shard = Vec::with_capacity(self.shards as usize);
        let (from, to) = (
            MARKER_BYTES.to_string(),
            (MARKER_BYTES + self.shard_bits / 8 - 1).to_string(),
        );
        for first in (0..self.shards).step_by(SHARDS_PER_PIPELINE as usize) {
            let deadline = self.deadline();
            let mut commands = Commands::new();
            let mut keys = Vec::new();
            for s in first..self.shards.min(first + SHARDS_PER_PIPELINE) {
                let key = shard_key(&self.name, s);
                commands.push(&[b"BITCOUNT", key.as_bytes(), from.as_bytes(), to.as_bytes()]);
                keys.push(key.into_bytes());
            }
            for value in self.conn().pipeline_by(commands, keys, deadline)?.values {
                per_shard.push(u64::try_from(int(&server_error(value)?)?).unwrap_or(0));
            }
        }
        let observed = self.observed()?;
        let set_bits: u64 = per_shard.iter().sum();
        let (m, k) = (self.config.bits(), self.config.hashes());
        let rate = estimate::partitioned_false_positive_rate(per_shard, self.shard_bits, k);
        Ok(Info {
            capacity: header.plan.map(|plan| {
                let layout = self.config.layout();
                Capacity::from_estimate(plan, header.item_count, rate, layout, m, k)
            }),
            header,
            durability: self.durability,
            set_bits,
            estimated_items: estimate::estimated_items(set_bits, m, k),
            estimated_false_positive_rate: rate,
            observed,
        })
    }

    /// Writes the filter as a snapshot file (atomically): the header from the metadata, read
    /// first, then the bits, shard by shard, a megabyte at a time. The snapshot is the one a
    /// local filter with the same configuration and keys would write. An unverified filter is
    /// not exported (its snapshot could lack acknowledged keys).
    ///
    /// # Errors
    /// [`RedisFilterError::LostState`] if a shard is not intact,
    /// [`RedisFilterError::Unverified`], a Redis error, or a file error.
    pub fn export(&self, path: impl AsRef<Path>) -> Result<Header, RedisFilterError> {
        let path = path.as_ref();
        // The header (generation) first: bits read after it cover at least what it says.
        let header = self.header()?;
        self.check_shards()?;
        let file = AtomicFile::create_with(path, WriteOptions::for_snapshot(&header))?;
        let mut writer = SnapshotWriter::new(file, header.clone())?;
        let shard_bytes = self.shard_bits / 8;
        for shard in 0..self.shards {
            let key = shard_key(&self.name, shard);
            let mut at = 0;
            while at < shard_bytes {
                let len = COPY_BYTES.min(shard_bytes - at);
                let start = MARKER_BYTES + at;
                let value = self.conn().query(
                    &[
                        b"GETRANGE",
                        key.as_bytes(),
                        start.to_string().as_bytes(),
                        (start + len - 1).to_string().as_bytes(),
                    ],
                    Some(key.as_bytes()),
                )?;
                let mut bytes = match value {
                    Value::BulkString(bytes) => bytes,
                    _ => Vec::new(),
                };
                if bytes.len() as u64 != len {
                    return Err(self.lost(shard, "it is shorter than the filter"));
                }
                for byte in &mut bytes {
                    *byte = byte.reverse_bits();
                }
                writer.write_payload(&bytes)?;
                at += len;
            }
        }
        // The markers again: a shard lost while it was copied would have been copied empty.
        self.check_shards()?;
        let file = writer.finish()?;
        file.commit()?;
        Ok(header)
    }

    /// Loads a snapshot file (of the sharded layout) into a new filter `name`, with the
    /// default limits ([`DecodeOptions::default`]: payloads up to 1 GiB) and no durability
    /// requirement: the metadata first (not ready), the bits shard by shard, and the filter
    /// is marked ready only after the whole payload passed its checksum.
    ///
    /// # Errors
    /// A file error ([`RedisFilterError::Read`]: not a snapshot, damaged, over the limit),
    /// [`RedisFilterError::NotSharded`], [`RedisFilterError::AlreadyExists`], or a Redis
    /// error.
    pub fn import(
        target: &RedisTarget,
        name: &str,
        path: impl AsRef<Path>,
    ) -> Result<Self, RedisFilterError> {
        Self::import_with(
            target,
            name,
            path,
            &DecodeOptions::default(),
            Durability::None,
        )
    }

    /// [`RedisFilter::import`] with the decoder's limits `options` (a payload over 1 GiB
    /// needs `DecodeOptions::with_max_payload_len`) and the durability every writer must give
    /// each insert.
    ///
    /// # Errors
    /// As [`RedisFilter::import`].
    pub fn import_with(
        target: &RedisTarget,
        name: &str,
        path: impl AsRef<Path>,
        options: &DecodeOptions,
        durability: Durability,
    ) -> Result<Self, RedisFilterError> {
        let reader = SnapshotReader::open(path.as_ref(), options)?;
        Self::import_from(target, name, reader, durability)
    }

    /// [`RedisFilter::import_with`] from a snapshot being read from anywhere (standard input,
    /// a socket), its header already checked by `reader` (with the caller's payload limit).
    ///
    /// # Errors
    /// As [`RedisFilter::import`].
    pub fn import_from<R: std::io::Read>(
        target: &RedisTarget,
        name: &str,
        reader: SnapshotReader<R>,
        durability: Durability,
    ) -> Result<Self, RedisFilterError> {
        let header = reader.header().clone();
        let config = bloom_core::FilterConfig::from_header(&header).map_err(|cause| {
            RedisFilterError::Config {
                name: name.to_owned(),
                cause,
            }
        })?;
        let filter = Self::create_with_header(target, name, config, header, durability, BUILDING)?;
        match filter.fill_from(reader, name) {
            Ok(()) => Ok(filter),
            Err(e) => {
                // Nothing half-imported stays behind under the name (best effort: Redis may be
                // the reason it failed).
                let _ = Self::delete(target, name);
                Err(e)
            }
        }
    }

    fn fill_from<R: std::io::Read>(
        &self,
        reader: SnapshotReader<R>,
        name: &str,
    ) -> Result<(), RedisFilterError> {
        let filter = self;
        let shard_bytes = filter.shard_bits / 8;
        let mut offset = 0u64;
        let mut pending = Commands::new();
        let mut keys: Vec<Vec<u8>> = Vec::new();
        let flush =
            |pending: &mut Commands, keys: &mut Vec<Vec<u8>>| -> Result<(), RedisFilterError> {
                let commands = std::mem::take(pending);
                let routes = std::mem::take(keys);
                for value in filter
                    .conn()
                    .pipeline_by(commands, routes, filter.deadline())?
                    .values
                {
                    server_error(value)?;
                }
                Ok(())
            };
        reader
            .read_payload_with(|chunk| {
                let mut chunk = chunk;
                while !chunk.is_empty() {
                    let shard = offset / shard_bytes;
                    let within = offset % shard_bytes;
                    let take = usize::try_from((shard_bytes - within).min(chunk.len() as u64))
                        .unwrap_or(chunk.len());
                    let (part, rest) = chunk.split_at(take);
                    // Zero bytes need no write: the shard was allocated zeroed.
                    if part.iter().any(|&b| b != 0) {
                        let reversed: Vec<u8> = part.iter().map(|b| b.reverse_bits()).collect();
                        let key = shard_key(name, u32::try_from(shard).unwrap_or(u32::MAX));
                        pending.push(&[
                            b"SETRANGE",
                            key.as_bytes(),
                            (MARKER_BYTES + within).to_string().as_bytes(),
                            &reversed,
                        ]);
                        keys.push(key.into_bytes());
                        if pending.len() >= 64 {
                            flush(&mut pending, &mut keys).map_err(ImportError::Redis)?;
                        }
                    }
                    offset += take as u64;
                    chunk = rest;
                }
                Ok::<(), ImportError>(())
            })
            .map_err(|e| match e {
                ImportError::Read(e) => RedisFilterError::Read(e),
                ImportError::Redis(e) => e,
            })?;
        flush(&mut pending, &mut keys)?;
        filter.check_shards()?;
        // The bits are durable as the filter asks (`WAIT`, `WAITAOF`) before it is ready:
        // the creation's wait covered only the empty shards.
        filter.make_live_durable()?;
        filter.set_fields([("state", READY)])
    }
}

enum ImportError {
    Read(bloom_format::ReadError),
    Redis(RedisFilterError),
}

impl From<bloom_format::ReadError> for ImportError {
    fn from(e: bloom_format::ReadError) -> Self {
        Self::Read(e)
    }
}

/// Refuses a filter that would not fit the server's memory: over what `maxmemory` leaves, or
/// (without a limit) over half the machine's memory. In a cluster the node reached is asked,
/// for its even share of the shards (the whole filter over the masters): a check against
/// the obvious mistake, not a reservation; masters of unequal memory are not each asked.
pub(crate) fn check_memory(
    conn: &mut Conn,
    target: &RedisTarget,
    needed: u64,
) -> Result<(), RedisFilterError> {
    let deadline = target.deadline_from_now();
    // The node reached (any master, in a cluster).
    let (report, _) = conn.query_by(&[b"INFO", b"memory"], None, deadline)?;
    let report = text(&report).unwrap_or_default();
    let field = |name: &str| -> u64 {
        report
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    let (max, used, total) = (
        field("maxmemory"),
        field("used_memory"),
        field("total_system_memory"),
    );
    let available = if max > 0 {
        max.saturating_sub(used)
    } else if total > 0 {
        (total / 2).saturating_sub(used)
    } else {
        return Ok(());
    };
    let share = if target.is_cluster() {
        let nodes = conn.cluster_nodes(deadline)?;
        let masters = nodes
            .lines()
            .filter(|l| {
                l.split_whitespace()
                    .nth(2)
                    .is_some_and(|f| f.contains("master"))
            })
            .count()
            .max(1);
        needed.div_ceil(masters as u64)
    } else {
        needed
    };
    if share > available {
        return Err(RedisFilterError::TooLarge { needed, available });
    }
    Ok(())
}
