//! Judging a shard's node before its answers or acknowledgements are used, reading the
//! markers before a first write, and making writes as durable as the filter asks.

use std::collections::HashMap;
use std::time::Instant;

use bloom_redis_protocol::epoch::{NODE_FIELDS, Record, WRITES_FIELD, writes_from};
use bloom_redis_protocol::keys::{epoch_key, shard_key};
use bloom_redis_protocol::meta::Durability;
use redis::Value;

use crate::connection::server_error;
use crate::epoch::{self, Verdict};
use crate::error::RedisFilterError;
use crate::filter::{RedisFilter, counters, int, kind_of};
use crate::node::text;
use crate::wire::Commands;

use super::{Batch, ints};

impl RedisFilter {
    /// Reads both markers of every shard `batch` writes to that this handle has not checked
    /// yet, before any write: `BITFIELD ... SET` past a shard's end grows the key, and one on
    /// a missing key creates it, so a shard whose markers are not the filter's (edited
    /// metadata, a deleted, truncated or replaced key) is reported lost and left alone. One
    /// round trip for the first batches of a handle; none after.
    pub(super) fn check_markers_before_writing(
        &self,
        batch: &Batch,
        deadline: Instant,
    ) -> Result<(), RedisFilterError> {
        let unchecked: Vec<u32> = {
            let marked = self
                .marked
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            batch
                .shards
                .iter()
                .map(|(shard, _)| *shard)
                .filter(|shard| !marked.contains(shard))
                .collect()
        };
        if unchecked.is_empty() {
            return Ok(());
        }
        let mut commands = Commands::new();
        let mut routes = Vec::with_capacity(unchecked.len());
        for &shard in &unchecked {
            routes.push(self.push_marker_read(&mut commands, shard));
        }
        let replies = self.conn().pipeline_by(commands, routes, deadline)?;
        for (&shard, value) in unchecked.iter().zip(replies.values) {
            let markers = ints(&server_error(value)?)?;
            if !self.markers_intact(shard, &markers) {
                return Err(self.lost(
                    shard,
                    if markers.iter().all(|&m| m == 0) {
                        "its markers are gone (the key is missing, emptied or shorter than the metadata says); nothing was written to it".to_owned()
                    } else {
                        "its markers are not this filter's (another filter's key, or edited metadata); nothing was written to it".to_owned()
                    },
                ));
            }
        }
        self.marked
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .extend(unchecked);
        Ok(())
    }

    /// Judges the node of every shard that answered on a connection not judged yet against
    /// the shard's epoch record; records the node where nothing can have been lost.
    ///
    /// A counted shard's record also holds the write count when its coverage was recorded:
    /// this process takes it as seen (a shard found older later is one put back), and a
    /// reply of the batch that read less (`counts`) is looked at again: a shard older than
    /// its own record went back.
    pub(crate) fn verify_shards(
        &self,
        answered: &[(u64, u32)],
        counts: &[(u32, i64)],
        deadline: Instant,
    ) -> Result<(), RedisFilterError> {
        let pending: Vec<(u64, u32)> = {
            let verified = self.verified_set();
            let mut pending: Vec<(u64, u32)> = answered
                .iter()
                .copied()
                .filter(|pair| !verified.contains(pair))
                .collect();
            pending.sort_unstable();
            pending.dedup();
            pending
        };
        if pending.is_empty() {
            return Ok(());
        }
        let mut conn = self.conn();
        let live: HashMap<u64, crate::node::NodeIdentity> =
            conn.live(deadline)?.into_iter().collect();
        // The records, in one pipeline routed by their keys (a record in the middle of a
        // reshard is read wherever it is; the node judged is the one that answered for the
        // shard).
        let mut reads = Commands::new();
        let mut routes = Vec::with_capacity(pending.len());
        for &(_, shard) in &pending {
            let key = epoch_key(&self.name, shard);
            let mut args: Vec<&[u8]> = vec![b"HMGET", key.as_bytes()];
            args.extend(NODE_FIELDS.iter().map(|f| f.as_bytes()));
            args.push(WRITES_FIELD.as_bytes());
            reads.push(&args);
            routes.push(key.into_bytes());
        }
        let records = conn.pipeline_by(reads, routes, deadline)?.values;
        let mut cluster_nodes: Option<String> = None;
        let mut rewrites = Commands::new();
        let mut rewrite_routes = Vec::new();
        for (&(serial, shard), value) in pending.iter().zip(records) {
            let node = live.get(&serial).ok_or(RedisFilterError::NodeChanged)?;
            let fields = match server_error(value)? {
                Value::Array(items) => items.iter().map(text).collect::<Vec<_>>(),
                other => {
                    return Err(RedisFilterError::Protocol(format!(
                        "HMGET gave {}",
                        kind_of(&other)
                    )));
                }
            };
            let record = Record::from_fields(&fields);
            let read = counts.iter().find(|(s, _)| *s == shard).map(|&(_, c)| c);
            let answering = counters::node_key(&node.run_id, &node.replid);
            // A record's count is compared only on the node it names (another node is judged
            // by the record's node fields below).
            if self.counted
                && record
                    .as_ref()
                    .is_some_and(|r| counters::node_key(&r.run_id, &r.replid) == answering)
            {
                let writes = writes_from(fields.get(NODE_FIELDS.len()).and_then(Option::as_deref));
                self.seen.raise(shard, answering, writes);
                if read.is_some_and(|c| c < writes) {
                    drop(conn);
                    self.older_than_its_record(shard, writes, answering, deadline)?;
                    conn = self.conn();
                }
            }
            if record.as_ref().is_some_and(|r| r.run_id != node.run_id)
                && node.node_id.is_some()
                && cluster_nodes.is_none()
            {
                cluster_nodes = Some(conn.cluster_nodes(deadline)?);
            }
            let healthy = |id: &str| {
                cluster_nodes
                    .as_deref()
                    .is_some_and(|nodes| epoch::is_healthy_master(nodes, id))
            };
            match epoch::judge(record.as_ref(), node, self.durability, healthy) {
                Verdict::Same => {}
                Verdict::Covered(_) => {
                    let key = epoch_key(&self.name, shard);
                    let now = epoch::record_of(node);
                    let mut args: Vec<&[u8]> = vec![b"HSET", key.as_bytes()];
                    for (field, value) in now.fields() {
                        args.push(field.as_bytes());
                        args.push(value.as_bytes());
                    }
                    // The record's count follows its node: this node's count now (0 when
                    // this batch read none).
                    let writes = read.unwrap_or(0).max(0).to_string();
                    if self.counted {
                        args.push(WRITES_FIELD.as_bytes());
                        args.push(writes.as_bytes());
                    }
                    rewrites.push(&args);
                    rewrite_routes.push(key.into_bytes());
                }
                Verdict::MayHaveLost(why) => {
                    return Err(RedisFilterError::Unverified {
                        name: self.name.clone(),
                        shard,
                        why,
                    });
                }
            }
        }
        for value in conn.pipeline_by(rewrites, rewrite_routes, deadline)?.values {
            match server_error(value) {
                // A reader without HSET: the verdict stands, it is just not recorded (the
                // next process judges the node again).
                Err(RedisFilterError::Server { code, .. }) if code == "NOPERM" => {}
                other => {
                    other?;
                }
            }
        }
        self.verified_set().extend(pending);
        Ok(())
    }

