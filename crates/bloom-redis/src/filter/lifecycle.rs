//! A filter's life in Redis: created (or imported, by `copy`), opened, deleted.

use std::collections::HashSet;
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use bloom_core::FilterConfig;
use bloom_format::{DatasetGeneration, Header};
use bloom_redis_protocol::config::config_text;
use bloom_redis_protocol::keys::{epoch_key, meta_key, shard_key};
use bloom_redis_protocol::marker::ShardMarkers;
use bloom_redis_protocol::meta::{self, BUILDING, Creation, Durability, READY};

use crate::connection::RedisTarget;
use crate::error::RedisFilterError;
use crate::module;
use crate::node::text;
use crate::wire::Commands;

use super::{
    RedisFilter, SHARD_FRAME_BYTES, SHARDS_PER_PIPELINE, check_name, copy, counters, int,
    shard_geometry,
};

/// A new filter's creation id, from the operating system's random source.
pub(crate) fn random_creation() -> Result<Creation, RedisFilterError> {
    loop {
        let mut bytes = [0u8; 16];
        getrandom::fill(&mut bytes).map_err(|e| {
            RedisFilterError::Protocol(format!("the operating system's random source failed: {e}"))
        })?;
        if let Some(creation) = Creation::from_bytes(bytes) {
            return Ok(creation);
        }
    }
}

impl RedisFilter {
    /// Creates filter `name` with `config` (which must use the sharded layout) and no
    /// durability requirement: [`RedisFilter::create_with`].
    ///
    /// # Errors
    /// As [`RedisFilter::create_with`].
    pub fn create(
        target: &RedisTarget,
        name: &str,
        config: FilterConfig,
    ) -> Result<Self, RedisFilterError> {
        Self::create_with(target, name, config, Durability::None)
    }

    /// Creates filter `name` with `config` and the `durability` every writer must give each
    /// insert: its shards, each written whole with its markers, their epoch records, then its
    /// metadata, marked ready last. Fails if a filter of that name exists (even one whose
    /// creation was interrupted: [`RedisFilter::delete`] it first).
    ///
    /// # Errors
    /// [`RedisFilterError::InvalidName`], [`RedisFilterError::NotSharded`],
    /// [`RedisFilterError::ShardTooLarge`], [`RedisFilterError::AlreadyExists`],
    /// [`RedisFilterError::TooLarge`], or a Redis error.
    pub fn create_with(
        target: &RedisTarget,
        name: &str,
        config: FilterConfig,
        durability: Durability,
    ) -> Result<Self, RedisFilterError> {
        let header = config.to_header(DatasetGeneration::ZERO, 0);
        Self::create_with_header(target, name, config, header, durability, READY)
    }

