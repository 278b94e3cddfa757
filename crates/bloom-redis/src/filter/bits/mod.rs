//! Inserts and queries of a [`RedisFilter`]: a batch of keys becomes one `BITFIELD` per shard
//! it touches (both markers read in the same command), pipelined; the nodes that answered are
//! judged against their shards' epoch records before any answer is given or any insert
//! acknowledged; then the writes are made durable as the filter asks.

mod counted;
mod divisor;
mod inserts;
mod lookups;
mod operations;
mod restore;
mod stream;
mod verify;

pub use inserts::Inserts;
pub use lookups::Lookups;
pub use restore::Restore;

use stream::KeyBuf;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;
use std::time::Instant;

use bloom_core::EncodedKey;
use bloom_redis_protocol::keys::shard_key;
use bloom_redis_protocol::marker::MARKER_BITS;
use bloom_redis_protocol::module::ENCODED;
use redis::Value;

use crate::connection::{PendingPipeline, server_error};
use crate::error::RedisFilterError;
use crate::filter::{GUARDED_HINCRBY, RedisFilter, counters, int, kind_of};
use crate::module::ModuleUse;
use crate::wire::Commands;

/// Keys per pipeline: each batch is one `BITFIELD` per shard it touches.
const BATCH: usize = 4096;
/// Keys per pipeline with the module: one `BLOOM.MADD` per shard of about
/// `MODULE_KEYS_PER_COMMAND` keys (a command's cost in Redis, before its keys, is paid once per
/// shard), within these bounds.
const MODULE_BATCH: std::ops::RangeInclusive<usize> = 16_384..=65_536;
/// Keys per `BLOOM.MADD` / `BLOOM.MEXISTS` that a batch is sized for.
const MODULE_KEYS_PER_COMMAND: usize = 1_000;
/// Batches sent before the oldest one's replies are read: the server always has one queued
/// while the client reads and hashes.
const IN_FLIGHT: usize = 3;

/// Per key of a batch whether all its bits were set (before an insert: whether it changed
/// nothing), the connections (by serial) that answered each shard, the write count each
/// counted shard's reply read (before the batch's own write), and the first verdict of a
/// counter (given only once the shards' nodes were judged: a node that changed says more).
type BatchReplies = (
    Vec<bool>,
    Vec<(u64, u32)>,
    Vec<(u32, i64)>,
    Option<RedisFilterError>,
);

/// The keys of one batch, grouped by shard, with their offsets in the shard.
struct Batch {
    /// For each shard touched: the shard, and the batch's indexes of its keys, in order.
    shards: Vec<(u32, Vec<usize>)>,
    /// Every key's offsets, `k` per key, in batch order.
    offsets: Vec<u64>,
    /// Keys in the batch.
    keys: usize,
}

/// A batch on the wire: sent, its replies not read yet.
struct InFlight {
    batch: Batch,
    replies: PendingPipeline,
    /// Whether the pipeline ends with the count of an earlier batch's new keys.
    counted: bool,
    /// Whether its shards were sent the `bloom` module's commands.
    module: bool,
    /// Whether it writes.
    write: bool,
    /// What this process had seen of each shard of the batch when it was sent: its reply
    /// must not find less on the same node.
    floors: Vec<counters::Mark>,
    /// Whether the shards' counters are judged (all but the adds that make a filter whole,
    /// which repair shards found gone back).
    judge: bool,
    /// The witness each shard's command reads (see `counters::Witness`), when judged.
    witnesses: Vec<Option<counters::Witness>>,
}

