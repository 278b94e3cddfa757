//! The write counters of counted shards in replies: a count and a witness judged against
//! what this process saw and wrote (see `filter::counters`), a shard flagged when its state
//! went back, and the nodes the counts are compared within.

use std::collections::HashMap;
use std::time::Instant;

use bloom_redis_protocol::keys::shard_key;
use bloom_redis_protocol::marker::MARKER_BITS;
use bloom_redis_protocol::shard::WRITE_COUNT;

use crate::error::RedisFilterError;
use crate::filter::{RedisFilter, counters};
use crate::node::NodeIdentity;
use crate::wire::Commands;

impl RedisFilter {
    /// The write count a counted shard's reply read (`counter`, after the command's own
    /// increment when it wrote), judged against `floor`, the count this process had seen
    /// when it sent the command, and the `witness` the command read (whether all its bits
    /// were set); returns the count before the command, and records what it saw. A state
    /// that went back is flagged on the shard, for every process. `(write, judge)`: whether
    /// the command wrote, and whether it is judged at all (a repair's adds are not).
    ///
    /// # Errors
    /// [`RedisFilterError::Unverified`] when the shard's state went back, or another process
    /// found it so; [`RedisFilterError::LostState`] for a counter no writer makes.
    pub(crate) fn take_counter(
        &self,
        shard: u32,
        counter: i64,
        floor: counters::Mark,
        node: Option<u64>,
        (write, judge): (bool, bool),
        witness: Option<(&counters::Witness, bool)>,
    ) -> Result<i64, RedisFilterError> {
        let raise = |count: i64| {
            // A reply of a connection gone since: its node is judged again when it answers.
            if let Some(node) = node {
                self.seen.raise(shard, node, count);
            }
        };
        if !judge {
            // The adds of a repair: whatever the shard's state, its count is noted.
            let count = (counter & WRITE_COUNT) - i64::from(write);
            raise(count + i64::from(write));
            return Ok(count);
        }
        let why = match counters::read(counter, floor, node.unwrap_or(0), write) {
            counters::Reading::Count(count) => match witness {
                Some((witness, false)) if witness.judges(node.unwrap_or(0), count) => {
                    self.flag_rolled_back(shard);
                    "its state went back: a key this process wrote to it (and saw set) has a bit clear again, though its write count went on to {count}; older data was put back on a live server (a reload of an older save, an older copy of the key restored), and the writes since may be lost".replace("{count}", &count.to_string())
                }
                _ => {
                    raise(count + i64::from(write));
                    return Ok(count);
                }
            },
            counters::Reading::Damaged => {
                return Err(self.lost(
                    shard,
                    "its write counter is negative, which no writer makes: the key was edited",
                ));
            }
            counters::Reading::Flagged => {
                "another process found its state gone back: older data was put back on a live server (a reload of an older save, an older copy of the key restored)".to_owned()
            }
            counters::Reading::WentBack { found, seen } => {
                self.flag_rolled_back(shard);
                format!(
                    "its state went back: its write count is {found}, and this process had seen {seen}; older data was put back on a live server (a reload of an older save, an older copy of the key restored), and the writes since may be lost"
                )
            }
        };
        Err(RedisFilterError::Unverified {
            name: self.name.clone(),
            shard,
            why,
        })
    }

    /// After a judged write to `shard` whose count before it was `count`, on `node`: the
    /// last of its keys (`indexes` into `keys`) that changed a bit is the shard's witness
    /// from now on.
    pub(crate) fn witness_write(
        &self,
        shard: u32,
        indexes: &[usize],
        keys: &super::KeyBuf,
        all_set: &[bool],
        (write, judge): (bool, bool),
        (node, count): (Option<&u64>, i64),
    ) {
        let (true, true, Some(&node)) = (write && judge, count >= 0, node) else {
            return;
        };
        let Some(key) = indexes
            .iter()
            .rev()
            .find(|&&i| all_set.get(i) == Some(&false))
            .and_then(|&i| keys.get(i))
        else {
            return;
        };
        let offsets = self
            .config
            .positions(&bloom_core::EncodedKey::from_encoded(key))
            .as_slice()
            .iter()
            .map(|p| MARKER_BITS + p % self.shard_bits)
            .collect();
        self.seen.witnessed(
            shard,
            counters::Witness {
                node,
                epoch: (count + 1) >> 32,
                key: key.to_vec(),
                offsets,
            },
        );
    }

    /// Sets the shard's rolled-back flag (bit 62 of its counter, alone: idempotent, and the
    /// count under it keeps counting), so that every process takes it for unverified until
    /// the filter is declared whole. Best effort: a reader not allowed to write leaves it,
    /// and its own verdict stands.
    pub(crate) fn flag_rolled_back(&self, shard: u32) {
        let key = shard_key(&self.name, shard);
        let flag = (self.counter_offset() + 1).to_string();
        let mut commands = Commands::new();
        commands.push(&[
            b"BITFIELD",
            key.as_bytes(),
            b"SET",
            b"u1",
            flag.as_bytes(),
            b"1",
        ]);
        let deadline = self.deadline();
        let _ = self
            .conn()
            .pipeline_by(commands, vec![key.into_bytes()], deadline);
    }

    /// The node key (`counters::node_key`) of every live connection, by serial.
    pub(crate) fn node_keys(
        &self,
        deadline: Instant,
    ) -> Result<HashMap<u64, u64>, RedisFilterError> {
        Ok(node_keys_of(self.conn().live(deadline)?))
    }
}

/// The node key (`counters::node_key`) of each of `live`, by serial.
pub(crate) fn node_keys_of(live: Vec<(u64, NodeIdentity)>) -> HashMap<u64, u64> {
    live.into_iter()
        .map(|(serial, node)| (serial, counters::node_key(&node.run_id, &node.replid)))
        .collect()
}
