//! The first start of a fleet: [`SharedFilteredStore::open_or_create`] attaches to the shared
//! filter, or creates it and builds it from the store when Redis has none, with one process
//! building while the others wait.

use std::time::{Duration, Instant};

use bloom_core::{EncodedKey, FilterConfig, KeyEncoding};
use bloom_store::{Lookup, PrimaryStore};

use crate::connection::RedisTarget;
use crate::error::RedisFilterError;
use crate::filter::{RedisFilter, shard_geometry};

use super::{DEFAULT_GRACE, SharedError, SharedFilteredStore, SharedOpen};

/// How long a process that found another creating the filter waits, past the grace period,
/// for it to be built (bound to the store) before building it itself: a creator that died
/// mid-build leaves a filter bound to nothing, which any wrapper builds at its attach.
const BUILD_WAIT: Duration = Duration::from_secs(60);

/// How long a creation may stay unfinished (its name claimed, its shards being written:
/// seconds at most, plus a second per 16 MiB of filter) before a starter takes it for abandoned (its creator killed) and
/// deletes it to create the filter again. (Metadata that stays unreadable that long is
/// deleted too: no process can use such a filter, and `rebuild` would delete it as well.)
const ABANDONED_AFTER: Duration = Duration::from_secs(60);

/// How often a waiting process looks at the filter.
const LOOK_EVERY: Duration = Duration::from_millis(50);

impl<S: PrimaryStore> SharedFilteredStore<S> {
    /// [`SharedFilteredStore::open`], creating the shared filter with `config` (the sharded
    /// layout; its key encoding is the wrapper's) when Redis has none, with the default
    /// grace period (10 s: see [`SharedFilteredStore::open_with_grace`]).
    ///
    /// When many processes start at once on an empty Redis, exactly one creates the filter
    /// (Redis's `HSETNX` on its name decides) and builds it from the store, after the grace
    /// period ([`SharedOpen::Created`]); the others wait for it to be built and attach
    /// ([`SharedOpen::Trusted`]). A creation left unfinished for a minute (its creator
    /// killed) is deleted and made again. A filter that exists is attached to as
    /// [`SharedFilteredStore::open`] does: one that cannot be trusted (lost shards, another
    /// store's) is reported [`SharedOpen::Bypassed`] and repaired by
    /// [`SharedFilteredStore::rebuild`], never replaced here. Redis being unreachable is not
    /// an error either: the wrapper opens bypassed, and creates the filter when an insert or
    /// a lookup finds Redis back without it (as after a restart that lost it).
    ///
    /// # Errors
    /// [`SharedError::Create`] for a `config` Redis filters cannot use (before anything is
    /// touched) or a filter made with another configuration; otherwise as
    /// [`SharedFilteredStore::open`].
    pub fn open_or_create(
        store: S,
        target: RedisTarget,
        name: &str,
        config: FilterConfig,
    ) -> Result<(Self, SharedOpen), SharedError<S::Error>> {
        Self::open_or_create_with_grace(store, target, name, config, DEFAULT_GRACE)
    }

    /// [`SharedFilteredStore::open_or_create`] with the grace period `grace`.
    ///
    /// # Errors
    /// As [`SharedFilteredStore::open_or_create`].
    pub fn open_or_create_with_grace(
        store: S,
        target: RedisTarget,
        name: &str,
        config: FilterConfig,
        grace: Duration,
    ) -> Result<(Self, SharedOpen), SharedError<S::Error>> {
        shard_geometry(&config).map_err(SharedError::Create)?;
        let mut wrapper = Self::claimed(store, target, name, config.encoding(), grace)?;
        wrapper.create = Some(config);
        let created = wrapper.create_missing()?;
        if !created {
            let deadline = Instant::now().checked_add(grace.saturating_add(BUILD_WAIT));
            wrapper.wait_until_built(deadline);
        }
        let outcome = match wrapper.attach()? {
            SharedOpen::Trusted { to, caught_up, .. } if created => SharedOpen::Created {
                to,
                taken: caught_up,
            },
            outcome => outcome,
        };
        // Made by another starter, with another configuration.
        if let Some(filter) = &wrapper.read().filter
            && let Some(config) = &wrapper.create
            && let Some(mismatch) = filter.config().mismatch(config)
        {
            return Err(SharedError::Create(RedisFilterError::Incompatible {
                name: wrapper.name.clone(),
                mismatch,
            }));
        }
        Ok((wrapper, outcome))
    }