impl RedisFilter {
    /// The keys grouped by shard; with `offsets`, each key's bit offsets too (what the plain
    /// commands need: the module hashes the keys itself).
    fn batch_of(&self, keys: &KeyBuf, offsets: bool) -> Batch {
        let k = self.config.hashes() as usize;
        let wanted = offsets;
        let mut offsets = Vec::with_capacity(if wanted { keys.len() * k } else { 0 });
        // The keys of each shard, in order: a list per shard when shards are few beside the
        // keys, a map of those touched otherwise (and for a shard past the last, which no
        // position makes, rather than dropping its key).
        let mut lists: Vec<Vec<usize>> = if (self.shards as usize) <= keys.len() {
            vec![Vec::new(); self.shards as usize]
        } else {
            Vec::new()
        };
        let mut others: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
        let shard_bits = divisor::Divisor::new(self.shard_bits);
        // The rule and salt prepared once for the batch, and each key's positions visited
        // with no buffer: the first names the key's shard (all of a key's positions are in one
        // shard), and with `offsets` each is kept as its offset in the shard.
        let placer = self.config.placer();
        for (i, key) in keys.iter().enumerate() {
            let key = EncodedKey::from_encoded(key);
            let first = if wanted {
                let mut first = None;
                placer.for_each_position(&key, |p| {
                    let (shard, offset) = shard_bits.div_rem(p);
                    first.get_or_insert(shard);
                    offsets.push(MARKER_BITS + offset);
                });
                first.unwrap_or(0)
            } else {
                // The module's commands need the shard alone: the first position, no other.
                shard_bits.div_rem(placer.first_position(&key)).0
            };
            let shard = u32::try_from(first).unwrap_or(u32::MAX);
            match lists.get_mut(shard as usize) {
                Some(list) => list.push(i),
                None => others.entry(shard).or_default().push(i),
            }
        }
        others.extend(
            (0..self.shards)
                .zip(lists)
                .filter(|(_, list)| !list.is_empty()),
        );
        let shards = others.into_iter().collect();
        Batch {
            shards,
            offsets,
            keys: keys.len(),
        }
    }

    /// The batch as commands: per shard, `BITFIELD` (or `BITFIELD_RO`) reading both markers,
    /// then setting (or reading) every bit of its keys; then, with `count`, the guarded
    /// `HINCRBY` of the metadata's item count.
    fn commands(
        &self,
        batch: &Batch,
        keys: &KeyBuf,
        write: bool,
        count: u64,
        module: bool,
        witnesses: &[Option<counters::Witness>],
    ) -> (Commands, Vec<Vec<u8>>) {
        let k = self.config.hashes() as usize;
        let tail = self.layout().tail_marker_offset();
        // Room for the module's commands: each key with its length and line ends, and each
        // shard's words (the configuration the longest); plain commands grow past it.
        let words = batch.shards.len() * (self.config_text.len() + 256);
        let mut commands = Commands::with_capacity(
            batch.shards.len() + 1,
            keys.byte_len() + 16 * keys.len() + words,
        );
        let mut routes = Vec::with_capacity(batch.shards.len() + 1);
        let creation = self.creation.hex();
        for (j, (shard, indexes)) in batch.shards.iter().enumerate() {
            let key = shard_key(&self.name, *shard);
            let witness = witnesses.get(j).and_then(Option::as_ref);
            if module {
                // The module hashes the keys itself, and checks both markers first. The
                // witness goes first: no key of this batch can have set its bits yet.
                commands.begin(5 + indexes.len() + usize::from(witness.is_some()));
                commands
                    .arg(if write {
                        b"BLOOM.MADD"
                    } else {
                        b"BLOOM.MEXISTS"
                    })
                    .arg(key.as_bytes())
                    .arg(creation.as_bytes())
                    .arg(self.config_text.as_bytes())
                    .arg(ENCODED);
                if let Some(witness) = witness {
                    commands.arg(&witness.key);
                }
                for &i in indexes {
                    commands.arg(keys.get(i).unwrap_or_default());
                }
                routes.push(key.into_bytes());
                continue;
            }
            let keys = indexes;
            let per_bit = if write { 4 } else { 3 };
            // INCRBY i64 OFFSET 1, or GET i64 OFFSET.
            let counter = match (self.counted, write) {
                (false, _) => 0,
                (true, true) => 4,
                (true, false) => 3,
            };
            let witness_bits = witness.map_or(0, |w| w.offsets.len());
            commands.begin(2 + 6 + counter + 3 * witness_bits + keys.len() * k * per_bit);
            commands
                .arg(if write { b"BITFIELD" } else { b"BITFIELD_RO" })
                .arg(key.as_bytes())
                .arg(b"GET")
                .arg(b"i64")
                .num(0)
                .arg(b"GET")
                .arg(b"i64")
                .num(tail);
            if self.counted {
                // The write counter, in the same command as the bits: advanced by a write,
                // read by a query.
                if write {
                    commands
                        .arg(b"INCRBY")
                        .arg(b"i64")
                        .num(self.counter_offset())
                        .num(1);
                } else {
                    commands.arg(b"GET").arg(b"i64").num(self.counter_offset());
                }
            }
            // The witness's bits, read before this command sets any.
            for &offset in witness.map_or(&[][..], |w| w.offsets.as_slice()) {
                commands.arg(b"GET").arg(b"u1").num(offset);
            }
            for &i in keys {
                for &offset in batch.offsets.get(i * k..(i + 1) * k).unwrap_or_default() {
                    if write {
                        commands.arg(b"SET").arg(b"u1").num(offset).num(1);
                    } else {
                        commands.arg(b"GET").arg(b"u1").num(offset);
                    }
                }
            }
            routes.push(key.into_bytes());
        }
        if count > 0 {
            let key = self.meta_key();
            commands.begin(6);
            commands
                .arg(b"EVAL")
                .arg(GUARDED_HINCRBY.as_bytes())
                .arg(b"1")
                .arg(key.as_bytes())
                .arg(self.creation.hex().as_bytes())
                .num(count);
            routes.push(key.into_bytes());
        }
        (commands, routes)
    }

