//! [`Lookups`]: keys looked up as a stream of batches, for callers whose keys come as a
//! stream (the CLI's key files): no deadline, pause or drain between one call's keys and the
//! next.

use std::time::Instant;

use bloom_core::Key;

use super::stream::Stream;
use crate::error::RedisFilterError;
use crate::filter::RedisFilter;

/// Keys looked up as a stream of batches ([`RedisFilter::lookups`]): each [`Lookups::send`]
/// is one batch, one pipeline, and up to three are on the wire while the caller reads and
/// sends the next; the answers come back a batch at a time, in the order the batches were
/// sent, each only once the nodes that answered it were judged.
#[must_use = "the answers come back through `send` and `next_answers`"]
pub struct Lookups<'f> {
    /// Per batch sent: per key, whether its answer is *maybe* whatever its bits say (a key
    /// outside ASCII under foreign Unicode tables); `None` when no key's is.
    stream: Stream<'f, Option<Vec<bool>>>,
}

impl std::fmt::Debug for Lookups<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lookups")
            .field("filter", &self.stream.filter().name())
            .field("in_flight", &self.stream.in_flight())
            .finish_non_exhaustive()
    }
}

impl RedisFilter {
    /// Looks keys up as a stream of batches ([`Lookups`]), for keys that come as a stream
    /// (a file, a socket): batches keep the server busy from the first to the last, with no
    /// pause between one call's keys and the next. Each batch has its own deadline, the
    /// target's timeout from when it is sent (never past [`RedisTarget::with_deadline`]'s).
    ///
    /// [`RedisTarget::with_deadline`]: crate::RedisTarget::with_deadline
    pub fn lookups(&self) -> Lookups<'_> {
        Lookups::new(self, None)
    }
}

impl<'f> Lookups<'f> {
    pub(crate) fn new(filter: &'f RedisFilter, deadline: Option<Instant>) -> Self {
        Self {
            stream: Stream::new(filter, false, true, deadline),
        }
    }

    /// Keys per batch that make the best use of a pipeline (more or fewer are fine).
    #[must_use]
    pub fn batch_len(&self) -> usize {
        self.stream.batch_len()
    }

    /// Sends a batch of keys (any form [`RedisFilter::contains`] takes); when three batches
    /// are then on the wire, reads the oldest and returns its answers, one per key in the
    /// order sent (`false` is definite; with Unicode tables other than this build's, a key
    /// outside ASCII and every already-encoded key is *maybe*).
    ///
    /// # Errors
    /// [`RedisFilterError::Key`] for a byte key a text encoding refuses: nothing of this
    /// batch was sent, and the stream goes on. Otherwise as [`RedisFilter::contains`]: no
    /// answer is given for the oldest batch, and the stream is done (drop it).
    pub fn send<I>(&mut self, keys: I) -> Result<Option<Vec<bool>>, RedisFilterError>
    where
        I: IntoIterator,
        I::Item: Key,
    {
        let (buffer, sensitive) = self.stream.encode(keys)?;
        self.stream.send(buffer, sensitive)?;
        if self.stream.is_full() {
            return self.next_answers();
        }
        Ok(None)
    }

    /// The answers of the oldest batch on the wire, `None` when none is.
    ///
    /// # Errors
    /// As [`Lookups::send`].
    pub fn next_answers(&mut self) -> Result<Option<Vec<bool>>, RedisFilterError> {
        let filter = self.stream.filter();
        self.stream.land(|landed, sensitive| {
            filter.verify_shards(&landed.answered, &landed.counts, landed.deadline)?;
            let mut answers = landed.all_set;
            if let Some(sensitive) = sensitive {
                for (i, answer) in answers.iter_mut().enumerate() {
                    *answer |= sensitive.get(i).copied().unwrap_or(true);
                }
            }
            Ok((0, answers))
        })
    }
}
