//! The primary-store trait: the truth that a filter only accelerates.

use std::sync::Arc;

use bloom_format::{DatasetGeneration, HistoryDigest, StoreIdentity};

use crate::claim::{ClaimKind, ClaimRefused, StoreClaim};
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

    /// Claims the store for a wrapper, for as long as the returned claim is held; `None`
    /// when a claim of the other kind is held (or, for [`ClaimKind::Exclusive`], any claim),
    /// in this process or another.
    ///
    /// - [`ClaimKind::Exclusive`]: one [`FilteredStore`](crate::FilteredStore). It answers
    ///   "absent" for every key its own filter lacks, so no other wrapper may write the
    ///   store while it is open: a second one would commit keys the first one answers
    ///   "absent" for (and, counting, could take back a count the first one's insert stood
    ///   for). `open` refuses it with [`StoreError::InUse`](crate::StoreError::InUse).
    /// - [`ClaimKind::Shared`]: any number of wrappers that share one filter (bloom-redis's
    ///   `SharedFilteredStore`, whose filter every writer sets bits in), and no exclusive one.
    ///
    /// The claim also says when the store it was made on is no longer the one the wrapper
    /// talks to ([`StoreClaim::status`]): unconfirmed while the store cannot be checked (the
    /// wrapper then asks the store for every lookup), lost for good once it was replaced
    /// (another database or file under the same name, its identity or history changed) or
    /// another wrapper took it. A store that can be replaced under a running process makes
    /// its claim with [`StoreClaim::holding_while`] and reports through the [`ClaimWatch`](crate::ClaimWatch).
    ///
    /// Implement it for any store more than one process can open: [`SqliteStore`] locks a
    /// file beside the database (exclusively or shared) and watches the database file,
    /// [`MemoryStore`] keeps a count. The default claims nothing
    /// ([`StoreClaim::unenforced`]): right only for a store that one wrapper alone can
    /// reach and nothing can replace.
    ///
    /// [`SqliteStore`]: crate::SqliteStore
    /// [`MemoryStore`]: crate::MemoryStore
    ///
    /// # Errors
    /// The store's error (the claim could not be made, or checked).
    fn claim_wrapper(&self, kind: ClaimKind) -> Result<Option<StoreClaim>, Self::Error> {
        let _ = kind;
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
            fn claim_wrapper(&self, kind: ClaimKind) -> Result<Option<StoreClaim>, Self::Error> {
                (**self).claim_wrapper(kind)
            }
        }
    )+};
}

forward_primary_store!(&S, Arc<S>, Box<S>);

impl StoreClaim {
    /// What every wrapper does first: claims `store` ([`PrimaryStore::claim_wrapper`] with
    /// `kind`), then records its key encoding or checks it against the one recorded
    /// ([`PrimaryStore::claim_key_encoding`]). The outer error is the store's; the inner one
    /// why the wrapper may not open.
    ///
    /// # Errors
    /// The store's error.
    pub fn for_wrapper<S: PrimaryStore + ?Sized>(
        store: &S,
        kind: ClaimKind,
        encoding: bloom_core::KeyEncoding,
    ) -> Result<Result<Self, ClaimRefused>, S::Error> {
        let Some(claim) = store.claim_wrapper(kind)? else {
            return Ok(Err(ClaimRefused::InUse));
        };
        let wrapper = format!("{} v{}", encoding.name(), encoding.version());
        let store = store.claim_key_encoding(&wrapper)?;
        Ok(if store == wrapper {
            Ok(claim)
        } else {
            Err(ClaimRefused::EncodingMismatch { store, wrapper })
        })
    }
}
