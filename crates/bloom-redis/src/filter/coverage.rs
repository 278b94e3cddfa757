//! What a filter's bits cover: the point of a primary store recorded in the metadata and
//! in every shard's epoch record (with, for counted shards, the write count it holds at), and
//! the oldest point the records cover, which a repair starts from.

use bloom_format::{DatasetGeneration, StoreBinding};
use bloom_redis_protocol::coverage::{COVERAGE_FIELDS, coverage_fields, coverage_from_fields};
use bloom_redis_protocol::epoch::{WRITES_FIELD, writes_from};
use bloom_redis_protocol::keys::{epoch_key, shard_key};
use bloom_redis_protocol::shard::WRITE_COUNT;
use redis::Value;

use super::ints;
use crate::connection::server_error;
use crate::error::RedisFilterError;
use crate::filter::{RedisFilter, SHARDS_PER_PIPELINE};
use crate::node::text;
use crate::wire::Commands;

impl RedisFilter {
    /// Records that the bits cover the primary store up to `generation`, at the history
    /// point `binding` (as a snapshot header does), in the metadata and in every shard's epoch
    /// record (so that a shard put back from an older copy says how far it covers). Only a
    /// caller that knows every key of the store up to `generation` has its bits set may say
    /// so. The nodes recorded are left as they are.
    ///
    /// # Errors
    /// A Redis error, or [`RedisFilterError::LostState`] if the filter was recreated.
    pub fn set_coverage(
        &self,
        generation: DatasetGeneration,
        binding: Option<StoreBinding>,
    ) -> Result<(), RedisFilterError> {
        let fields = coverage_fields(generation, binding);
        for first in (0..self.shards).step_by(SHARDS_PER_PIPELINE as usize) {
            let deadline = self.deadline();
            let range: Vec<u32> = (first..self.shards.min(first + SHARDS_PER_PIPELINE)).collect();
            // A counted shard's record says at which count its coverage holds: the count
            // now, read after every covered key's bits were set (a state at least that new
            // holds them all).
            let counts = if self.counted {
                self.read_counts(&range, deadline)?
            } else {
                Vec::new()
            };
            let mut commands = Commands::new();
            let mut keys = Vec::new();
            for (i, &s) in range.iter().enumerate() {
                let key = epoch_key(&self.name, s);
                let mut args: Vec<&[u8]> = vec![b"HSET", key.as_bytes()];
                for (field, value) in &fields {
                    args.push(field.as_bytes());
                    args.push(value.as_bytes());
                }
                let writes = counts.get(i).map(i64::to_string);
                if let Some(writes) = &writes {
                    args.push(WRITES_FIELD.as_bytes());
                    args.push(writes.as_bytes());
                }
                commands.push(&args);
                keys.push(shard_key(&self.name, s).into_bytes());
            }
            for value in self.conn().pipeline_by(commands, keys, deadline)?.values {
                server_error(value)?;
            }
        }
        // Only if the metadata is still this filter's: a recreated filter never inherits a
        // coverage record made for the one it replaced.
        self.set_fields(fields.iter().map(|(f, v)| (*f, v.as_str())))
    }

    /// The write counts of counted shards `range` now, each judged against what this
    /// process saw (a shard gone back fails, flagged).
    fn read_counts(
        &self,
        range: &[u32],
        deadline: std::time::Instant,
    ) -> Result<Vec<i64>, RedisFilterError> {
        let floors: Vec<_> = range.iter().map(|&s| self.seen.floor(s)).collect();
        let mut commands = Commands::new();
        let mut keys = Vec::with_capacity(range.len());
        for &s in range {
            keys.push(self.push_counter_read(&mut commands, s));
        }
        let replies = self.conn().pipeline_by(commands, keys, deadline)?;
        let nodes = self.node_keys(deadline)?;
        let mut counts = Vec::with_capacity(range.len());
        for (((&s, value), floor), serial) in range
            .iter()
            .zip(replies.values)
            .zip(floors)
            .zip(replies.answered_by)
        {
            let read = ints(&server_error(value)?)?;
            if !self.markers_intact(s, read.get(..2).unwrap_or_default()) {
                return Err(self.lost(s, "its markers are gone or not this filter's"));
            }
            let counter = read.get(2).copied().unwrap_or(0);
            let node = nodes.get(&serial).copied();
            counts.push(self.take_counter(s, counter, floor, node, (false, true), None)?);
        }
        Ok(counts)
    }

    /// The oldest coverage the shards' epoch records hold (the point a restored shard covers
    /// at most), or `None` when a shard records none, or (counted shards) when a shard is
    /// older than its record says (put back from an older copy: its record's coverage is
    /// not what its bits hold).
    ///
    /// # Errors
    /// A Redis error.
    pub fn shard_coverage(
        &self,
    ) -> Result<Option<(DatasetGeneration, Option<StoreBinding>)>, RedisFilterError> {
        let mut oldest: Option<(DatasetGeneration, Option<StoreBinding>)> = None;
        for first in (0..self.shards).step_by(SHARDS_PER_PIPELINE as usize) {
            let deadline = self.deadline();
            let mut commands = Commands::new();
            let mut keys = Vec::new();
            let per_shard = if self.counted { 2 } else { 1 };
            for s in first..self.shards.min(first + SHARDS_PER_PIPELINE) {
                let key = epoch_key(&self.name, s);
                let mut args: Vec<&[u8]> = vec![b"HMGET", key.as_bytes()];
                args.extend(COVERAGE_FIELDS.iter().map(|f| f.as_bytes()));
                args.push(WRITES_FIELD.as_bytes());
                commands.push(&args);
                keys.push(shard_key(&self.name, s).into_bytes());
                if self.counted {
                    keys.push(self.push_counter_read(&mut commands, s));
                }
            }
            let values = self.conn().pipeline_by(commands, keys, deadline)?.values;
            for shard in values.chunks(per_shard) {
                let Some(record) = shard.first() else {
                    return Ok(None);
                };
                let fields = match server_error(record.clone())? {
                    Value::Array(items) => items.iter().map(text).collect::<Vec<_>>(),
                    _ => return Ok(None),
                };
                let Some(coverage) = coverage_from_fields(&fields) else {
                    return Ok(None);
                };
                if let Some(counter) = shard.get(1) {
                    // Bits older than the record: its coverage is not theirs.
                    let writes =
                        writes_from(fields.get(COVERAGE_FIELDS.len()).and_then(Option::as_deref));
                    let read = ints(&server_error(counter.clone())?)?;
                    let count = read.get(2).copied().unwrap_or(0) & WRITE_COUNT;
                    if count < writes {
                        return Ok(None);
                    }
                }
                if oldest.is_none_or(|(g, _)| coverage.0 < g) {
                    oldest = Some(coverage);
                }
            }
        }
        Ok(oldest)
    }
}
