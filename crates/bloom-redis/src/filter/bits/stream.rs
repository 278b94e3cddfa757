//! Batches as a stream: each batch of keys is one pipeline, and up to `IN_FLIGHT` of them are
//! on the wire while the caller reads, hashes and sends the next, so that the server always
//! has work queued. [`Stream`] is the one loop under every insert and lookup: `insert_all`,
//! `contains_each`, a restore's adds, and the public streams (`Lookups`, `Inserts`).

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::time::Instant;

use bloom_core::Key;

use super::{BATCH, IN_FLIGHT, InFlight, MODULE_BATCH, MODULE_KEYS_PER_COMMAND};
use crate::error::RedisFilterError;
use crate::filter::{GUARDED_HINCRBY, RedisFilter};

/// The keys of one batch, in the filter's encoding, in one buffer reused batch after batch.
#[derive(Default)]
pub(crate) struct KeyBuf {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl KeyBuf {
    #[inline]
    pub(crate) fn push(&mut self, key: &[u8]) {
        self.bytes.extend_from_slice(key);
        self.ends.push(self.bytes.len());
    }

    pub(crate) fn len(&self) -> usize {
        self.ends.len()
    }

    /// The bytes of every key.
    pub(crate) fn byte_len(&self) -> usize {
        self.bytes.len()
    }

    /// Key `i`.
    pub(crate) fn get(&self, i: usize) -> Option<&[u8]> {
        let start = match i.checked_sub(1) {
            Some(before) => *self.ends.get(before)?,
            None => 0,
        };
        self.bytes.get(start..*self.ends.get(i)?)
    }

    /// The keys, in order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &[u8]> {
        let mut start = 0;
        self.ends.iter().map(move |&end| {
            let key = self.bytes.get(start..end).unwrap_or_default();
            start = end;
            key
        })
    }

    fn clear(&mut self) {
        self.bytes.clear();
        self.ends.clear();
    }
}

/// A batch's replies, read and checked.
pub(crate) struct Landed {
    /// Per key, in batch order, whether all its bits were set (before an insert: whether it
    /// changed nothing).
    pub(crate) all_set: Vec<bool>,
    /// The connections (by serial) that answered each shard.
    pub(crate) answered: Vec<(u64, u32)>,
    /// The write count each counted shard's reply read.
    pub(crate) counts: Vec<(u32, i64)>,
    /// The batch's deadline, for what is judged on its replies.
    pub(crate) deadline: Instant,
}

/// A batch on the wire (none for a batch without keys), with what its caller keeps beside it.
struct Sent<T> {
    flight: Option<InFlight>,
    keys: KeyBuf,
    tag: T,
}

/// Batches on one filter, in order: sent without waiting, read back oldest first. Each
/// pipeline after the first carries the count of the keys the batches before it found new
/// (`GUARDED_HINCRBY`); the last count goes alone, at [`Stream::count_rest`]. After an error
/// the stream is done: what was on the wire is dropped, and every call fails.
pub(crate) struct Stream<'f, T> {
    filter: &'f RedisFilter,
    write: bool,
    /// Whether the shards' counters are judged (all but a restore's adds).
    judge: bool,
    /// One deadline for every batch (a call's), or none: each batch's from when it is sent,
    /// and for its replies from when they are read.
    deadline: Option<Instant>,
    in_flight: VecDeque<Sent<T>>,
    uncounted: u64,
    spare: Vec<KeyBuf>,
    failed: bool,
}

impl<'f, T> Stream<'f, T> {
    pub(crate) fn new(
        filter: &'f RedisFilter,
        write: bool,
        judge: bool,
        deadline: Option<Instant>,
    ) -> Self {
        Self {
            filter,
            write,
            judge,
            deadline,
            in_flight: VecDeque::with_capacity(IN_FLIGHT),
            uncounted: 0,
            spare: Vec::new(),
            failed: false,
        }
    }