    /// A reply read a count below the one its shard's record holds: either the shard was put
    /// back older than its record, or the record was written after the reply (a coverage
    /// record of another process). The shard's counter now tells: a count still below the
    /// record's went back.
    fn older_than_its_record(
        &self,
        shard: u32,
        writes: i64,
        node: u64,
        deadline: Instant,
    ) -> Result<(), RedisFilterError> {
        let mut commands = Commands::new();
        let route = self.push_counter_read(&mut commands, shard);
        let value = self
            .conn()
            .pipeline_by(commands, vec![route], deadline)?
            .values
            .into_iter()
            .next()
            .ok_or_else(|| RedisFilterError::Protocol("a reply is missing".into()))?;
        let now = ints(&server_error(value)?)?;
        let markers_and_counter = now.as_slice();
        if !self.markers_intact(shard, markers_and_counter.get(..2).unwrap_or_default()) {
            return Err(self.lost(shard, "its markers are gone or not this filter's"));
        }
        let counter = markers_and_counter.get(2).copied().unwrap_or(0);
        let floor = counters::Mark {
            node,
            count: writes,
        };
        match counters::read(counter, floor, node, false) {
            counters::Reading::Count(count) => {
                self.seen.raise(shard, node, count);
                Ok(())
            }
            counters::Reading::Damaged => Err(self.lost(
                shard,
                "its write counter is negative, which no writer makes: the key was edited",
            )),
            counters::Reading::Flagged => Err(RedisFilterError::Unverified {
                name: self.name.clone(),
                shard,
                why: "another process found its state gone back: older data was put back on a live server".into(),
            }),
            counters::Reading::WentBack { found, seen } => {
                self.flag_rolled_back(shard);
                Err(RedisFilterError::Unverified {
                    name: self.name.clone(),
                    shard,
                    why: format!(
                        "its state is older than its epoch record: its write count is {found}, the record was written at {seen}; an older copy of the key was put back, and the writes since may be lost"
                    ),
                })
            }
        }
    }

    /// Pushes the read of a counted shard's markers and write counter, and returns its
    /// routing key.
    pub(crate) fn push_counter_read(&self, commands: &mut Commands, shard: u32) -> Vec<u8> {
        self.push_shard_read(commands, shard, true)
    }

    /// Pushes the read of shard `shard`'s two markers (`BITFIELD_RO key GET i64 0 GET i64
    /// (64 + B)`) and returns its routing key.
    pub(crate) fn push_marker_read(&self, commands: &mut Commands, shard: u32) -> Vec<u8> {
        self.push_shard_read(commands, shard, false)
    }

