//! [`MemoryStore`]: an in-memory primary store for tests and examples, with the history
//! operations (rollback, copies) that tests of history damage need.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use bloom_format::{DatasetGeneration, HistoryDigest, StoreIdentity};

use crate::history::{
    self, Change, ChangeKind, HistoryPoint, IdentityError, KeyGeneration, Removal,
};
use crate::primary::PrimaryStore;

/// An in-memory primary store, for tests and examples.
///
/// Besides the [`PrimaryStore`] methods it can lose its newest commits
/// ([`MemoryStore::rollback_to`], as a database does after a power loss) and be copied
/// ([`Clone`], as a backup is: same identity, same history, independent from then on).
#[derive(Debug)]
pub struct MemoryStore {
    identity: StoreIdentity,
    inner: Mutex<MemoryInner>,
    failing: AtomicBool,
    claimed: crate::claim::ClaimFlag,
}

#[derive(Clone, Debug, Default)]
struct MemoryInner {
    key_encoding: Option<String>,
    /// The keys in the store, with the generation of their insert.
    generation_of: HashMap<Vec<u8>, u64>,
    /// The change of generation `i + 1`.
    log: Vec<Entry>,
}

#[derive(Clone, Debug)]
struct Entry {
    kind: ChangeKind,
    key: Vec<u8>,
    digest: HistoryDigest,
}

/// An error of [`MemoryStore`]: only produced on demand, to test error paths.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("memory store is unavailable (failure injected by set_failing)")]
pub struct MemoryStoreError;

impl MemoryStore {
    /// An empty store with a new identity.
    ///
    /// # Panics
    /// Never in practice: only if the operating system's random source fails; use
    /// [`MemoryStore::try_new`] to handle that.
    #[must_use]
    pub fn new() -> Self {
        Self::try_new().unwrap_or_else(|e| panic!("{e}"))
    }

    /// An empty store with a new identity.
    ///
    /// # Errors
    /// [`IdentityError`] when the random source fails.
    pub fn try_new() -> Result<Self, IdentityError> {
        Ok(Self::with_identity(history::new_identity()?))
    }

    /// An empty store with the given identity.
    #[must_use]
    pub fn with_identity(identity: StoreIdentity) -> Self {
        Self {
            identity,
            inner: Mutex::new(MemoryInner::default()),
            failing: AtomicBool::new(false),
            claimed: crate::claim::ClaimFlag::default(),
        }
    }

    /// Makes every following call fail (or succeed again), to exercise error handling.
    pub fn set_failing(&self, failing: bool) {
        self.failing.store(failing, Ordering::SeqCst);
    }

    /// The number of keys in the store.
    #[must_use]
    pub fn len(&self) -> usize {
        self.lock().generation_of.len()
    }

    /// Whether no key is committed.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forgets every commit after `generation`, as a database does when a power loss rolls
    /// back its newest transactions. The generations are then handed out again, to other
    /// keys.
    pub fn rollback_to(&self, generation: DatasetGeneration) {
        let mut inner = self.lock();
        let keep = usize::try_from(generation.get()).unwrap_or(usize::MAX);
        if keep < inner.log.len() {
            inner.log.truncate(keep);
            let mut keys = HashMap::new();
            for (i, entry) in inner.log.iter().enumerate() {
                match entry.kind {
                    ChangeKind::Inserted => keys.insert(entry.key.clone(), i as u64 + 1),
                    ChangeKind::Removed => keys.remove(&entry.key),
                };
            }
            inner.generation_of = keys;
        }
    }

    fn check(&self) -> Result<(), MemoryStoreError> {
        if self.failing.load(Ordering::SeqCst) {
            Err(MemoryStoreError)
        } else {
            Ok(())
        }
    }

    fn lock(&self) -> MutexGuard<'_, MemoryInner> {
        // Every update is a push plus an insert, both done or neither before a panic could
        // happen, so a poisoned lock still guards consistent data.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Appends a change to the log; returns its generation.
    fn append(
        &self,
        inner: &mut MemoryInner,
        kind: ChangeKind,
        key: &[u8],
    ) -> Result<DatasetGeneration, MemoryStoreError> {
        let head = self
            .point(inner, inner.log.len())
            .unwrap_or_else(|| HistoryPoint::genesis(self.identity));
        let generation = head.generation.next().ok_or(MemoryStoreError)?;
        let digest = history::after_change(head.digest, generation, kind, key);
        inner.log.push(Entry {
            kind,
            key: key.to_vec(),
            digest,
        });
        Ok(generation)
    }

    fn point(&self, inner: &MemoryInner, generation: usize) -> Option<HistoryPoint> {
        if generation == 0 {
            return Some(HistoryPoint::genesis(self.identity));
        }
        let entry = inner.log.get(generation - 1)?;
        Some(HistoryPoint {
            generation: DatasetGeneration::new(generation as u64),
            digest: entry.digest,
        })
    }
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

/// A copy with the same identity and history, as a backup of a database is; the two are
/// independent from then on.
impl Clone for MemoryStore {
    fn clone(&self) -> Self {
        Self {
            identity: self.identity,
            inner: Mutex::new(self.lock().clone()),
            failing: AtomicBool::new(self.failing.load(Ordering::SeqCst)),
            // An independent copy: not claimed by the original's wrapper.
            claimed: crate::claim::ClaimFlag::default(),
        }
    }
}

impl PrimaryStore for MemoryStore {
    type Error = MemoryStoreError;

