//! The primary-store trait: the truth that a filter only accelerates.

use std::sync::Arc;

use bloom_format::{DatasetGeneration, HistoryDigest, StoreIdentity};

use crate::history::{Change, HistoryPoint, KeyGeneration, Removal};

/// The store that holds the truth. Small enough for any database to implement.
///
/// Keys are the bytes produced by the filter's key encoding (`EncodedKey::as_bytes`), so the
/// store and the filter agree on what "the same key" means.
///
/// # Generations and history
///
/// Every committed change gets the next generation: the generation grows by one with each
/// new key and each removed key, never for a key that was already there (or a removal of a
/// key that was not), and never goes back (stores upgraded from an older schema may have
/// gaps below their first new generation). A key committed at generation `g` and still in
/// the store is returned by `keys_since(h)` for every `h < g`; every change at generation
/// `g` is returned by `changes_since(h)`.
///
/// Every store has an [`identity`](PrimaryStore::identity), created with it and kept in it,
/// and a [history digest](crate::history) at every generation it has reached, computed when
/// the change is committed (in the same transaction) with [`history::after_insert`] or
/// [`history::after_remove`]. A
/// snapshot records both; `FilteredStore` trusts it only while the store still has the same
/// identity and the same digest at the snapshot's generation, so a store that lost commits,
/// was restored, recreated or replaced never trusts a snapshot of another history.
///
/// [`history::after_insert`]: crate::history::after_insert
/// [`history::after_remove`]: crate::history::after_remove
pub trait PrimaryStore: Send + Sync {
    /// The store's error type.
    type Error: std::error::Error + Send + Sync + 'static;

    /// The store's identity: random, created with the store, kept by backups and copies of
    /// it, new for a recreated store.
    ///
    /// # Errors
    /// The store's error.
    fn identity(&self) -> Result<StoreIdentity, Self::Error>;

    /// Whether the key is committed.
    ///
    /// # Errors
    /// The store's error.
    fn contains(&self, key: &[u8]) -> Result<bool, Self::Error>;

    /// The newest point of the history: the current generation (0 for an empty store) and
    /// the digest up to it, read together.
    ///
    /// # Errors
    /// The store's error.
    fn head(&self) -> Result<HistoryPoint, Self::Error>;

    /// The history digest at `generation`, or `None` when the store has no change at that
    /// generation (it has not reached it, or it is in a gap). Generation 0 is always there.
    ///
    /// # Errors
    /// The store's error.
    fn history_at(
        &self,
        generation: DatasetGeneration,
    ) -> Result<Option<HistoryDigest>, Self::Error>;

    /// Calls `visit` with every key in the store that was committed after generation `after`
    /// (0 means all keys), in commit order, and returns the generation the scan reached:
    /// every key committed at or before it and still in the store has been visited. Removed
    /// keys are not visited.
    ///
    /// # Errors
    /// The store's error.
    fn keys_since(
        &self,
        after: DatasetGeneration,
        visit: &mut dyn FnMut(&[u8]),
    ) -> Result<DatasetGeneration, Self::Error>;

