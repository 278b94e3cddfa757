//! The one-key operations of [`FilteredStore`]: lookups, inserts (with an application's own
//! commit too) and removals.

use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};

use bloom_core::{EncodedKey, Key};
use bloom_format::DatasetGeneration;

use crate::error::StoreError;
use crate::history::KeyGeneration;
use crate::outcome::{BypassReason, Lookup, Mode};
use crate::primary::PrimaryStore;

use super::{Answering, FilteredStore, State};

impl<S: PrimaryStore> FilteredStore<S> {
    /// Applies the configured key encoding to a text key.
    pub fn encode<'a>(&self, key: &'a str) -> EncodedKey<'a> {
        self.options.encoding.encode_str(key)
    }

    /// Whether a key (text, bytes or already encoded, such as a key read back from the
    /// store: see [`Key`]) is in the store. An encoded key is not encoded again.
    ///
    /// # Errors
    /// [`StoreError::Key`] for a byte key a text encoding refuses, or [`StoreError::Store`]
    /// when the store is asked and fails.
    pub fn contains<K: Key + ?Sized>(&self, key: &K) -> Result<Lookup, StoreError<S::Error>> {
        let key = key.encode(self.options.encoding).map_err(Into::into)?;
        self.contains_encoded(&key)
    }

    pub(super) fn contains_encoded(
        &self,
        key: &EncodedKey<'_>,
    ) -> Result<Lookup, StoreError<S::Error>> {
        self.counters
            .lookups
            .lookup(&Answering(self), &self.store, key)
            .map_err(StoreError::Store)
    }

    /// Inserts a key (text, bytes or already encoded: see [`Key`]): sets its bits (in the
    /// active filter and in a filter being rebuilt), then commits it to the store. Returns
    /// whether the store did not have it.
    ///
    /// # Errors
    /// [`StoreError::Key`] for a byte key a text encoding refuses, and for an encoded key
    /// whose bytes the encoding would not make ([`bloom_core::KeyError::NotEncoded`]:
    /// committed, they would never match the same key given as text); nothing is then
    /// inserted. [`StoreError::Store`]: the key is then not committed (its bits may be set,
    /// which only costs a false positive).
    pub fn insert<K: Key + ?Sized>(&self, key: &K) -> Result<bool, StoreError<S::Error>> {
        let key = key.encode_checked(self.options.encoding)?;
        self.insert_encoded_with(&key, |store, key| store.insert(key))
    }

    /// Inserts a key with a commit of the application's own: sets the key's bits as
    /// [`FilteredStore::insert`] does, then calls `commit` with the store and the encoded
    /// key, which writes the record (with whatever else the application keeps in it) and
    /// returns what [`PrimaryStore::insert`] would: the generation of the change, or `None`
    /// when the key was already there. Returns whether the store did not have it.
    ///
    /// This is how a record with more than its key goes in (a user with a name, say) while
    /// the filter stays in step: a write to the store that does not pass through the
    /// wrapper is not in the filter until the next save or rebuild takes it in. `commit` must
    /// record the change in the store's history as `PrimaryStore::insert` does.
    ///
    /// # Errors
    /// [`StoreError::Store`] with `commit`'s error: the record is then not committed (its
    /// bits may be set, which only costs a false positive).
    pub fn insert_with<K, F>(&self, key: &K, commit: F) -> Result<bool, StoreError<S::Error>>
    where
        K: Key + ?Sized,
        F: FnOnce(&S, &[u8]) -> Result<Option<DatasetGeneration>, S::Error>,
    {
        let key = key.encode_checked(self.options.encoding)?;
        self.insert_encoded_with(&key, commit)
    }

    pub(super) fn insert_encoded_with<F>(
        &self,
        key: &EncodedKey<'_>,
        commit: F,
    ) -> Result<bool, StoreError<S::Error>>
    where
        F: FnOnce(&S, &[u8]) -> Result<Option<DatasetGeneration>, S::Error>,
    {
        // The read guard is held through the commit: a rebuild installs its new filter and
        // switches over under the write lock, so no insert can set bits only in a filter that
        // is about to be dropped while its commit lands after the rebuild's scan.
        let _gate = self.options.counting.then(|| {
            self.insert_gate
                .read()
                .unwrap_or_else(PoisonError::into_inner)
        });
        let state = self.read();
        state.active.insert(key);
        if let Some(building) = &state.building {
            building.insert(key);
        }
        let counting = state.active.is_counting();
        let ticket = counting.then(|| self.flights.take_off());
        let committed = commit(&self.store, key.as_bytes());
        if let Ok(Some(generation)) = committed
            && counting
        {
            self.applied().record(generation);
        }
        if let Some(ticket) = ticket {
            self.flights.land(ticket);
        }
        let committed = committed.map_err(StoreError::Store)?;
        if counting && committed.is_none() {
            self.settle_duplicate(&state, key);
        }
        drop(state);
        self.counters.telemetry.inserts.add(1);
        Ok(committed.is_some())
    }

    /// A counting insert found its key already in the store: the count it just added stands
    /// for the key's insert if the filter never counted that insert (one made by another
    /// process, not yet taken in), and is taken back if it did, or if the key is gone again.
    /// A store that cannot tell which insert put the key there leaves the count (at worst a
    /// stale "maybe" after a removal). The added count was just made, so taking it back
    /// cannot be refused.
    pub(super) fn settle_duplicate(&self, state: &State, key: &EncodedKey<'_>) {
        let take_back = || {
            let _ = state.active.remove(key);
            if let Some(building) = &state.building {
                let _ = building.remove(key);
            }
        };
        match self.store.generation_of(key.as_bytes()) {
            Ok(KeyGeneration::Since(generation)) => {
                if !self.applied().applied(generation) {
                    // Maybe one of this wrapper's inserts, committed and about to record
                    // itself.
                    self.flights.wait_for_those_in_flight();
                }
                let mut applied = self.applied();
                if applied.applied(generation) {
                    take_back();
                    return;
                }
                // Not counted: this count stands for that insert, once; no save replays it.
                applied.record(generation);
                // A rebuild counts the inserts up to its start itself.
                if let (Some(building), Some(start)) = (&state.building, state.building_start)
                    && generation <= start
                {
                    let _ = building.remove(key);
                }
            }
            // Removed since the commit found it: its counts are for the history to settle.
            Ok(KeyGeneration::Absent) => take_back(),
            // A store that cannot tell (or failed to): keep the count while the key is there.
            _ => {
                if !self.store.contains(key.as_bytes()).unwrap_or(true) {
                    take_back();
                }
            }
        }
    }

    /// Removes a key (text, bytes or already encoded: see [`Key`]) from the store, then from
    /// the filter. Returns whether the store had it.
    ///
    /// - With a counting filter
    ///   ([`FilterOptions::counting`](crate::FilterOptions::counting)) the key's counters go
    ///   down, so the filter forgets it. Only keys the store confirmed present (and removed)
    ///   are taken off the filter, never a key it only reports "maybe". A crash between the
    ///   store's removal and the filter's leaves a stale "maybe", and the next open takes the
    ///   removal off from the store's history.
    /// - With a plain filter the key's bits stay (a stale "maybe", confirmed absent by the
    ///   store); [`Metrics::stale_removals`](crate::Metrics::stale_removals) counts them, and
    ///   once the filter's estimated false-positive rate passes the target the remove that
    ///   notices it rebuilds the filter from the store before returning (a failed rebuild
    ///   does not fail the remove: it is counted in
    ///   [`Metrics::failed_automatic_rebuilds`](crate::Metrics::failed_automatic_rebuilds)
    ///   and tried again later).
    ///
    /// Removals wait while a rebuild runs, and while a counting filter's snapshot is being
    /// taken.
    ///
    /// # Errors
    /// [`StoreError::Key`] for a byte key a text encoding refuses; [`StoreError::Store`]:
    /// the key is then not removed (and the filter unchanged).
    pub fn remove<K: Key + ?Sized>(&self, key: &K) -> Result<bool, StoreError<S::Error>> {
        let key = key.encode(self.options.encoding).map_err(Into::into)?;
        self.remove_encoded(&key)
    }

    pub(super) fn remove_encoded(
        &self,
        key: &EncodedKey<'_>,
    ) -> Result<bool, StoreError<S::Error>> {
        let gate = self
            .removal_gate
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        let state = self.read();
        let Some(removal) = self
            .store
            .remove(key.as_bytes())
            .map_err(StoreError::Store)?
        else {
            return Ok(false);
        };
        let generation = removal.generation;
        self.counters.telemetry.removals.add(1);
        let trusted = matches!(state.mode, Mode::Trusted);
        let mut diverged = false;
        let mut stale = 0;
        let state = if state.active.is_counting()
            && trusted
            && !self.applied().applied(removal.inserted_at)
        {
            // The insert this removal undoes is not recorded yet: it may be one of this
            // wrapper's, committed and about to be recorded (a removal racing the key's
            // insert). Wait until every insert in flight has recorded its generation, then
            // look again. The state guard is let go while waiting (an insert waiting for it
            // behind a pending writer would wait for this removal in turn); the removal
            // gate, still held, keeps rebuilds and saves out, so the filter stays the same.
            drop(state);
            drop(
                self.insert_gate
                    .write()
                    .unwrap_or_else(PoisonError::into_inner),
            );
            self.read()
        } else {
            state
        };
        if state.active.is_counting() {
            let mut applied = self.applied();
            // Only a count the filter holds is taken off: the key's insert must be in it. An
            // insert made behind the wrapper's back and not yet taken in is left alone, and so
            // is this removal (unrecorded): the next save replays both, in order. Taking it
            // off now would take a count from other keys when the key reads maybe by chance.
            // (Left for the save, the removals of a key inserted and removed often would pile
            // up its counts until they saturate: the wait above keeps that to keys inserted
            // behind the wrapper's back.)
            if trusted && applied.applied(removal.inserted_at) {
                // The filter counted the key: a refusal means the counts no longer describe
                // the store.
                diverged = state.active.remove(key).is_err();
                applied.record(generation);
            }
        } else {
            stale = self.counters.stale_removals.fetch_add(1, Ordering::Relaxed) + 1;
        }
        let active = Arc::clone(&state.active);
        drop(state);
        drop(gate);
        if diverged {
            let mut state = self.write();
            if Arc::ptr_eq(&state.active, &active) {
                state.set_mode(
                    Mode::Bypassed(BypassReason::CountsDiverged { generation }),
                    &self.counters.telemetry,
                );
            }
        } else if trusted && !active.is_counting() && self.stale_check_due(stale) {
            let target = self.options.false_positive_rate;
            // The key is removed whatever the rebuild does: a failed rebuild keeps the old
            // filter (trusted, stale bits and all), is counted, and is tried again later.
            if active.estimated_false_positive_rate() > target && self.rebuild().is_err() {
                self.counters
                    .failed_automatic_rebuilds
                    .fetch_add(1, Ordering::Relaxed);
            }
        }
        Ok(true)
    }

    /// Whether enough removals piled up since the last look at a plain filter's rate: every
    /// 1% of the capacity (at least every 64), so that the look (a pass over the bits) costs
    /// little per removal.
    pub(super) fn stale_check_due(&self, stale: u64) -> bool {
        let every = (self.read().capacity / 100).max(64);
        stale > 0 && stale.is_multiple_of(every)
    }
}
