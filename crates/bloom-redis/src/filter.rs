//! [`RedisFilter`]: a sharded Bloom filter held in Redis, answered one command per key.

use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use bloom_core::{EncodedKey, FilterConfig, Layout, PositionRule, estimate};
use bloom_format::{
    AtomicFile, DatasetGeneration, DecodeOptions, Header, SnapshotReader, SnapshotWriter,
    StoreBinding, WriteOptions,
};
use redis::{Cmd, Value};

use crate::connection::{Conn, RedisTarget};
use crate::error::RedisFilterError;
use crate::meta::{self, BUILDING, Creation, Markers, READY};

/// Bits at the start and at the end of every shard that hold its marker.
const MARKER_BITS: u64 = 64;
/// The marker's bytes.
const MARKER_BYTES: u64 = MARKER_BITS / 8;
/// Redis's largest string: a shard and its marker must fit.
const MAX_SHARD_BYTES: u64 = 512 << 20;
/// Keys per pipelined batch.
const BATCH: usize = 1024;
/// Bytes per `GETRANGE`/`SETRANGE` when a shard is copied.
const COPY_BYTES: u64 = 1 << 20;

/// The metadata key of filter `name`: `bloom:{NAME}:meta`.
#[must_use]
pub fn meta_key(name: &str) -> String {
    format!("bloom:{{{name}}}:meta")
}

/// The key of shard `shard` of filter `name`: `bloom:{NAME:S}`. The hash tag is the name and
/// the shard number, so Redis Cluster spreads shards over its slots, and every key of one
/// shard (there is one) is in one slot.
#[must_use]
pub fn shard_key(name: &str, shard: u32) -> String {
    format!("bloom:{{{name}:{shard}}}")
}

fn check_name(name: &str) -> Result<(), RedisFilterError> {
    let valid = (1..=200).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if valid {
        Ok(())
    } else {
        Err(RedisFilterError::InvalidName {
            name: name.to_owned(),
        })
    }
}

/// Checks that `config` can be held in Redis; returns the shard count and bits per shard.
pub(crate) fn shard_geometry(config: &FilterConfig) -> Result<(u32, u64), RedisFilterError> {
    let Layout::Sharded { shards } = config.layout() else {
        return Err(RedisFilterError::NotSharded {
            layout: config.layout().to_string(),
            rule: config.rule().to_string(),
        });
    };
    if !matches!(
        config.rule(),
        PositionRule::Sha256Double | PositionRule::Xxh3_128
    ) {
        return Err(RedisFilterError::NotSharded {
            layout: config.layout().to_string(),
            rule: config.rule().to_string(),
        });
    }
    let shard_bits = config.bits() / u64::from(shards);
    if shard_bits / 8 + 2 * MARKER_BYTES > MAX_SHARD_BYTES {
        let per_shard = (MAX_SHARD_BYTES - 2 * MARKER_BYTES) * 8;
        return Err(RedisFilterError::ShardTooLarge {
            shard_bits,
            needed: config.bits().div_ceil(per_shard),
        });
    }
    Ok((shards, shard_bits))
}

/// What [`RedisFilter::info`] reports. Its `Debug` form leaves out the salt.
#[derive(Clone)]
#[non_exhaustive]
pub struct Info {
    /// The filter's header, as its metadata holds it.
    pub header: Header,
    /// The bits set, over all shards.
    pub set_bits: u64,
    /// The estimated number of keys.
    pub estimated_items: f64,
    /// The false-positive rate at the current fill (the mean over shards).
    pub estimated_false_positive_rate: f64,
}

impl fmt::Debug for Info {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Info")
            .field("bit_count", &self.header.bit_count)
            .field("hash_count", &self.header.hash_count)
            .field("position_rule", &self.header.position_rule)
            .field("salted", &!self.header.salt.is_empty())
            .field("dataset_generation", &self.header.dataset_generation)
            .field("set_bits", &self.set_bits)
            .field("estimated_items", &self.estimated_items)
            .field(
                "estimated_false_positive_rate",
                &self.estimated_false_positive_rate,
            )
            .finish_non_exhaustive()
    }
}

