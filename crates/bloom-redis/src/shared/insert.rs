//! The inserts of a [`SharedFilteredStore`]: a key's bits in Redis first, then the store's
//! commit, then a check that the bits are still there (set again in the current filter if
//! the one they went into was lost meanwhile).

use bloom_core::{EncodedKey, Key};
use bloom_store::{PrimaryStore, commit_absent, present_by_probe};

use super::{Answering, SharedError, SharedFilteredStore, Unset, encode_all, reason_code};

impl<S: PrimaryStore> SharedFilteredStore<S> {
    /// Sets the keys' bits in the installed filter; returns the epoch they were set under.
    fn set_bits(&self, keys: &[EncodedKey<'_>]) -> Result<u64, Unset> {
        let state = self.read();
        match &state.filter {
            Some(filter) => filter
                .insert_all(keys)
                .map(|_| state.epoch)
                .map_err(Unset::Filter),
            None => Err(Unset::NoFilter(state.unusable.clone())),
        }
    }

    /// Inserts a key (text, bytes or already encoded: see [`Key`]): its bits in Redis first,
    /// then the store commit, then a check that the bits are still there. Returns whether
    /// the store did not have it.
    ///
    /// # Errors
    /// [`SharedError::Key`] for a key the store's encoding refuses (a byte key that is not
    /// UTF-8 under a text encoding, or an encoded key whose bytes the encoding would not
    /// make): nothing is then inserted. [`SharedError::Filter`] when the bits could not be
    /// set, and [`SharedError::NoFilter`] when no filter is attached (Redis unreachable at
    /// the open, the filter absent or lost): the key is then not committed.
    /// [`SharedError::ClaimLost`] once the store's claim is lost for good (reopen the
    /// wrapper), [`SharedError::Store`], or [`SharedError::CommittedWithoutBits`].
    pub fn insert<K: Key + ?Sized>(&self, key: &K) -> Result<bool, SharedError<S::Error>> {
        Ok(self.insert_all([key])?.first().copied().unwrap_or(false))
    }

    /// Inserts many keys as one batch: the keys the store has already are found first (the
    /// trusted filter is probed, and the store read for its "maybe"s) and not committed
    /// again; the others' bits go to Redis first (a pipeline per batch), then one
    /// [`PrimaryStore::insert_all`] (one transaction for a store that has them), then one
    /// check that every key's bits are still there. Returns, for each key in order, whether
    /// the store did not have it. The guarantees are those of
    /// [`SharedFilteredStore::insert`], for every key of the batch.
    ///
    /// # Errors
    /// As [`SharedFilteredStore::insert`]; a refused key is found before anything is sent.
    pub fn insert_all<I>(&self, keys: I) -> Result<Vec<bool>, SharedError<S::Error>>
    where
        I: IntoIterator,
        I::Item: Key,
    {
        let keys: Vec<I::Item> = keys.into_iter().collect();
        let encoded = encode_all(&keys, |k| k.encode_checked(self.encoding))?;
        // For a batch, the keys the store has already are found first, the cheap way (one
        // pipelined probe of the shared filter, one store read for its "maybe"s), and are
        // not committed again; one key goes straight to its commit, which finds out itself.
        if encoded.len() > 1 {
            let probed = present_by_probe(&Answering(self), &self.store, &encoded);
            if let Some(present) = probed.map_err(SharedError::Store)? {
                return commit_absent(&encoded, &present, |absent| self.commit_batch(absent));
            }
        }
        self.commit_batch(&encoded)
    }

    /// Commits `encoded`: bits first, then the store, then the check that the bits held.
    fn commit_batch(&self, encoded: &[EncodedKey<'_>]) -> Result<Vec<bool>, SharedError<S::Error>> {
        if encoded.is_empty() {
            return Ok(Vec::new());
        }
        // Bits in a filter that covers another store (this one replaced) would be committed
        // to a store nobody trusts: refused before anything is set.
        self.check_claim()?;
        let epoch = match self.set_bits(encoded) {
            Ok(epoch) => epoch,
            Err(first) => {
                // The filter may have been recreated (by another process's rebuild): attach
                // to the current one and try once more, so that writers keep going. (An
                // attach running already installs what it finds.)
                self.try_attach()?;
                self.set_bits(encoded)
                    .map_err(|again| match (again, first) {
                        // No filter now: the reason the first attempt failed says more.
                        (Unset::NoFilter(_), Unset::Filter(e)) | (Unset::Filter(e), _) => {
                            SharedError::Filter(e)
                        }
                        (Unset::NoFilter(why), Unset::NoFilter(_)) => SharedError::NoFilter {
                            why,
                            committed: false,
                        },
                    })?
            }
        };
        let raw: Vec<&[u8]> = encoded.iter().map(EncodedKey::as_bytes).collect();
        let committed = self.store.insert_all(&raw).map_err(SharedError::Store)?;
        self.confirm_bits(encoded, epoch)?;
        // A store that answered for fewer keys than it was given reports the rest as not
        // new: never more than it committed.
        let new: Vec<bool> = (0..encoded.len())
            .map(|i| committed.get(i).is_some_and(Option::is_some))
            .collect();
        self.counters
            .telemetry
            .inserts
            .add(new.iter().filter(|n| **n).count() as u64);
        Ok(new)
    }

    /// After a commit: the bits set under `epoch` are still in the shared filter, or are set
    /// again in the current one.
    fn confirm_bits(
        &self,
        keys: &[EncodedKey<'_>],
        epoch: u64,
    ) -> Result<(), SharedError<S::Error>> {
        // Why the bits are not known to be held: the reason's code, and the reason.
        let missing = {
            let state = self.read();
            match state.filter.as_ref().filter(|_| state.epoch == epoch) {
                None => Some(("lost", "the shared filter was replaced".to_owned())),
                Some(f) => match f.contains_each(keys) {
                    Ok(answers) if answers.len() == keys.len() && !answers.contains(&false) => {
                        None
                    }
                    Ok(_) => Some((
                        "lost",
                        "the shared filter lost a committed key's bits (lost, recreated or replaced)"
                            .to_owned(),
                    )),
                    Err(e) => Some((reason_code(&e), e.to_string())),
                },
            }
        };
        let Some((code, why)) = missing else {
            return Ok(());
        };
        self.distrust(epoch, &why, code);
        // After a commit, correctness before latency: wait for an attach another thread is
        // running (it may be repairing the filter from a head read before this commit), then
        // set the bits in what is installed. Whatever fails from here on, the key is
        // committed, and the error says so.
        let attached = self.attach();
        self.set_bits(keys)
            .map(|_| ())
            .map_err(|unset| match (attached, unset) {
                (Err(e), _) => SharedError::NoFilter {
                    why: e.to_string(),
                    committed: true,
                },
                (Ok(_), Unset::Filter(e)) => SharedError::CommittedWithoutBits(e),
                (Ok(_), Unset::NoFilter(why)) => SharedError::NoFilter {
                    why,
                    committed: true,
                },
            })
    }
}