    fn identity(&self) -> Result<StoreIdentity, MemoryStoreError> {
        self.check()?;
        Ok(self.identity)
    }

    fn contains(&self, key: &[u8]) -> Result<bool, MemoryStoreError> {
        self.check()?;
        Ok(self.lock().generation_of.contains_key(key))
    }

    fn head(&self) -> Result<HistoryPoint, MemoryStoreError> {
        self.check()?;
        let inner = self.lock();
        Ok(self
            .point(&inner, inner.log.len())
            .unwrap_or_else(|| HistoryPoint::genesis(self.identity)))
    }

    fn history_at(
        &self,
        generation: DatasetGeneration,
    ) -> Result<Option<HistoryDigest>, MemoryStoreError> {
        self.check()?;
        let inner = self.lock();
        Ok(usize::try_from(generation.get())
            .ok()
            .and_then(|g| self.point(&inner, g))
            .map(|p| p.digest))
    }

    fn keys_since(
        &self,
        after: DatasetGeneration,
        visit: &mut dyn FnMut(&[u8]),
    ) -> Result<DatasetGeneration, MemoryStoreError> {
        self.check()?;
        let inner = self.lock();
        let start = usize::try_from(after.get()).unwrap_or(usize::MAX);
        for (i, entry) in inner.log.iter().enumerate().skip(start) {
            if entry.kind == ChangeKind::Inserted
                && inner.generation_of.get(&entry.key) == Some(&(i as u64 + 1))
            {
                visit(&entry.key);
            }
        }
        Ok(DatasetGeneration::new(inner.log.len() as u64).max(after))
    }

    fn changes_since(
        &self,
        after: DatasetGeneration,
        visit: &mut dyn FnMut(Change<'_>),
    ) -> Result<DatasetGeneration, MemoryStoreError> {
        self.check()?;
        let inner = self.lock();
        let start = usize::try_from(after.get()).unwrap_or(usize::MAX);
        for (i, entry) in inner.log.iter().enumerate().skip(start) {
            visit(Change {
                generation: DatasetGeneration::new(i as u64 + 1),
                kind: entry.kind,
                key: &entry.key,
            });
        }
        Ok(DatasetGeneration::new(inner.log.len() as u64).max(after))
    }

    fn insert(&self, key: &[u8]) -> Result<Option<DatasetGeneration>, MemoryStoreError> {
        self.check()?;
        let mut inner = self.lock();
        if inner.generation_of.contains_key(key) {
            return Ok(None);
        }
        let generation = self.append(&mut inner, ChangeKind::Inserted, key)?;
        inner.generation_of.insert(key.to_vec(), generation.get());
        Ok(Some(generation))
    }

    fn generation_of(&self, key: &[u8]) -> Result<KeyGeneration, MemoryStoreError> {
        self.check()?;
        Ok(self
            .lock()
            .generation_of
            .get(key)
            .map_or(KeyGeneration::Absent, |&g| {
                KeyGeneration::Since(DatasetGeneration::new(g))
            }))
    }

    /// The whole batch under one lock: other threads see all of it or none of it.
    fn insert_all(
        &self,
        keys: &[&[u8]],
    ) -> Result<Vec<Option<DatasetGeneration>>, MemoryStoreError> {
        self.check()?;
        let mut inner = self.lock();
        let log_len = inner.log.len();
        let mut committed = Vec::with_capacity(keys.len());
        for key in keys {
            if inner.generation_of.contains_key(*key) {
                committed.push(None);
                continue;
            }
            match self.append(&mut inner, ChangeKind::Inserted, key) {
                Ok(generation) => {
                    inner.generation_of.insert(key.to_vec(), generation.get());
                    committed.push(Some(generation));
                }
                Err(e) => {
                    // All or nothing, as a transaction: undo the batch's inserts.
                    for entry in inner.log.split_off(log_len) {
                        inner.generation_of.remove(&entry.key);
                    }
                    return Err(e);
                }
            }
        }
        Ok(committed)
    }

    fn contains_each(&self, keys: &[&[u8]]) -> Result<Vec<bool>, MemoryStoreError> {
        self.check()?;
        let inner = self.lock();
        Ok(keys
            .iter()
            .map(|key| inner.generation_of.contains_key(*key))
            .collect())
    }

    fn remove(&self, key: &[u8]) -> Result<Option<Removal>, MemoryStoreError> {
        self.check()?;
        let mut inner = self.lock();
        let Some(&inserted_at) = inner.generation_of.get(key) else {
            return Ok(None);
        };
        let generation = self.append(&mut inner, ChangeKind::Removed, key)?;
        inner.generation_of.remove(key);
        Ok(Some(Removal {
            generation,
            inserted_at: DatasetGeneration::new(inserted_at),
        }))
    }

    fn claim_wrapper(
        &self,
        kind: crate::ClaimKind,
    ) -> Result<Option<crate::StoreClaim>, MemoryStoreError> {
        self.check()?;
        Ok(self.claimed.claim(kind))
    }

    fn claim_key_encoding(&self, proposed: &str) -> Result<String, MemoryStoreError> {
        self.check()?;
        Ok(self
            .lock()
            .key_encoding
            .get_or_insert_with(|| proposed.to_owned())
            .clone())
    }
}