    /// Calls `visit` with every change (inserted or removed key) committed after generation
    /// `after`, in generation order, and returns the generation reached: every change at or
    /// before it has been visited. A key inserted, removed and inserted again appears three
    /// times. Catch-up replays these, so that a counting filter takes removals off exactly.
    ///
    /// # Errors
    /// The store's error.
    fn changes_since(
        &self,
        after: DatasetGeneration,
        visit: &mut dyn FnMut(Change<'_>),
    ) -> Result<DatasetGeneration, Self::Error>;

    /// Commits a key. Returns the generation it got when it was new, `None` when it was
    /// already there (and nothing changed).
    ///
    /// # Errors
    /// The store's error; the key is then not committed.
    fn insert(&self, key: &[u8]) -> Result<Option<DatasetGeneration>, Self::Error>;

    /// The generation of the insert that put `key` in the store, if it is there.
    ///
    /// A counting filter uses it when an insert finds its key already there (put there by
    /// another process, say): the filter's count for it is then taken back only if the
    /// filter counted that insert, and kept (standing for it) otherwise. The default,
    /// [`KeyGeneration::Unknown`], leaves the count in place while the key is in the store,
    /// which costs at most a stale "maybe" after its removal.
    ///
    /// # Errors
    /// The store's error.
    fn generation_of(&self, key: &[u8]) -> Result<KeyGeneration, Self::Error> {
        let _ = key;
        Ok(KeyGeneration::Unknown)
    }

    /// Commits many keys as one batch, in order. Returns, for each key, what
    /// [`PrimaryStore::insert`] would have: the generation it got when it was new, `None` when
    /// it was already there (a key repeated in the batch is new once).
    ///
    /// Implement it with one transaction when the store has them: the batch is then
    /// committed whole or not at all, and costs one commit. The default commits the keys one
    /// by one, and an error then leaves the keys before the failing one committed.
    ///
    /// # Errors
    /// The store's error. A store with transactions commits none of the keys then.
    fn insert_all(&self, keys: &[&[u8]]) -> Result<Vec<Option<DatasetGeneration>>, Self::Error> {
        keys.iter().map(|key| self.insert(key)).collect()
    }

    /// Whether each key is committed, in order: [`PrimaryStore::contains`] for many keys.
    /// Implement it to answer from one read (one snapshot of the store) when the store can;
    /// the default asks for each key in turn.
    ///
    /// # Errors
    /// The store's error.
    fn contains_each(&self, keys: &[&[u8]]) -> Result<Vec<bool>, Self::Error> {
        keys.iter().map(|key| self.contains(key)).collect()
    }

    /// Removes a key. Returns the generation of the removal, and that of the insert it
    /// undoes, when the key was there; `None` when it was not (and nothing changed). The key
    /// may be inserted again later, as a new change.
    ///
    /// # Errors
    /// The store's error; the key is then not removed.
    fn remove(&self, key: &[u8]) -> Result<Option<Removal>, Self::Error>;

    /// Records `proposed` as the key encoding the store's keys are in, if none is recorded
    /// yet, and returns the recorded one (atomically: when two openers race, both get the
    /// first record). A store's keys can only be compared in the encoding they were written
    /// in, so `FilteredStore` refuses options with another one.
    ///
    /// # Errors
    /// The store's error.
    fn claim_key_encoding(&self, proposed: &str) -> Result<String, Self::Error>;

    /// Claims the store for one [`FilteredStore`](crate::FilteredStore), for as long as the
    /// returned claim is held; `None` when another wrapper holds it (in this process or
    /// another). A wrapper answers "absent" only for keys its own filter lacks, so a second
    /// wrapper over the same store would answer "absent" for the first one's keys (and,
    /// counting, could take back a count the first one's insert stood for): `open` refuses
    /// it with [`StoreError::InUse`](crate::StoreError::InUse).
    ///
    /// Implement it for any store more than one process can open: [`SqliteStore`] holds an
    /// exclusive lock on a file beside the database, [`MemoryStore`] a flag. The default
    /// claims nothing ([`StoreClaim::unenforced`]): right only for a store that one
    /// wrapper alone can reach.
    ///
    /// [`SqliteStore`]: crate::SqliteStore
    /// [`MemoryStore`]: crate::MemoryStore
    ///
    /// # Errors
    /// The store's error (the claim could not be made, or checked).
    fn claim_wrapper(&self) -> Result<Option<StoreClaim>, Self::Error> {
        Ok(Some(StoreClaim::unenforced()))
    }

    /// The current generation: [`PrimaryStore::head`]'s.
    ///
    /// # Errors
    /// The store's error.
    fn generation(&self) -> Result<DatasetGeneration, Self::Error> {
        Ok(self.head()?.generation)
    }
}

/// Forwards every method to the store behind the pointer, so that a store can be shared
/// (`&S`, `Arc<S>`) or boxed.
macro_rules! forward_primary_store {
    ($($ty:ty),+) => {$(
        impl<S: PrimaryStore + ?Sized> PrimaryStore for $ty {
            type Error = S::Error;

            fn identity(&self) -> Result<StoreIdentity, Self::Error> {
                (**self).identity()
            }
            fn contains(&self, key: &[u8]) -> Result<bool, Self::Error> {
                (**self).contains(key)
            }
            fn head(&self) -> Result<HistoryPoint, Self::Error> {
                (**self).head()
            }
            fn history_at(
                &self,
                generation: DatasetGeneration,
            ) -> Result<Option<HistoryDigest>, Self::Error> {
                (**self).history_at(generation)
            }
            fn keys_since(
                &self,
                after: DatasetGeneration,
                visit: &mut dyn FnMut(&[u8]),
            ) -> Result<DatasetGeneration, Self::Error> {
                (**self).keys_since(after, visit)
            }
            fn changes_since(
                &self,
                after: DatasetGeneration,
                visit: &mut dyn FnMut(Change<'_>),
            ) -> Result<DatasetGeneration, Self::Error> {
                (**self).changes_since(after, visit)
            }
            fn insert(&self, key: &[u8]) -> Result<Option<DatasetGeneration>, Self::Error> {
                (**self).insert(key)
            }
            fn generation_of(&self, key: &[u8]) -> Result<KeyGeneration, Self::Error> {
                (**self).generation_of(key)
            }
            fn insert_all(
                &self,
                keys: &[&[u8]],
            ) -> Result<Vec<Option<DatasetGeneration>>, Self::Error> {
                (**self).insert_all(keys)
            }
            fn contains_each(&self, keys: &[&[u8]]) -> Result<Vec<bool>, Self::Error> {
                (**self).contains_each(keys)
            }
            fn remove(&self, key: &[u8]) -> Result<Option<Removal>, Self::Error> {
                (**self).remove(key)
            }
            fn claim_key_encoding(&self, proposed: &str) -> Result<String, Self::Error> {
                (**self).claim_key_encoding(proposed)
            }
            fn claim_wrapper(&self) -> Result<Option<StoreClaim>, Self::Error> {
                (**self).claim_wrapper()
            }
        }
    )+};
}

forward_primary_store!(&S, Arc<S>, Box<S>);

/// A store claimed by one wrapper ([`PrimaryStore::claim_wrapper`]): released when dropped
/// (and by the operating system when the process ends, for a lock on a file).
pub struct StoreClaim {
    held: Option<Box<dyn Send + Sync>>,
    /// Cleared by the store when the claim ended behind the holder's back (for a claim
    /// that lives on a server connection: the server restarted and another wrapper took it).
    valid: Option<Arc<std::sync::atomic::AtomicBool>>,
}

impl StoreClaim {
    /// A claim that holds `held` (a locked file, a guard that clears a flag on drop) until it
    /// is dropped.
    #[must_use]
    pub fn holding(held: impl Send + Sync + 'static) -> Self {
        Self {
            held: Some(Box::new(held)),
            valid: None,
        }
    }

    /// A claim that holds `held` while `valid` stays `true`: the store clears it when the
    /// claim ends without being dropped (a lock on a server connection that a restart
    /// ended, now held by another wrapper). A `FilteredStore` whose claim is no longer valid
    /// stops answering "absent" from its filter alone, and asks the store.
    #[must_use]
    pub fn holding_while(
        held: impl Send + Sync + 'static,
        valid: Arc<std::sync::atomic::AtomicBool>,
    ) -> Self {
        Self {
            held: Some(Box::new(held)),
            valid: Some(valid),
        }
    }

    /// A claim that holds nothing: the store cannot tell wrappers apart.
    #[must_use]
    pub fn unenforced() -> Self {
        Self {
            held: None,
            valid: None,
        }
    }

    /// Whether the claim still holds ([`StoreClaim::holding_while`]); always `true` for the
    /// others.
    #[must_use]
    pub fn is_valid(&self) -> bool {
        self.valid
            .as_ref()
            .is_none_or(|v| v.load(std::sync::atomic::Ordering::Acquire))
    }

    /// Whether the claim holds anything (`false` for [`StoreClaim::unenforced`]).
    #[must_use]
    pub fn is_enforced(&self) -> bool {
        self.held.is_some()
    }
}

impl std::fmt::Debug for StoreClaim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreClaim")
            .field("enforced", &self.is_enforced())
            .field("valid", &self.is_valid())
            .finish()
    }
}

/// A claim flag for a store that lives in one process (a `MemoryStore`, an in-memory
/// database): set while a wrapper holds the claim.
#[derive(Debug, Default)]
pub(crate) struct ClaimFlag(Arc<std::sync::atomic::AtomicBool>);

impl ClaimFlag {
    /// The claim, or `None` while another holds it.
    pub(crate) fn claim(&self) -> Option<StoreClaim> {
        use std::sync::atomic::Ordering;
        self.0
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .ok()?;
        Some(StoreClaim::holding(Release(Arc::clone(&self.0))))
    }
}

/// Clears the flag when the claim is dropped.
struct Release(Arc<std::sync::atomic::AtomicBool>);

impl Drop for Release {
    fn drop(&mut self) {
        self.0.store(false, std::sync::atomic::Ordering::Release);
    }
}
