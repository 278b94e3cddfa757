//! The write counters of counted shards (schemas `bloom-redis/4` and `/5`): what this
//! process has seen of each shard's write count, and what a counter read in a reply says.
//!
//! Every write command advances its shard's counter by one, in the same command as its bits,
//! and every read returns it. A shard's count only grows, so a reply whose count is below one
//! this process saw before it sent the command comes from an older state: data put back on
//! a live server (`DEBUG RELOAD` of an older save, `RESTORE … REPLACE` of an older copy of
//! the key). The keys written since that state may have lost their bits, so nothing is
//! answered from the shard: the process flags it (bit 62, [`ROLLED_BACK`]) so that every
//! other process takes it for unverified too, until the filter is declared whole again.
//!
//! A count alone can be overtaken: put back to 100 after this process saw 101, the shard is
//! back at 101 after one more write by another process, and a count no longer tells. So each
//! process also keeps a **witness** per shard: the last key it wrote there that changed a
//! bit, whose bits were all set from then on (bits are never cleared). Every command on the
//! shard reads the witness's bits too (the module: tests it as one more key); one of them
//! clear, on the node that took the write, is a state from before that write, however far
//! the count went since. The witness is judged only within the count's epoch (its bits above
//! the low 32, which every declaration that the filter is whole advances): a filter made
//! whole again may rightly lack a key that was set in Redis but never committed.
//!
//! What a process has seen is shared by every handle of the process on the same filter
//! (one table per creation), and seeded from each shard's epoch record (`writes`: the count
//! when its coverage was last recorded), so that a shard put back older than its record is
//! caught by a process that never saw it.

use std::sync::{Arc, Mutex, PoisonError, Weak};

use bloom_redis_protocol::meta::Creation;
use bloom_redis_protocol::shard::{ROLLED_BACK, WRITE_COUNT};

/// A write count seen of a shard, and the node it was read from (see [`node_key`]): counts
/// are compared only within one node's history. A node that changed (a failover, a restart,
/// a reshard) is judged by its epoch record instead, and may rightly hold fewer writes than
/// the one before (writes no replica acknowledged, whose keys were never committed).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Mark {
    /// The node, or 0 for none yet.
    pub(crate) node: u64,
    pub(crate) count: i64,
}

/// The last key this process wrote to a shard that changed a bit: its bits stay set on the
/// node that took the write, unless an older state is put back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Witness {
    /// The node that took the write.
    pub(crate) node: u64,
    /// The epoch of the shard's count after the write (`count >> 32`).
    pub(crate) epoch: i64,
    /// The key, encoded (what the module is given).
    pub(crate) key: Vec<u8>,
    /// Its bits' offsets in the shard's value (what `BITFIELD` reads).
    pub(crate) offsets: Vec<u64>,
}

impl Witness {
    /// Whether a reply of `node` whose count is `count` is judged by this witness: the same
    /// node, and the same epoch.
    pub(crate) fn judges(&self, node: u64, count: i64) -> bool {
        self.node == node && self.epoch == count >> 32
    }
}

/// The highest write count this process has seen of each shard of one filter, on the node
/// it read it from, and the witness of each.
#[derive(Debug)]
pub(crate) struct Seen {
    marks: Mutex<Box<[Mark]>>,
    witnesses: Mutex<Box<[Option<Witness>]>>,
}

/// The tables of the filters this process has open, by creation: shared by every handle of
/// one filter, gone when the last one is.
static TABLES: Mutex<Vec<(Creation, Weak<Seen>)>> = Mutex::new(Vec::new());

/// A node as the counts know it: its server process and the replication history it serves
/// (`run_id`, `master_replid`), hashed (FNV-1a 64; never 0).
pub(crate) fn node_key(run_id: &str, replid: &str) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in run_id.bytes().chain([0]).chain(replid.bytes()) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash.max(1)
}

impl Seen {
    /// The table of filter `creation`, of `shards` shards (this process's, shared).
    pub(crate) fn of(creation: Creation, shards: u32) -> Arc<Self> {
        let mut tables = TABLES.lock().unwrap_or_else(PoisonError::into_inner);
        tables.retain(|(_, table)| table.strong_count() > 0);
        if let Some(table) = tables
            .iter()
            .find(|(c, _)| *c == creation)
            .and_then(|(_, t)| t.upgrade())
            .filter(|t| t.len() == shards as usize)
        {
            return table;
        }
        let table = Arc::new(Self {
            marks: Mutex::new(vec![Mark::default(); shards as usize].into_boxed_slice()),
            witnesses: Mutex::new(vec![None; shards as usize].into_boxed_slice()),
        });
        tables.push((creation, Arc::downgrade(&table)));
        table
    }

