//! The many-key operations of [`FilteredStore`]: a batch of inserts is one commit of the
//! primary store (one transaction for SQLite), a batch of lookups one probe pass over the
//! filter and one read of the store for the "maybe"s.

use std::sync::PoisonError;

use bloom_core::{EncodedKey, Key, KeyError};

use crate::confirm::{commit_absent, present_by_probe};

use super::{Answering, FilteredStore};
use crate::error::StoreError;
use crate::outcome::Lookup;
use crate::primary::PrimaryStore;

impl<S: PrimaryStore> FilteredStore<S> {
    /// Inserts many keys as one batch: the trusted filter is asked first, and the keys it
    /// says "maybe" for are read from the store (one read), so that keys the store has are
    /// not committed again (a commit costs far more than a read: a batch of duplicates goes
    /// several times faster). The others' bits are set (in the active filter and in a
    /// filter being rebuilt), then they are committed with one [`PrimaryStore::insert_all`],
    /// which for `SqliteStore` is one transaction. Returns, for
    /// each key in order, whether the store did not have it (a key repeated in the batch is
    /// new once).
    ///
    /// The guarantees are those of [`FilteredStore::insert`], for every key of the batch:
    /// bits before the commit, so a crash before or during the commit leaves false positives
    /// only, never a committed key without its bits. The batch is held in memory while it is
    /// encoded and committed; call it with batches of a size you would commit in one
    /// transaction (a few thousand keys, say).
    ///
    /// ```
    /// use bloom_store::{FilterOptions, FilteredStore, Lookup, MemoryStore};
    ///
    /// let (seen, _) = FilteredStore::open_and_recover(
    ///     MemoryStore::new(), FilterOptions::new(10_000, 0.01))?;
    /// assert_eq!(seen.insert_all(["a", "b", "a"])?, [true, true, false]);
    /// let answers = seen.contains_each(["a", "z"])?;
    /// assert!(answers[0].is_present() && !answers[1].is_present());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// Keys come in any form [`FilteredStore::insert`] takes ([`Key`]), such as keys read
    /// back from the store as [`EncodedKey`]s, which are not encoded again.
    ///
    /// # Errors
    /// [`StoreError::Key`] for a key [`FilteredStore::insert`] would refuse, before anything
    /// is inserted. [`StoreError::Store`]: with a store that has transactions (SQLite,
    /// `MemoryStore`) no key of the batch is committed; their bits may be set, which only
    /// costs false positives.
    pub fn insert_all<I>(&self, keys: I) -> Result<Vec<bool>, StoreError<S::Error>>
    where
        I: IntoIterator,
        I::Item: Key,
    {
        let keys: Vec<I::Item> = keys.into_iter().collect();
        let encoding = self.options.encoding;
        let encoded: Vec<EncodedKey<'_>> = keys
            .iter()
            .map(|k| k.encode_checked(encoding))
            .collect::<Result<_, KeyError>>()?;
        let probed = present_by_probe(&Answering(self), &self.store, &encoded);
        let Some(present) = probed.map_err(StoreError::Store)? else {
            return self.insert_batch(&encoded);
        };
        // Every key given counts as an insert through the wrapper, as a commit of it would.
        let skipped = present.iter().filter(|p| **p).count() as u64;
        self.counters.telemetry.inserts.add(skipped);
        // Only the keys the store does not have are committed; the others are not new.
        commit_absent(&encoded, &present, |absent| self.insert_batch(absent))
    }

    fn insert_batch(&self, keys: &[EncodedKey<'_>]) -> Result<Vec<bool>, StoreError<S::Error>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        // As for one insert: the state's read guard is held through the commit, so a rebuild
        // cannot switch to a filter that misses this batch's bits.
        let _gate = self.options.counting.then(|| {
            self.insert_gate
                .read()
                .unwrap_or_else(PoisonError::into_inner)
        });
        let state = self.read();
        state.active.insert_all(keys.iter());
        if let Some(building) = &state.building {
            building.insert_all(keys.iter());
        }
        let raw: Vec<&[u8]> = keys.iter().map(EncodedKey::as_bytes).collect();
        let counting = state.active.is_counting();
        let ticket = counting.then(|| self.flights.take_off());
        let committed = self.store.insert_all(&raw);
        if let Ok(committed) = &committed
            && counting
        {
            let mut applied = self.applied();
            for generation in committed.iter().flatten() {
                applied.record(*generation);
            }
        }
        if let Some(ticket) = ticket {
            self.flights.land(ticket);
        }
        let committed = committed.map_err(StoreError::Store)?;
        if counting {
            // Already in the store (or earlier in this batch).
            for (key, _) in keys.iter().zip(&committed).filter(|(_, g)| g.is_none()) {
                self.settle_duplicate(&state, key);
            }
        }
        drop(state);
        self.counters.telemetry.inserts.add(keys.len() as u64);
        // A store that answered for fewer keys than it was given reports the rest as not
        // new: never more than it committed.
        Ok((0..keys.len())
            .map(|i| committed.get(i).is_some_and(Option::is_some))
            .collect())
    }

    /// Looks up many keys (any form [`FilteredStore::contains`] takes): one probe pass over the filter, then one
    /// [`PrimaryStore::contains_each`] for the keys it could not rule out (one read
    /// transaction for SQLite). The answers, in key order, are those of
    /// [`FilteredStore::contains`].
    ///
    /// # Errors
    /// [`StoreError::Key`] for a byte key a text encoding refuses, before anything is looked
    /// up; [`StoreError::Store`] when the store is asked and fails.
    pub fn contains_each<I>(&self, keys: I) -> Result<Vec<Lookup>, StoreError<S::Error>>
    where
        I: IntoIterator,
        I::Item: Key,
    {
        let keys: Vec<I::Item> = keys.into_iter().collect();
        let encoding = self.options.encoding;
        let encoded: Vec<EncodedKey<'_>> = keys
            .iter()
            .map(|k| k.encode(encoding).map_err(Into::into))
            .collect::<Result<_, KeyError>>()?;
        self.lookup_batch(&encoded)
    }

    fn lookup_batch(&self, keys: &[EncodedKey<'_>]) -> Result<Vec<Lookup>, StoreError<S::Error>> {
        self.counters
            .lookups
            .lookup_each(&Answering(self), &self.store, keys)
            .map_err(StoreError::Store)
    }
}
