//! [`SharedFilteredStore`]: check-then-confirm over a primary store, with the filter held in
//! Redis and shared by every process that writes the store.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{PoisonError, RwLock};
use std::time::Duration;

use bloom_core::{EncodedKey, FilterConfig, KeyEncoding};
use bloom_format::{DatasetGeneration, StoreBinding};
use bloom_store::{Lookup, PrimaryStore};

use crate::connection::RedisTarget;
use crate::error::RedisFilterError;
use crate::filter::RedisFilter;

/// How [`SharedFilteredStore::open`] found the shared filter.
#[derive(Debug)]
#[non_exhaustive]
pub enum SharedOpen {
    /// The filter covers the store: trusted, after taking in the keys written since the point
    /// it records (`caught_up` of them; normally none, since every writer sets bits first).
    Trusted {
        /// The generation the filter recorded.
        from: DatasetGeneration,
        /// The generation it covers now.
        to: DatasetGeneration,
        /// Keys taken in.
        caught_up: u64,
    },
    /// The filter cannot be trusted (why is given): queries go to the store until
    /// [`SharedFilteredStore::rebuild`].
    Bypassed(String),
}

/// Why an operation of a [`SharedFilteredStore`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SharedError<E: std::error::Error + 'static> {
    /// The primary store failed.
    #[error("primary store: {0}")]
    Store(#[source] E),
    /// The shared filter could not take a key's bits, so the key was not committed: other
    /// processes trust the filter, and a committed key without bits would be reported absent
    /// by them. Retry once Redis is back, or after [`SharedFilteredStore::rebuild`].
    #[error("the key was not committed: the shared filter could not take its bits: {0}")]
    Filter(#[source] RedisFilterError),
    /// A key could not be encoded.
    #[error(transparent)]
    Key(#[from] bloom_core::KeyError),
    /// The store's keys are in another encoding than the filter's.
    #[error("the store's keys are in the {store} encoding, the shared filter's in {filter}")]
    EncodingMismatch {
        /// The store's.
        store: String,
        /// The filter's.
        filter: String,
    },
}

/// A membership set over a primary store with a Bloom filter in Redis, shared by every
/// process that writes the store.
///
/// **Invariant:** a key committed to the primary store is never reported absent.
///
/// - Inserts set the key's bits in Redis *before* the store commit. If Redis cannot take
///   them (unreachable, the filter lost), the insert fails and the key is not committed:
///   other processes answer from the shared filter, so a committed key without bits would be
///   reported absent by them. Availability of inserts is bounded by Redis's; correctness is
///   not.
/// - Queries answer "absent" only from a filter that is trusted and replied; a Redis error,
///   a lost shard or an untrusted filter turn the query into a store lookup.
/// - A filter is trusted when its metadata binds it to this store's identity and its history
///   digest at the generation it records; it then takes in the keys committed since (written
///   behind the wrapper's back, or during a lost-state window).
/// - [`SharedFilteredStore::rebuild`] repairs a filter that is lost or untrusted: it adds
///   every key of the store to the existing shards when they are intact (never clearing bits
///   other processes rely on), or recreates them when Redis lost them. A recreated filter
///   waits a grace period before scanning the store, so that an insert whose bits went into
///   the lost shards just before the loss has committed and is scanned; an insert whose
///   commit takes longer than the grace after its bits were set is taken in by the next
///   open's catch-up.
pub struct SharedFilteredStore<S> {
    store: S,
    target: RedisTarget,
    name: String,
    encoding: KeyEncoding,
    filter: RwLock<Option<RedisFilter>>,
    trusted: AtomicBool,
    grace: Duration,
    lookups_avoided: AtomicU64,
}

impl<S> std::fmt::Debug for SharedFilteredStore<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedFilteredStore")
            .field("name", &self.name)
            .field("target", &self.target)
            .field("trusted", &self.trusted.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl<S: PrimaryStore> SharedFilteredStore<S> {
    /// Opens the shared filter `name` over `store`, with the key encoding `encoding` (the
    /// store's keys and the filter's must agree).
    ///
    /// # Errors
    /// [`SharedError::Store`] or [`SharedError::EncodingMismatch`]. Redis being unreachable
    /// or the filter being lost is not an error: the wrapper opens bypassed.
    pub fn open(
        store: S,
        target: RedisTarget,
        name: &str,
        encoding: KeyEncoding,
    ) -> Result<(Self, SharedOpen), SharedError<S::Error>> {
        let label = format!("{} v{}", encoding.name(), encoding.version());
        let recorded = store
            .claim_key_encoding(&label)
            .map_err(SharedError::Store)?;
        if recorded != label {
            return Err(SharedError::EncodingMismatch {
                store: recorded,
                filter: label,
            });
        }
        let wrapper = Self {
            store,
            target,
            name: name.to_owned(),
            encoding,
            filter: RwLock::new(None),
            trusted: AtomicBool::new(false),
            grace: Duration::from_secs(10),
            lookups_avoided: AtomicU64::new(0),
        };
        let outcome = wrapper.attach()?;
        Ok((wrapper, outcome))
    }

    /// How long a rebuild that recreates lost shards waits before it scans the store
    /// (default 10 s): longer than any insert takes from setting bits to committing.
    #[must_use]
    pub fn with_grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// The primary store.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// Whether queries are answered from the filter.
    #[must_use]
    pub fn is_trusted(&self) -> bool {
        self.trusted.load(Ordering::Acquire)
    }

    /// Queries answered "absent" without asking the store.
    #[must_use]
    pub fn lookups_avoided(&self) -> u64 {
        self.lookups_avoided.load(Ordering::Relaxed)
    }

    /// (Re)opens the Redis filter and decides whether it is trusted.
    fn attach(&self) -> Result<SharedOpen, SharedError<S::Error>> {
        self.trusted.store(false, Ordering::Release);
        let filter = match RedisFilter::open(&self.target, &self.name) {
            Ok(filter) => filter,
            Err(e) => {
                *self.filter.write().unwrap_or_else(PoisonError::into_inner) = None;
                return Ok(SharedOpen::Bypassed(e.to_string()));
            }
        };
        if filter.config().encoding() != self.encoding {
            let why = format!(
                "the filter's key encoding is {}, the store's {}",
                filter.config().encoding(),
                self.encoding
            );
            *self.filter.write().unwrap_or_else(PoisonError::into_inner) = Some(filter);
            return Ok(SharedOpen::Bypassed(why));
        }
        let verdict = self.coverage(&filter);
        *self.filter.write().unwrap_or_else(PoisonError::into_inner) = Some(filter);
        let from = match verdict? {
            Ok(from) => from,
            Err(why) => return Ok(SharedOpen::Bypassed(why)),
        };
        // Keys committed since the recorded point: normally none (writers set bits first).
        match self.take_in_since(from, false) {
            Ok((to, caught_up)) => {
                self.trusted.store(true, Ordering::Release);
                Ok(SharedOpen::Trusted {
                    from,
                    to,
                    caught_up,
                })
            }
            Err(CatchUp::Store(e)) => Err(SharedError::Store(e)),
            Err(CatchUp::Filter(e)) => Ok(SharedOpen::Bypassed(e.to_string())),
        }
    }

    /// The generation the filter covers, if it is bound to this store's history.
    #[allow(clippy::type_complexity)]
    fn coverage(
        &self,
        filter: &RedisFilter,
    ) -> Result<Result<DatasetGeneration, String>, SharedError<S::Error>> {
        let header = match filter.header() {
            Ok(header) => header,
            Err(e) => return Ok(Err(e.to_string())),
        };
        let Some(binding) = header.store else {
            return Ok(Err(
                "the filter is bound to no store yet (rebuild it from the store)".to_owned(),
            ));
        };
        let identity = self.store.identity().map_err(SharedError::Store)?;
        if binding.identity != identity {
            return Ok(Err("the filter was built for another store".to_owned()));
        }
        let generation = header.dataset_generation;
        let digest = self
            .store
            .history_at(generation)
            .map_err(SharedError::Store)?;
        if digest != Some(binding.history) {
            return Ok(Err(format!(
                "the store's history at generation {generation} is not the one the filter covers (restored, rolled back or diverged)"
            )));
        }
        Ok(Ok(generation))
    }

    /// Sets the bits of every key committed after `from`; records the new coverage (always
    /// with `record`, otherwise when it moved).
    fn take_in_since(
        &self,
        from: DatasetGeneration,
        record: bool,
    ) -> Result<(DatasetGeneration, u64), CatchUp<S::Error>> {
        let guard = self.filter.read().unwrap_or_else(PoisonError::into_inner);
        let Some(filter) = guard.as_ref() else {
            return Err(CatchUp::Filter(RedisFilterError::Protocol(
                "no filter is attached".into(),
            )));
        };
        // The history point first: the keys visited reach at least it.
        let head = self.store.head().map_err(CatchUp::Store)?;
        let mut batch: Vec<Vec<u8>> = Vec::new();
        let mut failed = None;
        let mut taken = 0u64;
        let mut flush = |batch: &mut Vec<Vec<u8>>, failed: &mut Option<RedisFilterError>| {
            if failed.is_none() && !batch.is_empty() {
                match filter.insert_all_encoded(batch.iter()) {
                    Ok(_) => taken += batch.len() as u64,
                    Err(e) => *failed = Some(e),
                }
            }
            batch.clear();
        };
        self.store
            .keys_since(from, &mut |key| {
                batch.push(key.to_vec());
                if batch.len() >= 1024 {
                    flush(&mut batch, &mut failed);
                }
            })
            .map_err(CatchUp::Store)?;
        flush(&mut batch, &mut failed);
        if let Some(e) = failed {
            return Err(CatchUp::Filter(e));
        }
        // Every key up to the head read before the scan now has its bits.
        let to = head.generation;
        if record || to != from {
            let identity = self.store.identity().map_err(CatchUp::Store)?;
            filter
                .set_coverage(to, Some(StoreBinding::new(identity, head.digest)))
                .map_err(CatchUp::Filter)?;
        }
        Ok((to, taken))
    }

    /// Whether a text key is in the store.
    ///
    /// # Errors
    /// [`SharedError::Store`] when the store is asked and fails.
    pub fn contains(&self, key: &str) -> Result<Lookup, SharedError<S::Error>> {
        self.contains_encoded(&self.encoding.encode_str(key))
    }

    /// Whether an encoded key is in the store.
    ///
    /// # Errors
    /// [`SharedError::Store`] when the store is asked and fails.
    pub fn contains_encoded(&self, key: &EncodedKey<'_>) -> Result<Lookup, SharedError<S::Error>> {
        let maybe = if self.is_trusted() {
            let guard = self.filter.read().unwrap_or_else(PoisonError::into_inner);
            match guard.as_ref().map(|f| f.contains_encoded(key)) {
                Some(Ok(maybe)) => Some(maybe),
                Some(Err(e)) => {
                    // Never an answer from a filter that failed: the store decides, and a
                    // lost filter stays untrusted until rebuilt.
                    if e.is_lost_state() {
                        self.trusted.store(false, Ordering::Release);
                    }
                    None
                }
                None => None,
            }
        } else {
            None
        };
        if maybe == Some(false) {
            self.lookups_avoided.fetch_add(1, Ordering::Relaxed);
            return Ok(Lookup::AbsentByFilter);
        }
        let present = self
            .store
            .contains(key.as_bytes())
            .map_err(SharedError::Store)?;
        Ok(match (present, maybe) {
            (true, _) => Lookup::Present,
            (false, Some(_)) => Lookup::FalsePositive,
            (false, None) => Lookup::AbsentBypassed,
        })
    }

    /// Inserts a text key: its bits in Redis first, then the store commit. Returns whether
    /// the store did not have it.
    ///
    /// # Errors
    /// [`SharedError::Filter`] when the bits could not be set (the key is then not
    /// committed), or [`SharedError::Store`].
    pub fn insert(&self, key: &str) -> Result<bool, SharedError<S::Error>> {
        self.insert_encoded(&self.encoding.encode_str(key))
    }

    /// Inserts an encoded key; see [`SharedFilteredStore::insert`].
    ///
    /// # Errors
    /// As [`SharedFilteredStore::insert`].
    pub fn insert_encoded(&self, key: &EncodedKey<'_>) -> Result<bool, SharedError<S::Error>> {
        let set = {
            let guard = self.filter.read().unwrap_or_else(PoisonError::into_inner);
            match guard.as_ref() {
                Some(filter) => filter.insert_encoded(key).map(|_| ()),
                None => Err(RedisFilterError::Protocol(
                    "no usable shared filter: Redis was unreachable or the filter is lost at open"
                        .into(),
                )),
            }
        };
        if let Err(e) = set {
            if e.is_lost_state() {
                self.trusted.store(false, Ordering::Release);
            }
            // The filter may have been recreated (by another process's rebuild): attach to
            // it and try once more, so that writers keep going through a rebuild.
            let retried = self.attach().ok().and_then(|_| {
                let guard = self.filter.read().unwrap_or_else(PoisonError::into_inner);
                guard.as_ref().map(|f| f.insert_encoded(key).map(|_| ()))
            });
            match retried {
                Some(Ok(())) => {}
                Some(Err(again)) => return Err(SharedError::Filter(again)),
                None => return Err(SharedError::Filter(e)),
            }
        }
        self.store
            .insert(key.as_bytes())
            .map_err(SharedError::Store)
    }

    /// Makes the shared filter cover the store again, then trusts it: the store's keys are
    /// added to the existing shards when they are intact, or the filter is recreated with
    /// `config` (sharded layout, the wrapper's encoding) when it is missing or lost. Returns
    /// the number of keys taken in.
    ///
    /// # Errors
    /// A store or Redis error; the wrapper then stays bypassed.
    pub fn rebuild(&self, config: FilterConfig) -> Result<u64, SharedError<S::Error>> {
        self.trusted.store(false, Ordering::Release);
        let intact = {
            let guard = self.filter.read().unwrap_or_else(PoisonError::into_inner);
            guard.as_ref().is_some_and(|f| f.check_shards().is_ok())
        };
        if !intact {
            // Lost or missing: recreate. Writers fail against the lost shards until they
            // attach to the new ones, so none commits a key whose bits went nowhere.
            RedisFilter::delete(&self.target, &self.name, Some(config.layout().shards()))
                .map_err(SharedError::Filter)?;
            let created = RedisFilter::create(&self.target, &self.name, config)
                .map_err(SharedError::Filter)?;
            *self.filter.write().unwrap_or_else(PoisonError::into_inner) = Some(created);
            std::thread::sleep(self.grace);
        }
        let (_, taken) = match self.take_in_since(DatasetGeneration::ZERO, true) {
            Ok(done) => done,
            Err(CatchUp::Store(e)) => return Err(SharedError::Store(e)),
            Err(CatchUp::Filter(e)) => return Err(SharedError::Filter(e)),
        };
        self.trusted.store(true, Ordering::Release);
        Ok(taken)
    }
}

enum CatchUp<E> {
    Store(E),
    Filter(RedisFilterError),
}
