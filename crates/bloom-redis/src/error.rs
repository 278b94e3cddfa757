//! [`RedisFilterError`]: everything that can stop a Redis-held filter from answering.

use std::time::Duration;

/// Why a Redis-held filter could not be created, opened, written or read. None of these is
/// ever turned into an answer: a caller that gets one must not treat a key as absent.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RedisFilterError {
    /// Redis could not be reached, or a command failed.
    #[error("Redis: {0}")]
    Redis(redis::RedisError),
    /// Redis did not answer in time (the connection is then dropped and remade).
    #[error("Redis did not answer within {timeout:?}")]
    Timeout {
        /// The configured timeout.
        timeout: Duration,
    },
    /// The filter name cannot be used (it would break the key scheme).
    #[error(
        "invalid filter name {name:?}: use 1 to 200 characters from A-Z a-z 0-9 . _ - (no braces, colons or spaces)"
    )]
    InvalidName {
        /// The name given.
        name: String,
    },
    /// No filter of that name exists: its metadata is missing (never created, deleted, or
    /// lost with the data of a Redis restarted without persistence).
    #[error(
        "no filter named {name} in Redis (its metadata key {key} is missing: never created, deleted, or lost)"
    )]
    NotFound {
        /// The filter name.
        name: String,
        /// The metadata key.
        key: String,
    },
    /// A filter of that name already exists.
    #[error("a filter named {name} already exists in Redis")]
    AlreadyExists {
        /// The filter name.
        name: String,
    },
    /// [`RedisFilter::open_or_create`](crate::RedisFilter::open_or_create) found a filter of
    /// that name made with another configuration.
    #[error("a filter named {name} exists in Redis with another {mismatch}")]
    Incompatible {
        /// The filter name.
        name: String,
        /// What differs.
        mismatch: bloom_core::Mismatch,
    },
    /// The filter is being created, or its creation was interrupted.
    #[error(
        "filter {name} is not ready (state {state:?}): its creation is running (wait for it) or was interrupted (then delete it and create it again)"
    )]
    NotReady {
        /// The filter name.
        name: String,
        /// The state recorded.
        state: String,
    },
    /// A metadata field is missing or not what it must be.
    #[error("filter {name}: metadata field {field} is {found:?}; expected {expected}")]
    Metadata {
        /// The filter name.
        name: String,
        /// The field.
        field: &'static str,
        /// The value found (empty when missing).
        found: String,
        /// What was expected.
        expected: String,
    },
    /// The metadata describes a filter this build cannot answer for.
    #[error("filter {name}: {cause}")]
    Config {
        /// The filter name.
        name: String,
        /// Why (shown in the message, not returned by `source()`).
        cause: bloom_core::SnapshotError,
    },
    /// The metadata fails the snapshot format's checks.
    #[error("filter {name}: {cause}")]
    Invalid {
        /// The filter name.
        name: String,
        /// Why (shown in the message, not returned by `source()`).
        cause: bloom_format::DecodeError,
    },
    /// A shard's contents are gone or belong to another filter: Redis lost data (a restart
    /// without persistence, `FLUSHALL`, a deleted key) or the filter was recreated. The
    /// filter must not be answered from until it is rebuilt.
    #[error(
        "filter {name}: shard {shard} ({key}) has lost its contents ({detail}); the filter cannot be trusted until it is rebuilt"
    )]
    LostState {
        /// The filter name.
        name: String,
        /// The shard number.
        shard: u32,
        /// The shard's key.
        key: String,
        /// What was found.
        detail: String,
    },
    /// The target asks for the `bloom` module ([`ModuleUse::Required`](crate::ModuleUse))
    /// and a node the filter reached does not list it (`MODULE LIST`), or refused one of its
    /// commands.
    #[error(
        "the bloom Redis module is required and a node does not have it (or refuses its commands): load it with --loadmodule, or use plain commands"
    )]
    ModuleMissing,
    /// A filter that is not sharded was given where a Redis filter is made from it.
    #[error(
        "a Redis filter needs the sharded layout (sharded-S) and the sha256-double or xxh3-128 rule; this one is {layout} with {rule}"
    )]
    NotSharded {
        /// The layout given.
        layout: String,
        /// The rule given.
        rule: String,
    },
    /// The filter would not fit the server's memory (`maxmemory`, or half the machine's
    /// memory when Redis has no limit): creating it would evict keys or get Redis killed.
    #[error(
        "the filter needs {needed} bytes of Redis memory; the server has {available} to spare (its maxmemory, or half the machine's memory); use fewer bits or a larger server"
    )]
    TooLarge {
        /// Bytes the shards need.
        needed: u64,
        /// Bytes the server can spare.
        available: u64,
    },
    /// A shard would exceed Redis's 512 MiB string limit.
    #[error(
        "shards of {shard_bits} bits exceed Redis's 512 MiB per key; use at least {needed} shards"
    )]
    ShardTooLarge {
        /// Bits per shard.
        shard_bits: u64,
        /// The fewest shards that fit.
        needed: u64,
    },
    /// A key could not be encoded.
    #[error(transparent)]
    Key(#[from] bloom_core::KeyError),
    /// Fewer replicas acknowledged a write than required.
    #[error(
        "only {acked} of {wanted} replicas acknowledged the write within {timeout:?}; the key must not be committed"
    )]
    NotAcknowledged {
        /// Replicas required.
        wanted: usize,
        /// Replicas that acknowledged.
        acked: usize,
        /// The wait.
        timeout: Duration,
    },
    /// A node answering for a shard may have lost acknowledged writes since the filter last
    /// knew the shard whole (it restarted, failed over, or was replaced), and the filter's
    /// durability does not cover it: nothing is answered from the filter until every key is
    /// added again and the filter declared whole ([`RedisFilter::restore_whole`](crate::RedisFilter::restore_whole);
    /// `bloom redis add --complete`), or it is rebuilt.
    #[error(
        "filter {name}: shard {shard} may have lost acknowledged writes: {why}; the filter answers nothing until every key is added again (bloom redis add --complete) or it is rebuilt"
    )]
    Unverified {
        /// The filter name.
        name: String,
        /// The shard.
        shard: u32,
        /// What changed.
        why: String,
    },
    /// The node that took an operation's writes changed while it ran (a restart or a
    /// failover): the writes may be lost, so the operation failed.
    #[error(
        "the Redis node that took the writes changed (a restart or a failover) while the operation ran"
    )]
    NodeChanged,
    /// A write could not be made as durable as the filter asks.
    #[error("the write is not durable as the filter asks: {why}; the key must not be committed")]
    NotDurable {
        /// Why.
        why: String,
    },
    /// Redis refused a command (`NOPERM`: the user lacks the rights it needs).
    #[error("Redis refused a command: {code} {detail}")]
    Server {
        /// The error code (`NOPERM`, `ERR`, ...).
        code: String,
        /// The rest of the message.
        detail: String,
    },
    /// `rediss://` was given, and this build has no TLS (the `tls` feature).
    #[error("rediss:// needs TLS, which this build of bloom-redis lacks (the tls feature)")]
    TlsUnavailable,
    /// The certificate authority file could not be used.
    #[error("the TLS certificate authority file cannot be used: {0}")]
    TlsCa(String),
    /// A reply had an unexpected shape.
    #[error("unexpected reply from Redis: {0}")]
    Protocol(String),
    /// A URL of the target is not a Redis URL (the URL itself is never shown: it may carry a
    /// password).
    #[error("URL number {index} of the target is not a Redis URL ({reason})")]
    InvalidUrl {
        /// Which URL, from 1.
        index: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// The target cannot serve the filter now: no Sentinel knows the master, the node named
    /// master is not one (a failover in progress), no node serves a slot, or the cluster kept
    /// redirecting the commands. Nothing was answered; try again later.
    #[error("Redis cannot serve the filter now: {0}")]
    Unavailable(String),
    /// A snapshot file could not be read.
    #[error(transparent)]
    Read(#[from] bloom_format::ReadError),
    /// A snapshot file could not be written.
    #[error(transparent)]
    Write(#[from] bloom_format::WriteError),
    /// A snapshot could not be streamed to its file.
    #[error(transparent)]
    Stream(#[from] bloom_format::StreamWriteError),
}

impl RedisFilterError {
    /// Whether the error says the filter's contents are gone or untrustworthy (as opposed to
    /// Redis being unreachable): a rebuild is needed.
    #[must_use]
    pub fn is_lost_state(&self) -> bool {
        matches!(
            self,
            Self::LostState { .. } | Self::NotFound { .. } | Self::NotReady { .. }
        )
    }

    /// Whether the error says the filter may have lost acknowledged writes: every key must be
    /// added again before it answers.
    #[must_use]
    pub fn is_unverified(&self) -> bool {
        matches!(self, Self::Unverified { .. })
    }
}