/// A Bloom filter held in Redis (or Redis Cluster) in the sharded layout: `S` shard keys of
/// `m / S` bits each behind a 64-bit marker, and a metadata hash that holds what a snapshot
/// header holds.
///
/// - **One command per key, on one node**: all of a key's bits are in one shard. Inserts are
///   `BITFIELD key GET i64 0 SET u1 .. 1 ..`, queries `BITFIELD_RO key GET i64 0 GET u1 ..`;
///   each is atomic, and batches are pipelined (one round trip per node).
/// - **Lost state is detected, never answered from**: every command reads the shard's two
///   markers (derived from the creation id, the configuration and the shard's number) in
///   the same step. A shard that is missing, was emptied (`FLUSHALL`, a Redis restarted
///   without persistence), truncated, renamed or copied from another shard, belongs to a
///   filter created since, or is read with edited metadata, reads another marker, and the
///   operation fails with [`RedisFilterError::LostState`]; the shard stays detectably lost
///   (an insert never writes a marker) until the filter is rebuilt. What cannot be detected: a
///   failover to a replica that missed recent writes (see
///   [`RedisFilter::require_replica_acks`]).
/// - **Bit-exact with the snapshot format**: [`RedisFilter::export`] writes the snapshot a
///   local filter with the same configuration and keys would write; [`RedisFilter::import`]
///   loads one back. Redis numbers bits from the most significant bit of each byte, the
///   snapshot format from the least significant; the copy reverses each byte.
pub struct RedisFilter {
    target: RedisTarget,
    conn: Mutex<Conn>,
    name: String,
    config: FilterConfig,
    creation: Creation,
    markers: Markers,
    shard_bits: u64,
    shards: u32,
    acks: Option<(usize, Duration)>,
}

/// Names the filter and its size; never its salt, URLs or bits.
impl fmt::Debug for RedisFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisFilter")
            .field("name", &self.name)
            .field("target", &self.target)
            .field("config", &self.config)
            .field("shards", &self.shards)
            .finish_non_exhaustive()
    }
}

impl RedisFilter {
    /// Creates filter `name` with `config` (which must use the sharded layout): its shards,
    /// each allocated at full size behind the marker, then its metadata, marked ready last.
    /// Fails if a filter of that name exists (even one whose creation was interrupted:
    /// [`RedisFilter::delete`] it first).
    ///
    /// # Errors
    /// [`RedisFilterError::InvalidName`], [`RedisFilterError::NotSharded`],
    /// [`RedisFilterError::ShardTooLarge`], [`RedisFilterError::AlreadyExists`], or a Redis
    /// error.
    pub fn create(
        target: &RedisTarget,
        name: &str,
        config: FilterConfig,
    ) -> Result<Self, RedisFilterError> {
        let header = config.to_header(DatasetGeneration::ZERO, 0);
        Self::create_with_header(target, name, config, header, READY)
    }

    fn create_with_header(
        target: &RedisTarget,
        name: &str,
        config: FilterConfig,
        header: Header,
        final_state: &str,
    ) -> Result<Self, RedisFilterError> {
        check_name(name)?;
        let (shards, shard_bits) = shard_geometry(&config)?;
        let mut conn = target.connect()?;
        check_memory(
            &mut conn,
            target,
            u64::from(shards) * (shard_bits / 8 + 2 * MARKER_BYTES),
        )?;
        let creation = Creation::random()?;
        let key = meta_key(name);
        let claimed: i64 = conn.query(
            redis::cmd("HSETNX")
                .arg(&key)
                .arg("creation")
                .arg(creation.hex()),
        )?;
        if claimed == 0 {
            return Err(RedisFilterError::AlreadyExists {
                name: name.to_owned(),
            });
        }
        let filter = Self {
            target: target.clone(),
            conn: Mutex::new(conn),
            name: name.to_owned(),
            config,
            creation,
            markers: Markers::new(creation, &header),
            shard_bits,
            shards,
            acks: None,
        };
        filter.write_meta(&header, BUILDING)?;
        filter.allocate_shards()?;
        if final_state == READY {
            filter.set_state(READY)?;
        }
        Ok(filter)
    }

