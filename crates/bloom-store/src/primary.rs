//! The primary-store trait and the in-memory store.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// The store that holds the truth. Small enough for any database to implement.
///
/// Keys are the bytes produced by the filter's key encoding (`EncodedKey::as_bytes`), so the
/// store and the filter agree on what "the same key" means.
///
/// The generation is a counter that grows with every committed new key and never goes back:
/// a key committed at generation `g` is returned by `keys_since(h)` for every `h < g`.
pub trait PrimaryStore: Send + Sync {
    /// The store's error type.
    type Error: std::error::Error + Send + Sync + 'static;

    /// Whether the key is committed.
    ///
    /// # Errors
    /// The store's error.
    fn contains(&self, key: &[u8]) -> Result<bool, Self::Error>;

    /// The current dataset generation; 0 for an empty store.
    ///
    /// # Errors
    /// The store's error.
    fn generation(&self) -> Result<u64, Self::Error>;

    /// Calls `visit` with every key committed after generation `after` (0 means all keys), in
    /// commit order, and returns the generation the visited keys reach: every key committed
    /// at or before it has been visited.
    ///
    /// # Errors
    /// The store's error.
    fn keys_since(&self, after: u64, visit: &mut dyn FnMut(&[u8])) -> Result<u64, Self::Error>;

    /// Commits a key. Returns `true` when it was new, `false` when it was already there.
    ///
    /// # Errors
    /// The store's error; the key is then not committed.
    fn insert(&self, key: &[u8]) -> Result<bool, Self::Error>;
}

/// An in-memory primary store, for tests and examples.
#[derive(Debug, Default)]
pub struct MemoryStore {
    inner: Mutex<MemoryInner>,
    failing: AtomicBool,
}

#[derive(Debug, Default)]
struct MemoryInner {
    generation_of: HashMap<Vec<u8>, u64>,
    log: Vec<Vec<u8>>,
}

/// An error of [`MemoryStore`]: only produced on demand, to test error paths.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("memory store is unavailable (failure injected by set_failing)")]
pub struct MemoryStoreError;

impl MemoryStore {
    /// An empty store.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Makes every following call fail (or succeed again), to exercise error handling.
    pub fn set_failing(&self, failing: bool) {
        self.failing.store(failing, Ordering::SeqCst);
    }

    /// The number of committed keys.
    #[must_use]
    pub fn len(&self) -> usize {
        self.lock().log.len()
    }

    /// Whether no key is committed.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn check(&self) -> Result<(), MemoryStoreError> {
        if self.failing.load(Ordering::SeqCst) {
            Err(MemoryStoreError)
        } else {
            Ok(())
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, MemoryInner> {
        // A panic while holding this lock cannot leave the maps inconsistent: every update is
        // a single push plus insert. So a poisoned lock is still usable.
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl PrimaryStore for MemoryStore {
    type Error = MemoryStoreError;

    fn contains(&self, key: &[u8]) -> Result<bool, MemoryStoreError> {
        self.check()?;
        Ok(self.lock().generation_of.contains_key(key))
    }

    fn generation(&self) -> Result<u64, MemoryStoreError> {
        self.check()?;
        Ok(self.lock().log.len() as u64)
    }

    fn keys_since(
        &self,
        after: u64,
        visit: &mut dyn FnMut(&[u8]),
    ) -> Result<u64, MemoryStoreError> {
        self.check()?;
        let inner = self.lock();
        let start = usize::try_from(after).unwrap_or(usize::MAX);
        for key in inner.log.iter().skip(start) {
            visit(key);
        }
        Ok((inner.log.len() as u64).max(after))
    }

    fn insert(&self, key: &[u8]) -> Result<bool, MemoryStoreError> {
        self.check()?;
        let mut inner = self.lock();
        if inner.generation_of.contains_key(key) {
            return Ok(false);
        }
        inner.log.push(key.to_vec());
        let generation = inner.log.len() as u64;
        inner.generation_of.insert(key.to_vec(), generation);
        Ok(true)
    }
}
