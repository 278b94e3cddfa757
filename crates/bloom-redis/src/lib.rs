//! One Bloom filter shared by a fleet, held in Redis or Redis Cluster.
//!
//! A [`RedisFilter`] keeps its bits in `S` shard keys in the sharded layout of
//! `docs/format.md`: all of a key's bits fall in one shard, so every insert and query is one
//! `BITFIELD` command on one node (pipelined in batches), and Redis Cluster spreads the shards
//! over its slots by their hash tags. A metadata hash beside the shards holds what a snapshot
//! header holds; every shard starts with the filter's creation marker, which every command
//! reads, so a shard that Redis lost (a restart without persistence, `FLUSHALL`, a deleted
//! key, a filter recreated under the same name) is reported as
//! [`RedisFilterError::LostState`] and never answered from.
//!
//! Where the servers load the `bloom` Redis module (crate `bloom-redis-module`), keys are
//! hashed inside the server (`BLOOM.MADD` / `BLOOM.MEXISTS`, one per shard of a batch) into
//! the same bits; elsewhere, and for a node or user that refuses the module's commands, the
//! plain `BITFIELD`s are sent ([`ModuleUse`], [`RedisTarget::with_module`]).
//!
//! Keys that come as a stream (a key file, a socket) go through [`RedisFilter::lookups`] and
//! [`RedisFilter::inserts`]: batch after batch, up to three pipelines on the wire while the
//! caller reads the next, with no pause between one call's keys and the next.
//!
//! [`RedisFilter::export`] writes the snapshot a local `bloom_core::BloomFilter` with the
//! same configuration and keys would write, and [`RedisFilter::import`] loads one back.
//! [`SharedFilteredStore`] is check-then-confirm over a primary store with the filter in
//! Redis: bits before the store commit, and any Redis error turns queries into store
//! lookups, never into "absent". A fleet's processes open it with
//! [`SharedFilteredStore::open_or_create`], which creates the filter from the store when Redis
//! has none (one process of many starting at once). Async services put it behind
//! `bloom_store::Coalesced` (it implements `bloom_store::Batched`): `async` inserts and
//! lookups, with tasks' single keys gathered into one pipeline and one store transaction. The
//! blocking API works inside a tokio runtime too, but blocks the task that calls it.
//!
//! ```no_run
//! use bloom_core::{FilterConfig, FilterParams, Layout};
//! use bloom_redis::{RedisFilter, RedisTarget};
//!
//! let target = RedisTarget::single("redis://127.0.0.1:6379/");
//! let params = FilterParams::planned(Layout::sharded(16)?, 1_000_000, 0.01)?;
//! let filter = RedisFilter::create(&target, "seen", FilterConfig::new(params))?;
//! filter.insert("record-1")?;
//! assert!(filter.contains("record-1")?);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The key scheme (`bloom_redis_protocol::keys`, which the `bloom` module shares), runnable
//! without a server:
//!
//! ```
//! assert_eq!(bloom_redis::meta_key("seen"), "bloom:{seen}:meta");
//! assert_eq!(bloom_redis::shard_key("seen", 3), "bloom:{seen:3}");
//! ```

#![forbid(unsafe_code)]

mod connection;
mod epoch;
mod error;
mod filter;
mod module;
mod node;
mod shared;
mod transport;
mod wire;

pub use bloom_redis_protocol::keys::{meta_key, shard_key};
pub use bloom_redis_protocol::meta::Durability;
pub use connection::{DEFAULT_TIMEOUT, RedisTarget};
pub use error::RedisFilterError;
pub use filter::{
    Info, Inserts, Lookups, RedisFilter, Restore, fit_to_allocator, plan_for_allocator,
};
pub use module::ModuleUse;
/// The Redis client whose errors [`RedisFilterError::Redis`] carries, re-exported so that
/// callers can match them without depending on it themselves.
pub use redis;
pub use shared::{SharedError, SharedFilteredStore, SharedMetrics, SharedOpen};
