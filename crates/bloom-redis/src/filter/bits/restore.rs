//! [`Restore`]: every key added again, to declare a filter whole after its nodes may have
//! lost writes.

use bloom_core::Key;
use bloom_redis_protocol::keys::shard_key;
use bloom_redis_protocol::meta;
use bloom_redis_protocol::shard::{COUNT_JUMP, WRITE_COUNT};

use crate::connection::server_error;
use crate::error::RedisFilterError;
use crate::filter::RedisFilter;
use crate::wire::Commands;

use super::{Inserts, ints};

impl RedisFilter {
    /// Adds every key the filter should hold, from the keys' source, and declares the filter
    /// whole: the way back for a filter made unverified by a restart or a failover that may
    /// have lost writes (or a filter of an earlier bloom-redis, which records no nodes).
    /// `keys` must be every key ever added (that should be in); then each shard's epoch
    /// record names the node that took its keys, and the filter answers again. With
    /// `coverage`, the records also say which point of a primary store the keys cover.
    /// [`RedisFilter::restore`] does the same for keys that come in batches.
    ///
    /// # Errors
    /// [`RedisFilterError::NodeChanged`] when a shard's node changed between the adds and
    /// the record (nothing is recorded for it; call again), or as [`RedisFilter::insert`].
    pub fn restore_whole<I>(
        &self,
        keys: I,
        coverage: Option<(
            bloom_format::DatasetGeneration,
            Option<bloom_format::StoreBinding>,
        )>,
    ) -> Result<u64, RedisFilterError>
    where
        I: IntoIterator,
        I::Item: Key,
    {
        let mut restore = self.restore();
        restore.add(keys)?;
        restore.finish(coverage)
    }

    /// Starts adding every key again, a batch at a time ([`Restore::add`]), to
    /// declare the filter whole at the end ([`Restore::finish`]), as
    /// [`RedisFilter::restore_whole`] does. Until then the filter stays as it was (an
    /// unverified filter answers nothing); a restore dropped unfinished declares nothing.
    pub fn restore(&self) -> Restore<'_> {
        Restore {
            filter: self,
            inserts: Inserts::new(self, false, None),
        }
    }

    /// After every key was added again (by the connections in `written`): records the nodes
    /// that hold the shards now, and makes a filter of an earlier bloom-redis one of this
    /// schema.
    pub(crate) fn restored(
        &self,
        coverage: Option<(
            bloom_format::DatasetGeneration,
            Option<bloom_format::StoreBinding>,
        )>,
        written: &[(u64, u32)],
    ) -> Result<(), RedisFilterError> {
        if self.counted {
            self.renew_counters()?;
        }
        self.record_nodes(coverage, written)?;
        let schema = meta::schema(
            self.counted,
            self.tables_mixed.load(std::sync::atomic::Ordering::Acquire),
        );
        // Guarded in Redis: a schema 3 or 5 set by another writer since is never taken back.
        let key = self.meta_key();
        let creation = self.creation.hex();
        self.guarded(&[
            b"EVAL",
            crate::filter::GUARDED_SCHEMA.as_bytes(),
            b"1",
            key.as_bytes(),
            creation.as_bytes(),
            schema.as_bytes(),
        ])
    }
}

impl RedisFilter {
    /// Once every key was added again: each counted shard's count jumps by [`COUNT_JUMP`]
    /// and its rolled-back flag is cleared, in one command, so that no process finds a count
    /// below one it saw before the state was put back (and takes the repaired shard for gone
    /// back again).
    fn renew_counters(&self) -> Result<(), RedisFilterError> {
        let jump = COUNT_JUMP.to_string();
        let offset = self.counter_offset().to_string();
        let flag = (self.counter_offset() + 1).to_string();
        let tail = self.layout().tail_marker_offset().to_string();
        for first in (0..self.shards).step_by(crate::filter::SHARDS_PER_PIPELINE as usize) {
            let deadline = self.deadline();
            let range: Vec<u32> =
                (first..self.shards.min(first + crate::filter::SHARDS_PER_PIPELINE)).collect();
            let mut commands = Commands::new();
            let mut routes = Vec::with_capacity(range.len());
            for &s in &range {
                let key = shard_key(&self.name, s);
                commands.push(&[
                    b"BITFIELD",
                    key.as_bytes(),
                    b"GET",
                    b"i64",
                    b"0",
                    b"GET",
                    b"i64",
                    tail.as_bytes(),
                    b"INCRBY",
                    b"i64",
                    offset.as_bytes(),
                    jump.as_bytes(),
                    b"SET",
                    b"u1",
                    flag.as_bytes(),
                    b"0",
                ]);
                routes.push(key.into_bytes());
            }
            let replies = self.conn().pipeline_by(commands, routes, deadline)?;
            let nodes = self.node_keys(deadline)?;
            for ((&s, value), serial) in range.iter().zip(replies.values).zip(replies.answered_by) {
                let read = ints(&server_error(value)?)?;
                if !self.markers_intact(s, read.get(..2).unwrap_or_default()) {
                    return Err(self.lost(s, "its markers are gone or not this filter's"));
                }
                let after = read.get(2).copied().unwrap_or(0);
                let node = nodes
                    .get(&serial)
                    .copied()
                    .ok_or(RedisFilterError::NodeChanged)?;
                self.seen.raise(s, node, after & WRITE_COUNT);
            }
        }
        Ok(())
    }
}