    /// Creates the filter (with the configuration `open_or_create` was given) when Redis has
    /// none; whether this process created it. A creation another process left unfinished
    /// for [`ABANDONED_AFTER`] is deleted first. A filter there already must have been made
    /// with the same configuration; Redis failing leaves the decision to the attach
    /// (bypassed until it is back).
    pub(super) fn create_missing(&self) -> Result<bool, SharedError<S::Error>> {
        let Some(config) = &self.create else {
            return Ok(false);
        };
        let mut unfinished_since: Option<Instant> = None;
        loop {
            match RedisFilter::open(&self.target, &self.name) {
                Err(RedisFilterError::NotFound { .. }) => {}
                Ok(filter) => {
                    return match filter.config().mismatch(config) {
                        None => Ok(false),
                        Some(mismatch) => {
                            Err(SharedError::Create(RedisFilterError::Incompatible {
                                name: self.name.clone(),
                                mismatch,
                            }))
                        }
                    };
                }
                // Being created by another process (its name claimed, its metadata or
                // shards being written): wait; abandoned: delete it.
                Err(RedisFilterError::NotReady { .. } | RedisFilterError::Metadata { .. }) => {
                    let since = *unfinished_since.get_or_insert_with(Instant::now);
                    // A large filter takes longer to write (its shards, without the module,
                    // through the network): a second more per 16 MiB.
                    let bytes = config.params().bits() / 8;
                    let abandoned = ABANDONED_AFTER + Duration::from_secs(bytes >> 24);
                    if since.elapsed() < abandoned {
                        std::thread::sleep(LOOK_EVERY);
                        continue;
                    }
                    if RedisFilter::delete(&self.target, &self.name).is_err() {
                        return Ok(false);
                    }
                    unfinished_since = None;
                }
                // Unreachable or damaged: the attach decides.
                Err(_) => return Ok(false),
            }
            match RedisFilter::create(&self.target, &self.name, config.clone()) {
                Ok(_) => return Ok(true),
                // Another process got there first: look again (it may still be writing it).
                Err(RedisFilterError::AlreadyExists { .. }) => {}
                // Redis failing: the attach reports it, and the filter is created at the
                // next attach that finds Redis back.
                Err(
                    RedisFilterError::Redis(_)
                    | RedisFilterError::Timeout { .. }
                    | RedisFilterError::Unavailable(_),
                ) => return Ok(false),
                Err(e) => return Err(SharedError::Create(e)),
            }
        }
    }

    /// Waits until the filter is bound to a store (its creator has built it), until it is
    /// gone or unusable, or until `deadline` (a creator that died mid-build).
    fn wait_until_built(&self, deadline: Option<Instant>) {
        loop {
            let built = RedisFilter::open(&self.target, &self.name)
                .and_then(|filter| filter.header())
                .map(|header| header.store.is_some());
            let waiting = deadline.is_none_or(|deadline| Instant::now() < deadline);
            match built {
                Ok(false)
                | Err(RedisFilterError::NotReady { .. } | RedisFilterError::Metadata { .. })
                    if waiting =>
                {
                    std::thread::sleep(LOOK_EVERY);
                }
                _ => return,
            }
        }
    }
}

/// A [`SharedFilteredStore`] behind [`bloom_store::Coalesced`]: single keys from many tasks
/// share one Redis pipeline and one store transaction.
impl<S> bloom_store::Batched for SharedFilteredStore<S>
where
    S: PrimaryStore + Send + Sync + 'static,
    S::Error: Send + Sync + 'static,
{
    type Error = SharedError<S::Error>;

    fn encoding(&self) -> KeyEncoding {
        self.encoding
    }

    fn insert_batch(&self, keys: &[EncodedKey<'_>]) -> Result<Vec<bool>, Self::Error> {
        self.insert_all(keys)
    }

    fn contains_batch(&self, keys: &[EncodedKey<'_>]) -> Result<Vec<Lookup>, Self::Error> {
        self.contains_each(keys)
    }
}
