//! A Redis module that works on the filters `bloom-redis` keeps in Redis, hashing keys inside
//! the server: the same shard keys, the same layouts and position rules, the same markers, so
//! that a filter written by either path answers identically on both, bit for bit.
//!
//! Load it with `redis-server --loadmodule /path/to/libbloom_redis_module.so`. `bloom-redis`
//! and the `bloom` command line use it when every node they reach lists it (`MODULE LIST`,
//! module `bloom`), and plain `BITFIELD`s otherwise.
//!
//! Every command works on one shard key, so that Redis Cluster routes it by the shard's hash
//! tag; the filter's creation id and its configuration text
//! (`bloom_redis_protocol::config::config_text`) travel with it, and the module derives the
//! shard's markers from them and checks both before it reads or writes a bit:
//!
//! | command | reply |
//! | --- | --- |
//! | `BLOOM.MADD shard creation config ENCODED\|RAW key [key ...]` | `[head, tail, all_set]` |
//! | `BLOOM.MEXISTS shard creation config ENCODED\|RAW key [key ...]` | `[head, tail, all_set]` |
//! | `BLOOM.RESERVE shard creation config` | `[head, tail]` of the shard made |
//! | `BLOOM.SHARD shard creation config` | `[head, tail, length, bits set]` |
//! | `BLOOM.INFO` | the module's version, rules, layouts, encodings and Unicode tables |
//!
//! `head` and `tail` are the shard's two markers as `BITFIELD GET i64` reads them (0 for a
//! missing key, and `tail` 0 for a value of another length than the shard's). When they are
//! not the shard's own, nothing was read or written and no `all_set` follows: the shard is
//! lost. `all_set` is a string of one byte per key, `1` for a key all of whose bits were set
//! (before the add, for `BLOOM.MADD`) and `0` otherwise. What a command changes is replicated
//! as plain commands (`SETRANGE`, `SET`), so replicas and the AOF need no module. The
//! byte-level protocol is in `docs/format.md`, "The Redis module".
//!
//! The shard logic is plain Rust over the shard's bytes; a test of it without a server:
//!
//! ```
//! // Doc tests cannot reach a cdylib's items; the module's own tests cover them. What a
//! // client sends as the configuration is bloom-redis-protocol's text:
//! use bloom_core::{FilterConfig, FilterParams, Layout};
//! use bloom_format::DatasetGeneration;
//! use bloom_redis_protocol::config::config_text;
//!
//! let params = FilterParams::planned(Layout::sharded(16)?, 1_000_000, 0.01)?;
//! let header = FilterConfig::new(params).to_header(DatasetGeneration::ZERO, 0);
//! assert_eq!(config_text(&header).lines().count(), 10);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod commands;
mod dirty;
mod error;
mod shard;