    /// Opens filter `name`: its metadata must be complete and valid, the filter ready, and
    /// every shard present, full size, with the filter's marker.
    ///
    /// # Errors
    /// [`RedisFilterError::NotFound`], [`RedisFilterError::NotReady`],
    /// [`RedisFilterError::Metadata`], [`RedisFilterError::Invalid`],
    /// [`RedisFilterError::Config`], [`RedisFilterError::LostState`], or a Redis error.
    pub fn open(target: &RedisTarget, name: &str) -> Result<Self, RedisFilterError> {
        check_name(name)?;
        let mut conn = target.connect()?;
        let meta = read_meta(&mut conn, name)?;
        if meta.state != READY {
            return Err(RedisFilterError::NotReady {
                name: name.to_owned(),
                state: meta.state,
            });
        }
        let config = config_of(name, &meta.header)?;
        let (shards, shard_bits) = shard_geometry(&config)?;
        let filter = Self {
            target: target.clone(),
            conn: Mutex::new(conn),
            name: name.to_owned(),
            config,
            creation: meta.creation,
            markers: Markers::new(meta.creation, &meta.header),
            shard_bits,
            shards,
            acks: None,
        };
        filter.check_shards()?;
        Ok(filter)
    }

    /// Deletes filter `name`: its metadata and every shard. Returns whether it existed. A
    /// filter whose metadata is gone (lost, or a creation interrupted before it was written)
    /// is deleted shard by shard up to `shards_hint` shards.
    ///
    /// # Errors
    /// [`RedisFilterError::InvalidName`] or a Redis error.
    pub fn delete(
        target: &RedisTarget,
        name: &str,
        shards_hint: Option<u32>,
    ) -> Result<bool, RedisFilterError> {
        check_name(name)?;
        let mut conn = target.connect()?;
        let map: HashMap<String, String> = conn.query(redis::cmd("HGETALL").arg(meta_key(name)))?;
        let shards = map
            .get("shards")
            .and_then(|s| s.parse::<u32>().ok())
            .or(shards_hint)
            .unwrap_or(0);
        let mut deleted = 0i64;
        let keys: Vec<String> = (0..shards).map(|s| shard_key(name, s)).collect();
        for chunk in keys.chunks(BATCH) {
            let cmds = chunk
                .iter()
                .map(|k| redis::cmd("DEL").arg(k).clone())
                .collect();
            for value in conn.pipeline(cmds)? {
                deleted += int(&value)?;
            }
        }
        deleted += conn.query::<i64>(redis::cmd("DEL").arg(meta_key(name)))?;
        Ok(deleted > 0)
    }

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

    /// Requires every insert to be acknowledged by `replicas` replicas within `timeout`
    /// (Redis `WAIT` on the node of each shard written) before it returns: an insert that
    /// is not acknowledged fails with [`RedisFilterError::NotAcknowledged`], so a caller that
    /// sets bits before committing a record does not commit it. This narrows what a failover
    /// can lose to writes no replica had; Redis replication stays asynchronous (`WAIT` does
    /// not make it strongly consistent).
    pub fn require_replica_acks(&mut self, replicas: usize, timeout: Duration) {
        let timeout = timeout.min(Duration::from_secs(86_400));
        self.acks = (replicas > 0).then_some((replicas, timeout));
    }

    fn conn(&self) -> MutexGuard<'_, Conn> {
        // A panic while holding the connection leaves nothing half-written on our side.
        self.conn.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn meta_key(&self) -> String {
        meta_key(&self.name)
    }

    fn write_meta(&self, header: &Header, state: &str) -> Result<(), RedisFilterError> {
        let fields = meta::fields(header, self.creation, state);
        self.set_fields(fields.iter().map(|(f, v)| (*f, v.as_str())))
    }

    fn set_state(&self, state: &str) -> Result<(), RedisFilterError> {
        self.set_fields([("state", state)])
    }