    /// The read of a shard's two markers, and of its write counter with `counter`.
    fn push_shard_read(&self, commands: &mut Commands, shard: u32, counter: bool) -> Vec<u8> {
        let key = shard_key(&self.name, shard);
        let tail = self.layout().tail_marker_offset().to_string();
        let offset = self.counter_offset().to_string();
        let mut args: Vec<&[u8]> = vec![
            b"BITFIELD_RO",
            key.as_bytes(),
            b"GET",
            b"i64",
            b"0",
            b"GET",
            b"i64",
            tail.as_bytes(),
        ];
        if counter {
            args.extend([b"GET".as_slice(), b"i64", offset.as_bytes()]);
        }
        commands.push(&args);
        key.into_bytes()
    }

    /// Whether `markers` (the replies of [`RedisFilter::push_marker_read`]) are both shard
    /// `shard`'s own.
    pub(crate) fn markers_intact(&self, shard: u32, markers: &[i64]) -> bool {
        let own = self.markers.of(shard);
        markers.len() == 2 && markers.iter().all(|&m| m == own)
    }

    /// Makes every write made so far durable as the filter asks, on every live connection
    /// (a creation's, an import's).
    pub(crate) fn make_live_durable(&self) -> Result<(), RedisFilterError> {
        let deadline = self.deadline();
        let serials: Vec<u64> = self
            .conn()
            .live(deadline)?
            .into_iter()
            .map(|(serial, _)| serial)
            .collect();
        self.make_durable(&serials, deadline)
    }

    /// Makes the writes made on `serials` durable as the filter (and this handle) asks.
    pub(crate) fn make_durable(
        &self,
        serials: &[u64],
        deadline: Instant,
    ) -> Result<(), RedisFilterError> {
        let mut serials = serials.to_vec();
        serials.sort_unstable();
        serials.dedup();
        let policy = match self.durability {
            Durability::Replicas {
                replicas,
                timeout_ms,
            } => Some((
                replicas as usize,
                std::time::Duration::from_millis(timeout_ms),
            )),
            _ => None,
        };
        let wanted = [policy, self.acks]
            .into_iter()
            .flatten()
            .max_by_key(|(n, _)| *n);
        let mut conn = self.conn();
        let live: HashMap<u64, crate::node::NodeIdentity> =
            conn.live(deadline)?.into_iter().collect();
        for &serial in &serials {
            if let Some((replicas, timeout)) = wanted {
                // WAIT's own timeout ends before the operation's deadline, so that its
                // count (not a timeout) is what the caller hears.
                let ms = u64::try_from(timeout.min(wait_budget(deadline)).as_millis())
                    .unwrap_or(u64::MAX)
                    .max(1);
                let acked = int(&server_error(conn.query_on(
                    serial,
                    &[
                        b"WAIT",
                        replicas.to_string().as_bytes(),
                        ms.to_string().as_bytes(),
                    ],
                    deadline,
                )?)?)?;
                let acked = usize::try_from(acked).unwrap_or(0);
                if acked < replicas {
                    return Err(RedisFilterError::NotAcknowledged {
                        wanted: replicas,
                        acked,
                        timeout,
                    });
                }
            }
            if let Durability::Aof { timeout_ms } = self.durability {
                let node = live.get(&serial).ok_or(RedisFilterError::NodeChanged)?;
                if node.has_waitaof() {
                    let ms = u64::try_from(wait_budget(deadline).as_millis())
                        .unwrap_or(u64::MAX)
                        .min(timeout_ms)
                        .max(1);
                    let reply = server_error(conn.query_on(
                        serial,
                        &[b"WAITAOF", b"1", b"0", ms.to_string().as_bytes()],
                        deadline,
                    )?)?;
                    let local = match &reply {
                        Value::Array(items) => items.first().map(int).transpose()?.unwrap_or(0),
                        _ => 0,
                    };
                    if local < 1 {
                        return Err(RedisFilterError::NotDurable {
                            why: format!(
                                "the node did not fsync its AOF within {timeout_ms} ms (is appendonly on?)"
                            ),
                        });
                    }
                } else if !node.aof_always {
                    return Err(RedisFilterError::NotDurable {
                        why: format!(
                            "the filter asks for AOF durability, and this server (Redis {}.{}.{}) has no WAITAOF (Redis 7.2) and does not run appendonly yes with appendfsync always (or CONFIG GET is refused)",
                            node.version.0, node.version.1, node.version.2
                        ),
                    });
                }
            }
        }
        Ok(())
    }
}

/// How long a server-side wait (`WAIT`, `WAITAOF`) may take within `deadline`: what is left,
/// less a quarter of it (at most half a second) for its reply to come back.
fn wait_budget(deadline: Instant) -> std::time::Duration {
    let left = deadline.saturating_duration_since(Instant::now());
    left.saturating_sub((left / 4).min(std::time::Duration::from_millis(500)))
}