    /// The filter the batches go to.
    pub(crate) fn filter(&self) -> &'f RedisFilter {
        self.filter
    }

    /// Batches on the wire.
    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// One deadline for the batches sent from now on, or none (each its own).
    pub(crate) fn set_deadline(&mut self, deadline: Option<Instant>) {
        self.deadline = deadline;
    }

    /// The deadline of a batch sent now (or of what ends the stream).
    pub(crate) fn deadline(&self) -> Instant {
        self.deadline.unwrap_or_else(|| self.filter.deadline())
    }

    /// Keys per batch: one pipeline's worth.
    pub(crate) fn batch_len(&self) -> usize {
        if self.filter.module.load(Ordering::Acquire) {
            (self.filter.shards as usize)
                .saturating_mul(MODULE_KEYS_PER_COMMAND)
                .clamp(*MODULE_BATCH.start(), *MODULE_BATCH.end())
        } else {
            BATCH
        }
    }

    /// An empty buffer for a batch's keys.
    pub(crate) fn buffer(&mut self) -> KeyBuf {
        let mut keys = self.spare.pop().unwrap_or_default();
        keys.clear();
        keys
    }

    /// A batch's keys in a buffer, each in the filter's encoding, and, when the filter has
    /// Unicode tables other than this build's, whether each key depends on them.
    ///
    /// # Errors
    /// [`RedisFilterError::Key`] for a byte key a text encoding refuses.
    pub(crate) fn encode<I>(
        &mut self,
        keys: I,
    ) -> Result<(KeyBuf, Option<Vec<bool>>), RedisFilterError>
    where
        I: IntoIterator,
        I::Item: Key,
    {
        let encoding = self.filter.config.encoding();
        let foreign = self.filter.config.has_foreign_tables();
        let mut buffer = self.buffer();
        let mut sensitive = Vec::new();
        for key in keys {
            let encoded = key
                .encode(encoding)
                .map_err(|e| RedisFilterError::Key(e.into()))?;
            buffer.push(encoded.as_bytes());
            if foreign {
                sensitive.push(key.depends_on_tables());
            }
        }
        Ok((buffer, foreign.then_some(sensitive)))
    }

    fn usable(&self) -> Result<(), RedisFilterError> {
        if self.failed {
            return Err(RedisFilterError::Protocol(
                "a batch of this stream failed before: start another".into(),
            ));
        }
        Ok(())
    }

    /// Takes the stream up again after an error, with nothing on the wire: for a caller whose
    /// every call is a whole operation (`Restore::add`), as separate calls would be.
    pub(crate) fn resume(&mut self) {
        self.failed = false;
        self.in_flight.clear();
    }

    /// `result`, the stream done if it is an error.
    fn checked<R>(&mut self, result: Result<R, RedisFilterError>) -> Result<R, RedisFilterError> {
        if result.is_err() {
            self.failed = true;
            self.in_flight.clear();
        }
        result
    }

    /// Sends a batch without waiting; `tag` comes back with its replies.
    pub(crate) fn send(&mut self, keys: KeyBuf, tag: T) -> Result<(), RedisFilterError> {
        self.usable()?;
        let deadline = self.deadline();
        let flight = if keys.len() == 0 {
            None
        } else {
            let module = self.filter.module.load(Ordering::Acquire);
            let batch = self.filter.batch_of(&keys, !module);
            let count = std::mem::take(&mut self.uncounted);
            let sent = self
                .filter
                .send_batch(batch, &keys, self.write, self.judge, count, deadline);
            Some(self.checked(sent)?)
        };
        self.in_flight.push_back(Sent { flight, keys, tag });
        Ok(())
    }

    /// Whether as many batches are on the wire as may be: read the oldest before sending more.
    pub(crate) fn is_full(&self) -> bool {
        self.in_flight.len() >= IN_FLIGHT
    }

    /// Reads the oldest batch's replies (`None` when none is on the wire) and hands them to
    /// `each`, which judges them and returns how many of its keys are new (counted in the
    /// metadata with the next batch) and what the caller gets.
    pub(crate) fn land<R>(
        &mut self,
        each: impl FnOnce(Landed, T) -> Result<(u64, R), RedisFilterError>,
    ) -> Result<Option<R>, RedisFilterError> {
        self.usable()?;
        let Some(sent) = self.in_flight.pop_front() else {
            return Ok(None);
        };
        let Sent { flight, keys, tag } = sent;
        // The replies are waited for from now, not from when the batch was sent: keys that
        // arrive slowly between batches (a pipe, `tail -f`) must not use up the time of the
        // batches already on the wire. A call's one deadline stays that deadline.
        let deadline = self.deadline();
        let read = match flight {
            Some(flight) => self.filter.read_batch(flight, &keys, deadline),
            None => Ok((Vec::new(), Vec::new(), Vec::new(), None)),
        };
        let (all_set, answered, counts, deferred) = self.checked(read)?;
        let landed = Landed {
            all_set,
            answered,
            counts,
            deadline,
        };
        let judged = each(landed, tag);
        let (new, out) = self.checked(judged)?;
        self.uncounted += new;
        self.spare.push(keys);
        // The nodes were judged by `each`: a counter's verdict comes after theirs.
        if let Some(e) = deferred {
            return self.checked(Err(e));
        }
        Ok(Some(out))
    }

    /// Counts in the metadata the new keys of the batches read since the last one sent.
    pub(crate) fn count_rest(&mut self) -> Result<(), RedisFilterError> {
        self.usable()?;
        let uncounted = std::mem::take(&mut self.uncounted);
        if uncounted == 0 {
            return Ok(());
        }
        let key = self.filter.meta_key();
        let creation = self.filter.creation.hex();
        let counted = self.filter.guarded(&[
            b"EVAL",
            GUARDED_HINCRBY.as_bytes(),
            b"1",
            key.as_bytes(),
            creation.as_bytes(),
            uncounted.to_string().as_bytes(),
        ]);
        self.checked(counted)
    }
}