    /// Sets metadata fields only if the metadata is still this filter's (same creation id),
    /// atomically: a handle to a filter deleted or recreated meanwhile writes nothing.
    fn set_fields<'f>(
        &self,
        fields: impl IntoIterator<Item = (&'f str, &'f str)>,
    ) -> Result<(), RedisFilterError> {
        let mut cmd = redis::cmd("EVAL");
        cmd.arg(GUARDED_HSET)
            .arg(1)
            .arg(self.meta_key())
            .arg(self.creation.hex());
        for (field, value) in fields {
            cmd.arg(field).arg(value);
        }
        self.guarded(&cmd)
    }

    fn guarded(&self, cmd: &Cmd) -> Result<(), RedisFilterError> {
        match self.conn().query::<i64>(cmd)? {
            n if n >= 0 => Ok(()),
            _ => Err(self.lost(
                0,
                "the metadata is gone or another filter's: the filter was deleted or recreated",
            )),
        }
    }

    /// Writes every shard: its head marker, zeros (allocated by Redis), and its tail marker.
    fn allocate_shards(&self) -> Result<(), RedisFilterError> {
        let tail = MARKER_BYTES + self.shard_bits / 8;
        let mut conn = self.conn();
        // Small batches: allocating a shard can take Redis a while.
        for first in (0..self.shards).step_by(16) {
            let cmds = (first..self.shards.min(first + 16))
                .flat_map(|s| {
                    let key = shard_key(&self.name, s);
                    let marker = self.markers.bytes(s);
                    [
                        redis::cmd("DEL").arg(&key).clone(),
                        redis::cmd("SETRANGE")
                            .arg(&key)
                            .arg(0)
                            .arg(&marker[..])
                            .clone(),
                        redis::cmd("SETRANGE")
                            .arg(&key)
                            .arg(tail)
                            .arg(&marker[..])
                            .clone(),
                    ]
                })
                .collect();
            conn.pipeline(cmds)?;
        }
        Ok(())
    }

    /// Checks every shard: present, full size, with this filter's marker.
    ///
    /// # Errors
    /// [`RedisFilterError::LostState`] naming the first shard that is not, or a Redis error.
    pub fn check_shards(&self) -> Result<(), RedisFilterError> {
        let expected = i64::try_from(2 * MARKER_BYTES + self.shard_bits / 8).unwrap_or(i64::MAX);
        let tail = MARKER_BITS + self.shard_bits;
        let mut conn = self.conn();
        for first in (0..self.shards).step_by(BATCH) {
            let range: Vec<u32> = (first..self.shards.min(first + BATCH as u32)).collect();
            let cmds = range
                .iter()
                .flat_map(|&s| {
                    let key = shard_key(&self.name, s);
                    [
                        redis::cmd("STRLEN").arg(&key).clone(),
                        redis::cmd("BITFIELD_RO")
                            .arg(&key)
                            .arg("GET")
                            .arg("i64")
                            .arg(0)
                            .arg("GET")
                            .arg("i64")
                            .arg(tail)
                            .clone(),
                    ]
                })
                .collect();
            let replies = conn.pipeline(cmds)?;
            for (&shard, pair) in range.iter().zip(replies.chunks(2)) {
                let [len, marker] = pair else {
                    return Err(RedisFilterError::Protocol("a reply is missing".into()));
                };
                let len = int(len)?;
                let markers = ints(marker)?;
                let own = self.markers.of(shard);
                let intact = markers.len() == 2 && markers.iter().all(|&m| m == own);
                if len != expected || !intact {
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
            }
        }
        Ok(())
    }

    fn lost(&self, shard: u32, detail: impl Into<String>) -> RedisFilterError {
        RedisFilterError::LostState {
            name: self.name.clone(),
            shard,
            key: shard_key(&self.name, shard),
            detail: detail.into(),
        }
    }

    /// A key's shard and the Redis bit offsets of its positions in it.
    fn locate(&self, key: &EncodedKey<'_>) -> (u32, Vec<u64>) {
        let positions: Vec<u64> = self.config.positions(key).collect();
        let shard = positions.first().map_or(0, |p| p / self.shard_bits);
        let offsets = positions
            .iter()
            .map(|p| MARKER_BITS + p % self.shard_bits)
            .collect();
        (u32::try_from(shard).unwrap_or(u32::MAX), offsets)
    }

    fn command(&self, key: &EncodedKey<'_>, write: bool) -> (u32, Cmd) {
        let (shard, offsets) = self.locate(key);
        let mut cmd = redis::cmd(if write { "BITFIELD" } else { "BITFIELD_RO" });
        cmd.arg(shard_key(&self.name, shard))
            .arg("GET")
            .arg("i64")
            .arg(0)
            .arg("GET")
            .arg("i64")
            .arg(MARKER_BITS + self.shard_bits);
        for offset in offsets {
            if write {
                cmd.arg("SET").arg("u1").arg(offset).arg(1);
            } else {
                cmd.arg("GET").arg("u1").arg(offset);
            }
        }
        (shard, cmd)
    }

    /// The bit values of a `BITFIELD` reply, after checking both markers.
    fn bits_of(&self, shard: u32, reply: &Value) -> Result<Vec<i64>, RedisFilterError> {
        let values = ints(reply)?;
        let [head, tail, bits @ ..] = values.as_slice() else {
            return Err(RedisFilterError::Protocol("a short BITFIELD reply".into()));
        };
        let own = self.markers.of(shard);
        if *head != own || *tail != own {
            return Err(self.lost(
                shard,
                if *head == 0 {
                    "its marker is gone: the key was deleted or emptied"
                } else if *tail == 0 {
                    "its end marker is gone: the key was truncated"
                } else {
                    "its marker is not this filter's: recreated, moved, or edited metadata"
                },
            ));
        }
        Ok(bits.to_vec())
    }

    /// The next batch of keys as one pipeline of `BITFIELD`s (inserts with `write`): each
    /// key's shard, and its bits (the old values for an insert), markers checked.
    fn batch<K: AsRef<[u8]>>(
        &self,
        keys: &mut impl Iterator<Item = K>,
        write: bool,
    ) -> Result<(Vec<u32>, Vec<Vec<i64>>), RedisFilterError> {
        let (shards, cmds): (Vec<u32>, Vec<Cmd>) = keys
            .take(BATCH)
            .map(|k| self.command(&EncodedKey::from_encoded(k.as_ref()), write))
            .unzip();
        let replies = self.conn().pipeline(cmds)?;
        let bits = shards
            .iter()
            .zip(&replies)
            .map(|(&shard, reply)| self.bits_of(shard, reply))
            .collect::<Result<_, _>>()?;
        Ok((shards, bits))
    }

    /// Inserts a text key (encoded by the filter's encoding); returns whether a bit changed.
    ///
    /// # Errors
    /// [`RedisFilterError::LostState`], [`RedisFilterError::NotAcknowledged`], or a Redis
    /// error: the key's bits may then not be set, and a caller must not commit the key.
    pub fn insert(&self, key: &str) -> Result<bool, RedisFilterError> {
        self.insert_encoded(&self.config.encode_str(key))
    }

    /// Inserts a byte key.
    ///
    /// # Errors
    /// [`RedisFilterError::Key`] for non-UTF-8 keys under a text encoding, or as
    /// [`RedisFilter::insert`].
    pub fn insert_bytes(&self, key: &[u8]) -> Result<bool, RedisFilterError> {
        self.insert_encoded(&self.config.encode_bytes(key)?)
    }

    /// Inserts a key already encoded with the filter's encoding.
    ///
    /// # Errors
    /// As [`RedisFilter::insert`].
    pub fn insert_encoded(&self, key: &EncodedKey<'_>) -> Result<bool, RedisFilterError> {
        Ok(self.insert_all_encoded([key.as_bytes()])? == 1)
    }

    /// Inserts many encoded keys, pipelined a batch at a time; returns how many changed a bit.
    ///
    /// # Errors
    /// As [`RedisFilter::insert`]; keys of earlier batches are inserted.
    pub fn insert_all_encoded<K: AsRef<[u8]>>(
        &self,
        keys: impl IntoIterator<Item = K>,
    ) -> Result<u64, RedisFilterError> {
        let mut keys = keys.into_iter().peekable();
        let mut changed = 0u64;
        while keys.peek().is_some() {
            let (shards, bits) = self.batch(&mut keys, true)?;
            let batch_changed = bits.iter().filter(|old| old.contains(&0)).count() as u64;
            if batch_changed > 0 {
                self.guarded(
                    redis::cmd("EVAL")
                        .arg(GUARDED_HINCRBY)
                        .arg(1)
                        .arg(self.meta_key())
                        .arg(self.creation.hex())
                        .arg(batch_changed),
                )?;
            }
            self.acknowledge(&shards)?;
            changed += batch_changed;
        }
        Ok(changed)
    }

    fn acknowledge(&self, shards: &[u32]) -> Result<(), RedisFilterError> {
        let Some((wanted, timeout)) = self.acks else {
            return Ok(());
        };
        let mut conn = self.conn();
        let mut seen: Vec<u32> = shards.to_vec();
        seen.sort_unstable();
        seen.dedup();
        // On one server a WAIT covers every write of the connection; in a cluster, one per
        // node, reached through a shard it holds.
        if !self.target.is_cluster() {
            seen.truncate(1);
        }
        for shard in seen {
            let acked = conn.wait_for_replicas(&shard_key(&self.name, shard), wanted, timeout)?;
            if acked < wanted {
                return Err(RedisFilterError::NotAcknowledged {
                    wanted,
                    acked,
                    timeout,
                });
            }
        }
        Ok(())
    }

    /// Whether a text key may have been inserted (`false` is definite).
    ///
    /// # Errors
    /// [`RedisFilterError::LostState`] or a Redis error: never treat the key as absent then.
    pub fn contains(&self, key: &str) -> Result<bool, RedisFilterError> {
        let foreign = self.config.has_foreign_tables() && !key.is_ascii();
        Ok(foreign || self.contains_encoded(&self.config.encode_str(key))?)
    }

    /// Whether a byte key may have been inserted.
    ///
    /// # Errors
    /// [`RedisFilterError::Key`] for non-UTF-8 keys under a text encoding, or as
    /// [`RedisFilter::contains`].
    pub fn contains_bytes(&self, key: &[u8]) -> Result<bool, RedisFilterError> {
        let encoded = self.config.encode_bytes(key)?;
        let foreign = self.config.has_foreign_tables() && !key.is_ascii();
        Ok(foreign || self.contains_encoded(&encoded)?)
    }

    /// Whether an encoded key may have been inserted. With Unicode tables other than this
    /// build's, always *maybe* (as for a local filter).
    ///
    /// # Errors
    /// As [`RedisFilter::contains`].
    pub fn contains_encoded(&self, key: &EncodedKey<'_>) -> Result<bool, RedisFilterError> {
        Ok(self
            .contains_each_encoded([key.as_bytes()])?
            .first()
            .copied()
            .unwrap_or(true))
    }

    /// Whether each encoded key may have been inserted, pipelined a batch at a time.
    ///
    /// # Errors
    /// As [`RedisFilter::contains`]: no answer is returned for any key then.
    pub fn contains_each_encoded<K: AsRef<[u8]>>(
        &self,
        keys: impl IntoIterator<Item = K>,
    ) -> Result<Vec<bool>, RedisFilterError> {
        let foreign = self.config.has_foreign_tables();
        let mut keys = keys.into_iter().peekable();
        let mut answers = Vec::new();
        while keys.peek().is_some() {
            let (_, bits) = self.batch(&mut keys, false)?;
            answers.extend(
                bits.iter()
                    .map(|bits| foreign || bits.iter().all(|&b| b == 1)),
            );
        }
        Ok(answers)
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
        Ok(meta.header)
    }

    /// Records that the bits cover the primary store up to `generation`, at the history
    /// point `binding` (as a snapshot header does). Only a caller that knows every key of the
    /// store up to `generation` has its bits set may say so.
    ///
    /// # Errors
    /// A Redis error, or [`RedisFilterError::LostState`] if the filter was recreated.
    pub fn set_coverage(
        &self,
        generation: DatasetGeneration,
        binding: Option<StoreBinding>,
    ) -> Result<(), RedisFilterError> {
        let fields = meta::coverage_fields(generation, binding);
        // Only if the metadata is still this filter's: a recreated filter never inherits a
        // coverage record made for the one it replaced.
        self.set_fields(fields.iter().map(|(f, v)| (*f, v.as_str())))
    }

    /// Set bits and estimates, counted by Redis (`BITCOUNT` per shard).
    ///
    /// # Errors
    /// As [`RedisFilter::check_shards`].
    pub fn info(&self) -> Result<Info, RedisFilterError> {
        let header = self.header()?;
        self.check_shards()?;
        let mut per_shard = Vec::with_capacity(self.shards as usize);
        let mut conn = self.conn();
        for first in (0..self.shards).step_by(BATCH) {
            let cmds = (first..self.shards.min(first + BATCH as u32))
                .map(|s| {
                    redis::cmd("BITCOUNT")
                        .arg(shard_key(&self.name, s))
                        .arg(MARKER_BYTES)
                        .arg(MARKER_BYTES + self.shard_bits / 8 - 1)
                        .clone()
                })
                .collect();
            for value in conn.pipeline(cmds)? {
                per_shard.push(u64::try_from(int(&value)?).unwrap_or(0));
            }
        }
        drop(conn);
        let set_bits: u64 = per_shard.iter().sum();
        let (m, k) = (self.config.bits(), self.config.hashes());
        Ok(Info {
            header,
            set_bits,
            estimated_items: estimate::estimated_items(set_bits, m, k),
            estimated_false_positive_rate: estimate::partitioned_false_positive_rate(
                per_shard,
                self.shard_bits,
                k,
            ),
        })
    }

    /// Writes the filter as a snapshot file (atomically): the header from the metadata, read
    /// first, then the bits, shard by shard, a megabyte at a time. The snapshot is the one a
    /// local filter with the same configuration and keys would write.
    ///
    /// # Errors
    /// [`RedisFilterError::LostState`] if a shard is not intact, a Redis error, or a file
    /// error.
    pub fn export(&self, path: &Path) -> Result<Header, RedisFilterError> {
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
                let mut bytes: Vec<u8> = self.conn().query(
                    redis::cmd("GETRANGE")
                        .arg(&key)
                        .arg(start)
                        .arg(start + len - 1),
                )?;
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

    /// Loads a snapshot file (of the sharded layout) into a new filter `name`: the metadata
    /// first (not ready), the bits shard by shard, and the filter is marked ready only after
    /// the whole payload passed its checksum.
    ///
    /// # Errors
    /// A file error ([`RedisFilterError::Read`]: not a snapshot, damaged, over
    /// `max_payload_len`), [`RedisFilterError::NotSharded`],
    /// [`RedisFilterError::AlreadyExists`], or a Redis error.
    pub fn import(
        target: &RedisTarget,
        name: &str,
        path: &Path,
        max_payload_len: u64,
    ) -> Result<Self, RedisFilterError> {
        let reader =
            SnapshotReader::open(path, &DecodeOptions::with_max_payload_len(max_payload_len))?;
        let header = reader.header().clone();
        let config = config_of(name, &header)?;
        let filter = Self::create_with_header(target, name, config, header, BUILDING)?;
        match filter.fill_from(reader, name) {
            Ok(()) => Ok(filter),
            Err(e) => {
                // Nothing half-imported stays behind under the name (best effort: Redis may be
                // the reason it failed).
                let _ = Self::delete(target, name, Some(filter.shards));
                Err(e)
            }
        }
    }

    fn fill_from(
        &self,
        reader: SnapshotReader<std::fs::File>,
        name: &str,
    ) -> Result<(), RedisFilterError> {
        let filter = self;
        let shard_bytes = filter.shard_bits / 8;
        let mut offset = 0u64;
        let mut pending: Vec<Cmd> = Vec::new();
        let flush = |pending: &mut Vec<Cmd>| -> Result<(), RedisFilterError> {
            filter.conn().pipeline(std::mem::take(pending)).map(|_| ())
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
                        pending.push(
                            redis::cmd("SETRANGE")
                                .arg(shard_key(name, u32::try_from(shard).unwrap_or(u32::MAX)))
                                .arg(MARKER_BYTES + within)
                                .arg(reversed)
                                .clone(),
                        );
                        if pending.len() >= 64 {
                            flush(&mut pending).map_err(ImportError::Redis)?;
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
        flush(&mut pending)?;
        filter.check_shards()?;
        filter.set_state(READY)
    }
}

/// `HSET` of `ARGV[2..]` on `KEYS[1]` only if its `creation` is `ARGV[1]`; -1 otherwise.
const GUARDED_HSET: &str = "if redis.call('HGET', KEYS[1], 'creation') ~= ARGV[1] then return -1 end \
     return redis.call('HSET', KEYS[1], unpack(ARGV, 2))";

/// `HINCRBY KEYS[1] items ARGV[2]` only if its `creation` is `ARGV[1]`; -1 otherwise.
const GUARDED_HINCRBY: &str = "if redis.call('HGET', KEYS[1], 'creation') ~= ARGV[1] then return -1 end \
     return redis.call('HINCRBY', KEYS[1], 'items', ARGV[2])";

/// Refuses a filter that would not fit the server's memory: over what `maxmemory` leaves, or
/// (without a limit) over half the machine's memory. In a cluster the node reached is
/// asked, with the shards spread over the masters.
fn check_memory(
    conn: &mut Conn,
    target: &RedisTarget,
    needed: u64,
) -> Result<(), RedisFilterError> {
    // One report per node (a cluster answers INFO from every node).
    let reports: Vec<String> = match conn.query::<Value>(redis::cmd("INFO").arg("memory"))? {
        Value::Map(nodes) => nodes.into_iter().filter_map(|(_, v)| text(v)).collect(),
        other => text(other).into_iter().collect(),
    };
    let spare = |info: &str| -> Option<u64> {
        let field = |name: &str| -> u64 {
            info.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0)
        };
        let (max, used, total) = (
            field("maxmemory"),
            field("used_memory"),
            field("total_system_memory"),
        );
        if max > 0 {
            Some(max.saturating_sub(used))
        } else if total > 0 {
            Some((total / 2).saturating_sub(used))
        } else {
            None
        }
    };
    let Some(available) = reports.iter().filter_map(|r| spare(r)).min() else {
        return Ok(());
    };
    let share = if target.is_cluster() {
        let nodes: String = conn.query(redis::cmd("CLUSTER").arg("NODES"))?;
        let masters = nodes
            .lines()
            .filter(|l| l.contains("master"))
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

fn text(value: Value) -> Option<String> {
    match value {
        Value::BulkString(bytes) => String::from_utf8(bytes).ok(),
        Value::SimpleString(s) => Some(s),
        Value::VerbatimString { text, .. } => Some(text),
        _ => None,
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

fn read_meta(conn: &mut Conn, name: &str) -> Result<meta::Meta, RedisFilterError> {
    let key = meta_key(name);
    let map: HashMap<String, String> = conn.query(redis::cmd("HGETALL").arg(&key))?;
    if map.is_empty() {
        return Err(RedisFilterError::NotFound {
            name: name.to_owned(),
            key,
        });
    }
    let state = map.get("state").cloned().unwrap_or_default();
    if state != READY && state != BUILDING {
        return Err(RedisFilterError::NotReady {
            name: name.to_owned(),
            state,
        });
    }
    meta::parse(name, &map)
}

fn config_of(name: &str, header: &Header) -> Result<FilterConfig, RedisFilterError> {
    FilterConfig::from_header(header).map_err(|source| RedisFilterError::Config {
        name: name.to_owned(),
        source,
    })
}

fn int(value: &Value) -> Result<i64, RedisFilterError> {
    match value {
        Value::Int(n) => Ok(*n),
        other => Err(RedisFilterError::Protocol(format!(
            "expected an integer, got {other:?}"
        ))),
    }
}

fn ints(value: &Value) -> Result<Vec<i64>, RedisFilterError> {
    match value {
        Value::Array(items) => items.iter().map(int).collect(),
        other => Err(RedisFilterError::Protocol(format!(
            "expected an array of integers, got {other:?}"
        ))),
    }
}
