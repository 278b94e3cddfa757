//! Taking the store's changes into a filter: one change, every change since a snapshot's
//! point, and keys a batch at a time.

use bloom_core::EncodedKey;

use crate::error::StoreError;
use crate::history::{Change, ChangeKind, HistoryPoint};
use crate::kind::StoreFilter;
use crate::load::Matched;
use crate::outcome::{BypassReason, OpenOutcome};
use crate::primary::PrimaryStore;

use super::shared;

/// Applies one change of the store's history to a filter: an insert sets (or counts) the
/// key; a removal takes a count off a counting filter (refused when the filter says the key
/// is absent: its counts do not match the store) and leaves a plain filter's bits.
pub(super) fn apply_change(
    filter: &StoreFilter,
    change: Change<'_>,
) -> Result<(), bloom_core::RemoveError> {
    let key = EncodedKey::from_encoded(change.key);
    match change.kind {
        ChangeKind::Inserted => {
            filter.insert(&key);
            Ok(())
        }
        ChangeKind::Removed => filter.remove(&key),
    }
}

/// Replays the changes committed since a matched snapshot's generation (keys added, and taken
/// off a counting filter); a failure leaves the filter bypassed. Removals a plain filter keeps
/// the bits of are added to `stale`.
pub(super) fn catch_up<S: PrimaryStore>(
    store: &S,
    matched: Matched,
    head: HistoryPoint,
    stale: &mut u64,
) -> (StoreFilter, OpenOutcome) {
    let Matched { filter, generation } = matched;
    if generation == head.generation {
        return (filter, OpenOutcome::Trusted { generation });
    }
    let mut batch = Batcher::new(&filter);
    let mut removals = 0u64;
    let mut diverged = None;
    let caught_up = store.changes_since(generation, &mut |change| match change.kind {
        ChangeKind::Inserted => batch.push(change.key),
        ChangeKind::Removed => {
            // In order: the key's insert may be in the batch.
            batch.flush();
            removals += 1;
            if apply_change(batch.filter, change).is_err() {
                diverged.get_or_insert(change.generation);
            }
        }
    });
    let keys = batch.finish();
    if !filter.is_counting() {
        *stale += removals;
    }
    match (caught_up, diverged) {
        (Ok(_), Some(generation)) => (
            filter,
            OpenOutcome::Bypassed(BypassReason::CountsDiverged { generation }),
        ),
        (Ok(to), None) => (
            filter,
            OpenOutcome::CaughtUp {
                from: generation,
                to,
                keys,
                removals,
            },
        ),
        (Err(e), _) => (
            filter,
            OpenOutcome::Bypassed(BypassReason::CatchUpFailed(shared(
                StoreError::<S::Error>::Store(e),
            ))),
        ),
    }
}

/// Keys visited one at a time by `keys_since`, inserted into a filter a batch at a time (so
/// that the batch's cache misses overlap) from one reused buffer.
pub(super) struct Batcher<'a> {
    pub(super) filter: &'a StoreFilter,
    pub(super) bytes: Vec<u8>,
    pub(super) ends: Vec<usize>,
    pub(super) keys: u64,
}

impl<'a> Batcher<'a> {
    const KEYS: usize = 256;

    pub(super) fn new(filter: &'a StoreFilter) -> Self {
        Self {
            filter,
            bytes: Vec::new(),
            ends: Vec::with_capacity(Self::KEYS),
            keys: 0,
        }
    }

    pub(super) fn push(&mut self, key: &[u8]) {
        self.bytes.extend_from_slice(key);
        self.ends.push(self.bytes.len());
        self.keys += 1;
        if self.ends.len() == Self::KEYS {
            self.flush();
        }
    }

    pub(super) fn flush(&mut self) {
        let mut start = 0;
        let bytes = &self.bytes;
        self.filter.insert_all(self.ends.iter().map(|&end| {
            let key = bytes.get(start..end).unwrap_or_default();
            start = end;
            EncodedKey::from_encoded(key)
        }));
        self.bytes.clear();
        self.ends.clear();
    }

    /// Inserts what is left; returns how many keys were pushed.
    pub(super) fn finish(mut self) -> u64 {
        self.flush();
        self.keys
    }
}