    fn len(&self) -> usize {
        self.marks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// What this process has seen of `shard`: what a command sent now must find at least,
    /// on the same node.
    pub(crate) fn floor(&self, shard: u32) -> Mark {
        self.marks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(shard as usize)
            .copied()
            .unwrap_or_default()
    }

    /// The witness of `shard`, if this process wrote one.
    pub(crate) fn witness(&self, shard: u32) -> Option<Witness> {
        self.witnesses
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(shard as usize)
            .cloned()
            .flatten()
    }

    /// Records the witness of `shard` (the newest write of this process that changed it).
    pub(crate) fn witnessed(&self, shard: u32, witness: Witness) {
        if let Some(slot) = self
            .witnesses
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_mut(shard as usize)
        {
            *slot = Some(witness);
        }
    }

    /// Records a count of `shard` read from `node` (in a reply, or the shard's record): the
    /// highest on that node, or the first on a node that answers for the shard now.
    pub(crate) fn raise(&self, shard: u32, node: u64, count: i64) {
        let mut marks = self.marks.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(mark) = marks.get_mut(shard as usize) {
            if mark.node == node {
                mark.count = mark.count.max(count);
            } else {
                *mark = Mark { node, count };
            }
        }
    }
}

/// What a shard's counter, read in a reply, says of the shard's state.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Reading {
    /// Its write count (before this command's own increment): no older than what this
    /// process saw on the same node.
    Count(i64),
    /// Older than what this process saw (`seen`) on the same node before it sent the command:
    /// the state went back.
    WentBack { found: i64, seen: i64 },
    /// Another process found it gone back before: flagged until it is declared whole.
    Flagged,
    /// Bit 63 set: no writer makes such a counter.
    Damaged,
}

/// Reads counter `value` from a reply of `node` to a command sent when this process had seen
/// `floor`; `wrote` when the command advanced it (its count before the command is one less).
pub(crate) fn read(value: i64, floor: Mark, node: u64, wrote: bool) -> Reading {
    if value < 0 {
        return Reading::Damaged;
    }
    if value & ROLLED_BACK != 0 {
        return Reading::Flagged;
    }
    let count = (value & WRITE_COUNT) - i64::from(wrote);
    if floor.node == node && count < floor.count {
        Reading::WentBack {
            found: count,
            seen: floor.count,
        }
    } else {
        Reading::Count(count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_count_below_one_seen_on_the_same_node_is_a_state_that_went_back() {
        let node = node_key("run", "repl");
        let seen = |count| Mark { node, count };
        assert_eq!(read(7, seen(7), node, false), Reading::Count(7));
        assert_eq!(read(8, seen(7), node, true), Reading::Count(7));
        assert_eq!(
            read(7, seen(7), node, true),
            Reading::WentBack { found: 6, seen: 7 }
        );
        assert_eq!(
            read(3, seen(9), node, false),
            Reading::WentBack { found: 3, seen: 9 }
        );
        assert_eq!(
            read(ROLLED_BACK + 12, seen(0), node, false),
            Reading::Flagged
        );
        assert_eq!(read(-1, seen(0), node, false), Reading::Damaged);
        // A fresh shard: count 0, written once.
        assert_eq!(read(1, Mark::default(), node, true), Reading::Count(0));
        // Another node (a failover): its epoch record judges it, not the count.
        let other = node_key("run", "other");
        assert_ne!(other, node);
        assert_eq!(read(3, seen(9), other, false), Reading::Count(3));
    }

    #[test]
    fn handles_of_one_filter_share_what_the_process_saw() {
        let creation = crate::filter::lifecycle::random_creation().unwrap();
        let (a, b) = (node_key("a", "1"), node_key("b", "1"));
        let first = Seen::of(creation, 4);
        first.raise(2, a, 40);
        first.raise(2, a, 30);
        let second = Seen::of(creation, 4);
        assert_eq!(second.floor(2), Mark { node: a, count: 40 });
        assert_eq!(second.floor(9), Mark::default());
        // A count of another node replaces the mark, lower or not.
        second.raise(2, b, 5);
        assert_eq!(first.floor(2), Mark { node: b, count: 5 });
        // Another filter starts from nothing; a filter gone and opened again starts over.
        assert_eq!(
            Seen::of(crate::filter::lifecycle::random_creation().unwrap(), 4).floor(2),
            Mark::default()
        );
        drop((first, second));
        assert_eq!(Seen::of(creation, 4).floor(2), Mark::default());
    }
}