    /// Sends a batch (and the count of an earlier one's new keys) without waiting.
    fn send_batch(
        &self,
        mut batch: Batch,
        keys: &KeyBuf,
        write: bool,
        judge: bool,
        count: u64,
        deadline: Instant,
    ) -> Result<InFlight, RedisFilterError> {
        let module = self.module.load(Ordering::Acquire);
        if !module && batch.offsets.is_empty() && batch.keys > 0 {
            // Grouped for the module, which then fell back: the plain commands need offsets.
            batch.offsets = self.batch_of(keys, true).offsets;
        }
        if write && !module {
            self.check_markers_before_writing(&batch, deadline)?;
        }
        // Taken before the commands go out: a reply comes from a state at least this new.
        let witnesses: Vec<Option<counters::Witness>> = batch
            .shards
            .iter()
            .map(|(shard, _)| {
                (judge && self.counted)
                    .then(|| self.seen.witness(*shard))
                    .flatten()
            })
            .collect();
        let (commands, routes) = self.commands(&batch, keys, write, count, module, &witnesses);
        let floors = batch
            .shards
            .iter()
            .map(|(shard, _)| {
                if judge {
                    self.seen.floor(*shard)
                } else {
                    counters::Mark::default()
                }
            })
            .collect();
        let replies = self.conn().start_pipeline(commands, routes, deadline)?;
        Ok(InFlight {
            batch,
            replies,
            counted: count > 0,
            module,
            write,
            floors,
            judge,
            witnesses,
        })
    }

    /// The markers a shard's reply read, checked: anything but the shard's own means its
    /// contents are lost.
    fn check_markers(&self, shard: u32, items: &[Value]) -> Result<(), RedisFilterError> {
        let (Some(head), Some(tail)) = (items.first(), items.get(1)) else {
            return Err(RedisFilterError::Protocol(
                "a shard's reply lacks its markers".into(),
            ));
        };
        let (head, tail) = (int(head)?, int(tail)?);
        let own = self.markers.of(shard);
        if head != own || tail != own {
            return Err(self.lost(
                shard,
                if head == 0 {
                    "its marker is gone: the key was deleted or emptied"
                } else if tail == 0 {
                    "its end marker is gone: the key was truncated or changed its length"
                } else {
                    "its marker is not this filter's: recreated, moved, or edited metadata"
                },
            ));
        }
        Ok(())
    }

