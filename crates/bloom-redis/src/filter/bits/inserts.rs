//! [`Inserts`]: keys inserted as a stream of batches, counted and made durable once at its
//! end; also the adds of a `Restore` and of `insert_all`.

use std::collections::HashSet;
use std::time::Instant;

use bloom_core::Key;

use super::stream::{KeyBuf, Stream};
use crate::error::RedisFilterError;
use crate::filter::RedisFilter;

/// Keys inserted as a stream of batches ([`RedisFilter::inserts`]): each [`Inserts::send`]
/// is one batch, one pipeline, up to three on the wire while the caller reads and sends the
/// next. The keys are inserted only once [`Inserts::finish`] returned: every batch read and
/// judged, its keys counted in the metadata, and the writes as durable as the filter asks.
#[must_use = "keys are inserted only once `finish` returned"]
pub struct Inserts<'f> {
    stream: Stream<'f, ()>,
    /// Whether the nodes that took each batch are judged (all but a restore's).
    verify: bool,
    changed: u64,
    /// The connection that took each shard's writes.
    written: HashSet<(u64, u32)>,
}

impl std::fmt::Debug for Inserts<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inserts")
            .field("filter", &self.stream.filter().name())
            .field("changed", &self.changed)
            .finish_non_exhaustive()
    }
}

impl RedisFilter {
    /// Inserts keys as a stream of batches ([`Inserts`]), for keys that come as a stream;
    /// each batch has its own deadline, as with [`RedisFilter::lookups`].
    pub fn inserts(&self) -> Inserts<'_> {
        Inserts::new(self, true, None)
    }
}

impl<'f> Inserts<'f> {
    pub(crate) fn new(filter: &'f RedisFilter, verify: bool, deadline: Option<Instant>) -> Self {
        Self {
            stream: Stream::new(filter, true, verify, deadline),
            verify,
            changed: 0,
            written: HashSet::new(),
        }
    }

    pub(crate) fn set_deadline(&mut self, deadline: Option<Instant>) {
        self.stream.set_deadline(deadline);
    }

    /// See [`Stream::resume`].
    pub(crate) fn resume(&mut self) {
        self.stream.resume();
    }

    /// Keys per batch that make the best use of a pipeline (more or fewer are fine).
    #[must_use]
    pub fn batch_len(&self) -> usize {
        self.stream.batch_len()
    }

    /// How many keys of the batches read back so far changed a bit.
    #[must_use]
    pub fn changed(&self) -> u64 {
        self.changed
    }

    /// Sends a batch of keys (any form [`RedisFilter::insert`] takes), every key encoded
    /// first; when three batches are then on the wire, reads the oldest.
    ///
    /// # Errors
    /// [`RedisFilterError::Key`] for a byte key a text encoding refuses: nothing of this
    /// batch was sent, and the stream goes on. Otherwise as [`RedisFilter::insert`]: the
    /// stream is done (drop it), and the keys of earlier batches may not all be in.
    pub fn send<I>(&mut self, keys: I) -> Result<(), RedisFilterError>
    where
        I: IntoIterator,
        I::Item: Key,
    {
        let (buffer, sensitive) = self.stream.encode(keys)?;
        let depends = sensitive.is_some_and(|sensitive| sensitive.contains(&true));
        self.stream.filter().note_mixed_tables_when(|| depends)?;
        self.send_encoded(buffer)
    }

    /// Sends keys already encoded and noted (`RedisFilter::note_mixed_tables`).
    pub(crate) fn send_encoded(&mut self, keys: KeyBuf) -> Result<(), RedisFilterError> {
        self.stream.send(keys, ())?;
        if self.stream.is_full() {
            self.land()?;
        }
        Ok(())
    }

    /// Sends keys already encoded and noted, copied from `keys`.
    pub(crate) fn send_slice<K: AsRef<[u8]>>(
        &mut self,
        keys: &[K],
    ) -> Result<(), RedisFilterError> {
        let mut buffer = self.stream.buffer();
        for key in keys {
            buffer.push(key.as_ref());
        }
        self.send_encoded(buffer)
    }

    fn land(&mut self) -> Result<bool, RedisFilterError> {
        let Self {
            stream,
            verify,
            changed,
            written,
        } = self;
        let filter = stream.filter();
        let landed = stream.land(|landed, ()| {
            if *verify {
                filter.verify_shards(&landed.answered, &landed.counts, landed.deadline)?;
            }
            let new = landed.all_set.iter().filter(|&&set| !set).count() as u64;
            *changed += new;
            written.extend(landed.answered.iter().copied());
            Ok((new, ()))
        })?;
        Ok(landed.is_some())
    }

    /// Reads back every batch on the wire ([`Inserts::changed`] then counts them all).
    ///
    /// # Errors
    /// As [`Inserts::send`].
    pub fn flush(&mut self) -> Result<(), RedisFilterError> {
        while self.land()? {}
        Ok(())
    }

    /// Reads back every batch, counts the keys in the metadata and makes the writes as
    /// durable as the filter (and this handle) asks; returns how many keys changed a bit.
    ///
    /// # Errors
    /// As [`RedisFilter::insert_all`]: a caller must not count the keys as inserted then.
    pub fn finish(self) -> Result<u64, RedisFilterError> {
        self.finish_writes().map(|(changed, _)| changed)
    }

    /// [`Inserts::finish`], with the connections that took each shard's writes.
    pub(crate) fn finish_writes(mut self) -> Result<(u64, Vec<(u64, u32)>), RedisFilterError> {
        self.flush()?;
        self.stream.count_rest()?;
        let mut written: Vec<(u64, u32)> = self.written.into_iter().collect();
        written.sort_unstable();
        let serials: Vec<u64> = written.iter().map(|&(serial, _)| serial).collect();
        let filter = self.stream.filter();
        filter.make_durable(&serials, self.stream.deadline())?;
        Ok((self.changed, written))
    }
}