/// Every key of a filter added again, to declare it whole: [`RedisFilter::restore`].
#[must_use = "a restore declares nothing until it is finished"]
pub struct Restore<'f> {
    filter: &'f RedisFilter,
    /// The adds (each shard's node not judged: the filter is being made whole), and the
    /// connection that took each shard's keys (a shard over two connections is never
    /// declared whole).
    inserts: Inserts<'f>,
}

impl std::fmt::Debug for Restore<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Restore")
            .field("filter", &self.filter.name())
            .field("changed", &self.inserts.changed())
            .finish_non_exhaustive()
    }
}

impl<'f> Restore<'f> {
    /// Adds keys (any form [`RedisFilter::insert`] takes; each shard's node is not judged:
    /// the filter is being made whole), every key encoded before any is sent, within one
    /// deadline; returns how many changed a bit.
    ///
    /// # Errors
    /// As [`RedisFilter::insert`], [`RedisFilterError::Unverified`] aside.
    pub fn add<I>(&mut self, keys: I) -> Result<u64, RedisFilterError>
    where
        I: IntoIterator,
        I::Item: Key,
    {
        let keys: Vec<I::Item> = keys.into_iter().collect();
        let encoded = self.filter.encode_keys(&keys)?;
        self.filter.note_mixed_tables(&keys)?;
        let before = self.inserts.changed();
        self.inserts.set_deadline(Some(self.filter.deadline()));
        let added = (|| {
            for batch in encoded.chunks(self.inserts.batch_len()) {
                self.inserts.send_slice(batch)?;
            }
            self.inserts.flush()
        })();
        self.inserts.set_deadline(None);
        if added.is_err() {
            // Each call is an operation of its own: a failed one can be made again.
            self.inserts.resume();
        }
        added?;
        Ok(self.inserts.changed() - before)
    }

    /// The stream the keys go through, for keys that come as a stream: its batches are
    /// added as by [`Restore::add`], each with its own deadline.
    pub fn inserts(&mut self) -> &mut Inserts<'f> {
        &mut self.inserts
    }

    /// Stops the restore without declaring the filter whole: the keys sent so far are read
    /// back, counted in the metadata and made as durable as a finished restore's (what a
    /// caller stopping on a bad key does, so that nothing it sent goes uncounted); returns
    /// how many changed a bit. The filter stays unverified until a restore is finished.
    ///
    /// # Errors
    /// As [`RedisFilter::insert_all`].
    pub fn stop(self) -> Result<u64, RedisFilterError> {
        self.inserts.finish()
    }

    /// Declares the filter whole: each shard's epoch record names the node that took its
    /// keys, with `coverage` (the point of a primary store the keys cover) when given; returns
    /// how many keys changed a bit in all.
    ///
    /// # Errors
    /// [`RedisFilterError::NodeChanged`] when a shard's keys went to more than one
    /// connection, or its node changed before the record (start again), or a Redis error.
    pub fn finish(
        self,
        coverage: Option<(
            bloom_format::DatasetGeneration,
            Option<bloom_format::StoreBinding>,
        )>,
    ) -> Result<u64, RedisFilterError> {
        let (changed, written) = self.inserts.finish_writes()?;
        self.filter.restored(coverage, &written)?;
        Ok(changed)
    }
}