    /// Reads a batch's replies, markers checked; returns, per key in batch order, whether
    /// all its bits were set (before an insert), and the connections that answered each
    /// shard. A shard whose node refused the module's command is sent the plain one.
    fn read_batch(
        &self,
        sent: InFlight,
        keys: &KeyBuf,
        deadline: Instant,
    ) -> Result<BatchReplies, RedisFilterError> {
        let k = self.config.hashes() as usize;
        let InFlight {
            batch,
            replies,
            counted,
            module,
            write,
            floors,
            judge,
            witnesses,
        } = sent;
        let (replies, live) = self.conn().finish_pipeline(replies, deadline)?;
        let nodes = if self.counted {
            counted::node_keys_of(live)
        } else {
            HashMap::new()
        };
        let mut deferred: Option<RedisFilterError> = None;
        let mut take = |shard: u32,
                        counter: i64,
                        floor,
                        serial: u64,
                        witness: Option<(&counters::Witness, bool)>|
         -> Result<i64, RedisFilterError> {
            match self.take_counter(
                shard,
                counter,
                floor,
                nodes.get(&serial).copied(),
                (write, judge),
                witness,
            ) {
                Ok(count) => Ok(count),
                Err(e) if e.is_unverified() => {
                    deferred = deferred.take().or(Some(e));
                    Ok(-1)
                }
                Err(e) => Err(e),
            }
        };
        let mut values = replies.values.into_iter();
        let mut serials = replies.answered_by.into_iter();
        let mut all_set = vec![false; batch.keys];
        let mut answered = Vec::with_capacity(batch.shards.len());
        let mut counts = Vec::with_capacity(if self.counted { batch.shards.len() } else { 0 });
        let mut refused = Vec::new();

        for (((shard, indexes), &floor), witness) in
            batch.shards.iter().zip(&floors).zip(&witnesses)
        {
            let witness = witness.as_ref();
            let (Some(value), Some(serial)) = (values.next(), serials.next()) else {
                return Err(RedisFilterError::Protocol("a reply is missing".into()));
            };
            if module && crate::module::refused_here(&value) {
                if self.target.module() == ModuleUse::Required {
                    return Err(RedisFilterError::ModuleMissing);
                }
                self.module.store(false, Ordering::Release);
                refused.push((*shard, indexes.clone()));
                continue;
            }
            let Value::Array(items) = server_error(value)? else {
                return Err(RedisFilterError::Protocol(
                    "a shard gave no array of integers".into(),
                ));
            };
            self.check_markers(*shard, &items)?;
            if module {
                // One byte per key: `1` when all its bits were set; then a counted shard's
                // write count.
                let (flags, counter) = match items.get(2..) {
                    Some([Value::BulkString(flags)]) if !self.counted => (flags, None),
                    Some([Value::BulkString(flags), counter]) if self.counted => {
                        (flags, Some(int(counter)?))
                    }
                    Some([_, _]) if !self.counted => {
                        return Err(self.lost(
                            *shard,
                            "it carries a write counter this filter's schema does not have (its length changed)",
                        ));
                    }
                    Some([_]) if self.counted => {
                        return Err(self.lost(
                            *shard,
                            "its write counter is gone (the key is shorter than the filter's shards)",
                        ));
                    }
                    _ => {
                        return Err(RedisFilterError::Protocol(
                            "the module gave no flag per key".into(),
                        ));
                    }
                };
                let witnessed = usize::from(witness.is_some());
                if flags.len() != indexes.len() + witnessed {
                    return Err(RedisFilterError::Protocol(
                        "the module gave no flag per key".into(),
                    ));
                }
                let (witness_flag, flags) = flags.split_at(witnessed);
                if let Some(counter) = counter {
                    let seen = witness.map(|w| (w, witness_flag == b"1"));
                    let count = take(*shard, counter, floor, serial, seen)?;
                    counts.push((*shard, count));
                }
                for (&i, &flag) in indexes.iter().zip(flags) {
                    let set = match flag {
                        b'1' => true,
                        b'0' => false,
                        _ => {
                            return Err(RedisFilterError::Protocol(
                                "the module gave a flag other than 0 or 1".into(),
                            ));
                        }
                    };
                    if let Some(slot) = all_set.get_mut(i) {
                        *slot = set;
                    }
                }
            } else {
                let witness_bits = witness.map_or(0, |w| w.offsets.len());
                let head = if self.counted { 3 } else { 2 };
                if items.len() != head + witness_bits + indexes.len() * k {
                    return Err(RedisFilterError::Protocol(
                        "a short reply for a shard".into(),
                    ));
                }
                if self.counted {
                    let counter = int(&items[2])?;
                    let seen = witness.map(|w| {
                        let bits = items.get(head..head + witness_bits).unwrap_or_default();
                        (w, bits.iter().all(|bit| matches!(bit, Value::Int(1))))
                    });
                    counts.push((*shard, take(*shard, counter, floor, serial, seen)?));
                }
                let head = head + witness_bits;
                for (&i, bits) in indexes.iter().zip(items[head..].chunks(k)) {
                    let mut set = true;
                    for bit in bits {
                        match bit {
                            Value::Int(1) => {}
                            Value::Int(0) => set = false,
                            other => {
                                return Err(RedisFilterError::Protocol(format!(
                                    "a shard gave {} for a bit",
                                    kind_of(other)
                                )));
                            }
                        }
                    }
                    if let Some(slot) = all_set.get_mut(i) {
                        *slot = set;
                    }
                }
            }
            if let Some(&(_, count)) = counts.last().filter(|(s, _)| s == shard) {
                self.witness_write(
                    *shard,
                    indexes,
                    keys,
                    &all_set,
                    (write, judge),
                    (nodes.get(&serial), count),
                );
            }
            answered.push((serial, *shard));
        }
        if counted {
            let value = values
                .next()
                .ok_or_else(|| RedisFilterError::Protocol("a reply is missing".into()))?;
            self.check_guarded(&server_error(value)?)?;
        }
        if !refused.is_empty() {
            // Sent again as plain commands (the handle uses them from now on): the module
            // did nothing on these shards, so their answers are exactly the plain path's.
            let again: Vec<usize> = refused.iter().flat_map(|(_, ix)| ix.clone()).collect();
            let retry = Batch {
                shards: refused,
                // Computed by `send_batch`, which sends them plain.
                offsets: Vec::new(),
                keys: batch.keys,
            };
            let sent = self.send_batch(retry, keys, write, judge, 0, deadline)?;
            let (set, by, read, later) = self.read_batch(sent, keys, deadline)?;
            for i in again {
                if let (Some(slot), Some(&set)) = (all_set.get_mut(i), set.get(i)) {
                    *slot = set;
                }
            }
            answered.extend(by);
            counts.extend(read);
            deferred = deferred.or(later);
        }
        // A count found unverified is no count to compare records with.
        counts.retain(|&(_, count)| count >= 0);
        Ok((all_set, answered, counts, deferred))
    }
}

pub(crate) fn ints(value: &Value) -> Result<Vec<i64>, RedisFilterError> {
    match value {
        Value::Array(items) => items.iter().map(int).collect(),
        other => Err(RedisFilterError::Protocol(format!(
            "expected an array of integers, got {}",
            kind_of(other)
        ))),
    }
}
