//! Test support for the bloom workspace, and nothing else: the servers and helpers the tests,
//! benches and examples of the other crates share. It is never published and is only ever a
//! dev-dependency.
//!
//! - `redis` (feature `redis`): real `redis-server` processes, Redis Cluster, Sentinel and
//!   TLS, on 127.0.0.1 with random free ports and temporary directories, stopped on drop.
//!   `cargo xtask test` installs the programs they run when they are missing.
//! - `keys`: SplitMix64, a deterministic generator, so that probes and examples make the same
//!   choices in every run.
//! - `bench`: how the benchmarks print their paired-round ratios.
//! - `wait`: waiting for what a test is not told of as it happens, bounded only against a
//!   hang.
//! - `telemetry` (feature `telemetry`): the events and a Prometheus scrape of what a closure
//!   did, as an operator's subscriber and exporter would see them.
//!
//! The throwaway PostgreSQL server is `bloom_postgres::testing` (feature `testing` of
//! bloom-postgres).

pub mod bench;
pub mod keys;
#[cfg(feature = "redis")]
pub mod redis;
#[cfg(feature = "telemetry")]
pub mod telemetry;
pub mod wait;