    pub(crate) fn create_with_header(
        target: &RedisTarget,
        name: &str,
        config: FilterConfig,
        header: Header,
        durability: Durability,
        final_state: &str,
    ) -> Result<Self, RedisFilterError> {
        check_name(name)?;
        let (shards, shard_bits) = shard_geometry(&config)?;
        let mut conn = target.connect()?;
        let live = conn.live(target.deadline_from_now())?;
        // New filters are counted.
        let module = module::decide(
            target.module(),
            live.into_iter().map(|(_, n)| n.module),
            true,
        )?;
        copy::check_memory(
            &mut conn,
            target,
            u64::from(shards) * (shard_bits / 8 + SHARD_FRAME_BYTES),
        )?;
        let creation = random_creation()?;
        let key = meta_key(name);
        let claimed = int(&conn.query(
            &[
                b"HSETNX",
                key.as_bytes(),
                b"creation",
                creation.hex().as_bytes(),
            ],
            Some(key.as_bytes()),
        )?)?;
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
            markers: ShardMarkers::for_filter(creation, &header),
            config_text: config_text(&header),
            module: AtomicBool::new(module),
            shard_bits,
            shards,
            durability,
            acks: None,
            verified: Mutex::new(HashSet::new()),
            marked: Mutex::new(HashSet::new()),
            tables_mixed: AtomicBool::new(false),
            counted: true,
            seen: counters::Seen::of(creation, shards),
        };
        let fields = meta::fields(&header, creation, BUILDING, durability);
        filter.set_fields(fields.iter().map(|(f, v)| (*f, v.as_str())))?;
        if let Err(e) = filter.allocate_shards() {
            // The name is claimed: nothing half-made stays behind under it (best effort).
            let _ = Self::delete(target, name);
            return Err(e);
        }
        // What the filter will ask of every insert holds for its creation too: a server that
        // cannot give it fails the creation, not the first insert.
        if let Err(e) = filter.make_live_durable() {
            // Nothing half-made stays behind under the name (best effort).
            let _ = Self::delete(target, name);
            return Err(e);
        }
        let finished = filter
            .record_nodes(Some((header.dataset_generation, header.store)), &[])
            .and_then(|()| {
                if final_state == READY {
                    filter.set_fields([("state", READY)])
                } else {
                    Ok(())
                }
            });
        if let Err(e) = finished {
            let _ = Self::delete(target, name);
            return Err(e);
        }
        Ok(filter)
    }

    /// Opens filter `name`, or creates it with `config` and `durability` when no filter has
    /// that name ([`RedisFilter::create_with`]); when two processes do this at once, one
    /// creates and the other waits (within the target's timeout) for that creation to finish,
    /// then opens what it made. An existing filter must have been made
    /// with `config` (every part that decides positions: layout, bits, positions per key,
    /// rule, encoding and salt); its durability is the one it was made with
    /// ([`RedisFilter::durability`]; a handle can ask for more with
    /// [`RedisFilter::require_replica_acks`]).
    ///
    /// ```no_run
    /// use bloom_core::{FilterConfig, FilterParams, Layout};
    /// use bloom_redis::{Durability, RedisFilter, RedisTarget};
    ///
    /// let target = RedisTarget::single("redis://127.0.0.1:6379/");
    /// let params = FilterParams::planned(Layout::sharded(16)?, 1_000_000, 0.01)?;
    /// let seen = RedisFilter::open_or_create(&target, "seen", FilterConfig::new(params), Durability::None)?;
    /// seen.insert("record-1")?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`RedisFilterError::Incompatible`] for a filter of that name with another
    /// configuration, or as [`RedisFilter::open`] and [`RedisFilter::create_with`].
    pub fn open_or_create(
        target: &RedisTarget,
        name: &str,
        config: FilterConfig,
        durability: Durability,
    ) -> Result<Self, RedisFilterError> {
        let deadline = target.deadline_from_now();
        let opened = match Self::open(target, name) {
            Err(RedisFilterError::NotFound { .. }) => {
                match Self::create_with(target, name, config.clone(), durability) {
                    Err(RedisFilterError::AlreadyExists { .. }) => {
                        Self::open_when_ready(target, name, deadline)
                    }
                    created => return created,
                }
            }
            // Another process is creating it.
            Err(RedisFilterError::NotReady { .. }) => Self::open_when_ready(target, name, deadline),
            opened => opened,
        }?;
        match opened.config().mismatch(&config) {
            None => Ok(opened),
            Some(mismatch) => Err(RedisFilterError::Incompatible {
                name: name.to_owned(),
                mismatch,
            }),
        }
    }

    /// Opens filter `name` once the creation another process is running has finished: a
    /// filter that is not ready yet is opened again every 50 ms until `deadline` (an
    /// interrupted creation stays [`RedisFilterError::NotReady`]).
    fn open_when_ready(
        target: &RedisTarget,
        name: &str,
        deadline: std::time::Instant,
    ) -> Result<Self, RedisFilterError> {
        loop {
            match Self::open(target, name) {
                // Claimed, its metadata not written yet, or its shards being written.
                Err(RedisFilterError::NotReady { .. } | RedisFilterError::Metadata { .. })
                    if std::time::Instant::now() < deadline =>
                {
                    std::thread::sleep(Duration::from_millis(50));
                }
                opened => return opened,
            }
        }
    }

    /// Opens filter `name`: its metadata must be complete and valid, and the filter ready.
    /// Shards are checked as they are used (every command reads their markers), so opening
    /// costs one round trip whatever the shard count.
    ///
    /// # Errors
    /// [`RedisFilterError::NotFound`], [`RedisFilterError::NotReady`],
    /// [`RedisFilterError::Metadata`], [`RedisFilterError::Invalid`],
    /// [`RedisFilterError::Config`], or a Redis error.
    pub fn open(target: &RedisTarget, name: &str) -> Result<Self, RedisFilterError> {
        check_name(name)?;
        let mut conn = target.connect()?;
        let meta = copy::read_meta(&mut conn, name)?;
        let live = conn.live(target.deadline_from_now())?;
        let module = module::decide(
            target.module(),
            live.into_iter().map(|(_, n)| n.module),
            meta.counted,
        )?;
        if meta.state != READY {
            return Err(RedisFilterError::NotReady {
                name: name.to_owned(),
                state: meta.state,
            });
        }
        let config =
            FilterConfig::from_header(&meta.header).map_err(|cause| RedisFilterError::Config {
                name: name.to_owned(),
                cause,
            })?;
        // Metadata that no creation could have written (shards past Redis's string limit, a
        // rule Redis filters are never built with) is a damaged filter, not a usage error.
        let (shards, shard_bits) = shard_geometry(&config).map_err(|e| match e {
            RedisFilterError::ShardTooLarge { shard_bits, .. } => RedisFilterError::Metadata {
                name: name.to_owned(),
                field: "bits",
                found: meta.header.bit_count.to_string(),
                expected: format!(
                    "shards Redis can hold (these would be {shard_bits} bits each, past its 512 MiB per key): the metadata is damaged"
                ),
            },
            RedisFilterError::NotSharded { rule, .. } => RedisFilterError::Metadata {
                name: name.to_owned(),
                field: "rule",
                found: rule,
                expected: "sha256-double or xxh3-128: the metadata is damaged".into(),
            },
            other => other,
        })?;
        // Keys of other tables than the recorded ones: every key outside ASCII is *maybe*.
        let config = if meta.tables_mixed {
            config.with_tables(bloom_core::UnicodeTables::default())
        } else {
            config
        };
        Ok(Self {
            target: target.clone(),
            conn: Mutex::new(conn),
            name: name.to_owned(),
            config,
            creation: meta.creation,
            markers: ShardMarkers::for_filter(meta.creation, &meta.header),
            config_text: config_text(&meta.header),
            module: AtomicBool::new(module),
            shard_bits,
            shards,
            durability: meta.durability,
            acks: None,
            verified: Mutex::new(HashSet::new()),
            marked: Mutex::new(HashSet::new()),
            tables_mixed: AtomicBool::new(meta.tables_mixed),
            counted: meta.counted,
            seen: counters::Seen::of(meta.creation, shards),
        })
    }

    /// Deletes filter `name`: its metadata, every shard and every epoch record. Returns
    /// whether it existed. A filter whose metadata is gone (lost, or a creation interrupted
    /// before it was written) has no record of its shard count, so every shard name it could
    /// have is deleted (up to [`MAX_SHARDS`](bloom_core::MAX_SHARDS), in pipelines of 256).
    ///
    /// # Errors
    /// [`RedisFilterError::InvalidName`] or a Redis error.
    pub fn delete(target: &RedisTarget, name: &str) -> Result<bool, RedisFilterError> {
        check_name(name)?;
        let mut conn = target.connect()?;
        let key = meta_key(name);
        let recorded = conn.query(&[b"HGET", key.as_bytes(), b"shards"], Some(key.as_bytes()))?;
        let shards = text(&recorded)
            .and_then(|s| s.parse::<u32>().ok())
            .unwrap_or(bloom_core::MAX_SHARDS)
            .min(bloom_core::MAX_SHARDS);
        let deadline = target.deadline_from_now();
        let mut deleted = 0i64;
        let mut refused = None;
        for first in (0..shards).step_by(SHARDS_PER_PIPELINE as usize) {
            let mut commands = Commands::new();
            let mut keys = Vec::new();
            for s in first..shards.min(first + SHARDS_PER_PIPELINE) {
                let shard = shard_key(name, s);
                commands.push(&[b"DEL", shard.as_bytes(), epoch_key(name, s).as_bytes()]);
                keys.push(shard.into_bytes());
            }
            // Every DEL is tried (a refused one does not keep the others, nor the metadata,
            // from going); the first refusal is the error.
            for value in conn.pipeline_by(commands, keys, deadline)?.values {
                match crate::connection::server_error(value).and_then(|v| int(&v)) {
                    Ok(n) => deleted += n,
                    Err(e) => refused = refused.or(Some(e)),
                }
            }
        }
        deleted += int(&conn.query(&[b"DEL", key.as_bytes()], Some(key.as_bytes()))?)?;
        match refused {
            Some(e) => Err(e),
            None => Ok(deleted > 0),
        }
    }
}
