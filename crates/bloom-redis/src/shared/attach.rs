//! Attaching to the shared filter: whether it covers this store, and taking in the keys
//! committed since the point it covers.

use std::sync::PoisonError;
use std::time::Instant;

use bloom_core::EncodedKey;
use bloom_format::{DatasetGeneration, StoreBinding};
use bloom_store::{ClaimStatus, PrimaryStore};

use crate::error::RedisFilterError;
use crate::filter::RedisFilter;

use super::{CatchUp, SharedError, SharedFilteredStore, SharedOpen, Verdict, reason_code};

impl<S: PrimaryStore> SharedFilteredStore<S> {
    /// (Re)opens the Redis filter, decides whether it is trusted, and installs both at once;
    /// waits for an attach another thread is running to end first.
    pub(super) fn attach(&self) -> Result<SharedOpen, SharedError<S::Error>> {
        let _one = self
            .attaching
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        self.attach_now()
    }

    /// [`SharedFilteredStore::attach`] unless another thread is attaching (then `None`: the
    /// caller goes on with what is installed, which that attach updates).
    pub(super) fn try_attach(&self) -> Result<Option<SharedOpen>, SharedError<S::Error>> {
        let _one = match self.attaching.try_lock() {
            Ok(one) => one,
            Err(std::sync::TryLockError::Poisoned(one)) => one.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return Ok(None),
        };
        self.attach_now().map(Some)
    }

    fn attach_now(&self) -> Result<SharedOpen, SharedError<S::Error>> {
        *self
            .last_attach
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Instant::now();
        if let ClaimStatus::Lost { why } = self.claim.status() {
            let why = format!("the store is no longer the one this wrapper opened: {why}");
            self.install(None, Verdict::Bypassed("claim_lost", why.clone()));
            return Ok(SharedOpen::Bypassed(why));
        }
        let opened = match RedisFilter::open(&self.target, &self.name) {
            // A wrapper of `open_or_create` creates the filter Redis does not have.
            Err(RedisFilterError::NotFound { .. }) if self.create.is_some() => {
                self.create_missing()?;
                RedisFilter::open(&self.target, &self.name)
            }
            opened => opened,
        };
        let filter = match opened {
            Ok(filter) => filter,
            Err(e) => {
                let why = e.to_string();
                self.install(None, Verdict::Bypassed(reason_code(&e), why.clone()));
                return Ok(SharedOpen::Bypassed(why));
            }
        };
        if filter.config().encoding() != self.encoding {
            let why = format!(
                "the filter's key encoding is {}, the store's {}",
                filter.config().encoding(),
                self.encoding
            );
            self.install(Some(filter), Verdict::Bypassed("incompatible", why.clone()));
            return Ok(SharedOpen::Bypassed(why));
        }
        let (from, bound) = match self.coverage(&filter)? {
            Ok(covered) => covered,
            Err((code, why)) => {
                self.install(Some(filter), Verdict::Bypassed(code, why.clone()));
                return Ok(SharedOpen::Bypassed(why));
            }
        };
        // Every shard present, and its node one that cannot have lost a write since the
        // filter was known whole. A node that may have (a restart, a failover) is repaired
        // from the store: from the oldest point a shard's record covers (a shard put back
        // from an older copy says how far it covers), or from the start.
        let (from, restore) = match filter.check_shards() {
            Ok(()) => (from, false),
            Err(e) if e.is_unverified() => (self.repair_point(&filter)?.min(from), true),
            Err(e) => {
                let why = e.to_string();
                self.install(
                    Some(filter),
                    Verdict::Bypassed(reason_code(&e), why.clone()),
                );
                return Ok(SharedOpen::Bypassed(why));
            }
        };
        // Keys committed since that point: normally none (writers set bits first). They go
        // into this very filter, which is installed only afterwards.
        if !bound {
            // Perhaps a filter made in place of a lost one: writers that set bits in the
            // lost one commit within the grace period, and the scan below finds their keys.
            // Meanwhile this process's own inserts set their bits in the new filter (a second
            // handle, installed untrusted: lookups ask the store) instead of failing.
            if let Ok(early) = RedisFilter::open(&self.target, &self.name) {
                let why = "the filter is bound to no store yet: its writers' keys are taken in after the grace period";
                self.install(Some(early), Verdict::Bypassed("not_bound", why.to_owned()));
            }
            std::thread::sleep(self.grace);
        }
        match self.take_in_since(&filter, from, restore || !bound, restore) {
            Ok((to, caught_up)) => {
                if caught_up > 0 {
                    self.counters
                        .telemetry
                        .caught_up(from.get(), to.get(), caught_up);
                }
                let open = SharedOpen::Trusted {
                    from,
                    to,
                    caught_up,
                };
                self.install(Some(filter), Verdict::Trusted(open.to_string()));
                Ok(open)
            }
            Err(CatchUp::Store(e)) => {
                let why = format!("catching up from the store failed: {e}");
                self.install(Some(filter), Verdict::Bypassed("catch_up_failed", why));
                Err(SharedError::Store(e))
            }
            Err(CatchUp::Filter(e)) => {
                let why = e.to_string();
                self.install(
                    Some(filter),
                    Verdict::Bypassed(reason_code(&e), why.clone()),
                );
                Ok(SharedOpen::Bypassed(why))
            }
        }
    }

    /// The oldest point of this store's history that every shard's epoch record covers, or
    /// the start when a record is missing or of another history.
    pub(super) fn repair_point(
        &self,
        filter: &RedisFilter,
    ) -> Result<DatasetGeneration, SharedError<S::Error>> {
        let Ok(Some((generation, Some(binding)))) = filter.shard_coverage() else {
            return Ok(DatasetGeneration::ZERO);
        };
        let identity = self.store.identity().map_err(SharedError::Store)?;
        let digest = self
            .store
            .history_at(generation)
            .map_err(SharedError::Store)?;
        Ok(
            if binding.identity == identity && digest == Some(binding.history) {
                generation
            } else {
                DatasetGeneration::ZERO
            },
        )
    }

    /// The generation the filter covers, if it is bound to this store's history (and whether
    /// it is bound at all: a filter bound to no store covers generation 0 of any), or the
    /// reason's code and why not.
    #[allow(clippy::type_complexity)]
    pub(super) fn coverage(
        &self,
        filter: &RedisFilter,
    ) -> Result<Result<(DatasetGeneration, bool), (&'static str, String)>, SharedError<S::Error>>
    {
        let header = match filter.header() {
            Ok(header) => header,
            Err(e) => return Ok(Err((reason_code(&e), e.to_string()))),
        };
        // A filter bound to no store yet (just created) claims nothing: it covers the store
        // once every key of it is in, from the start (after the grace period: see
        // `SharedFilteredStore::open_with_grace`).
        let Some(binding) = header.store else {
            return Ok(Ok((DatasetGeneration::ZERO, false)));
        };
        let identity = self.store.identity().map_err(SharedError::Store)?;
        if binding.identity != identity {
            return Ok(Err((
                "other_store",
                "the filter was built for another store".to_owned(),
            )));
        }
        let generation = header.dataset_generation;
        let digest = self
            .store
            .history_at(generation)
            .map_err(SharedError::Store)?;
        if digest != Some(binding.history) {
            return Ok(Err((
                "history_diverged",
                format!(
                    "the store's history at generation {generation} is not the one the filter covers (restored, rolled back or diverged)"
                ),
            )));
        }
        Ok(Ok((generation, true)))
    }

    /// Sets the bits of every key committed after `from` in `filter`; records the new
    /// coverage (always with `record`, otherwise when it moved).
    ///
    /// With `restore` the keys are added without judging the shards' nodes (they may be new:
    /// this is the repair), and once every key since `from` is in, the shards' records name
    /// the nodes that took them.
    pub(super) fn take_in_since(
        &self,
        filter: &RedisFilter,
        from: DatasetGeneration,
        record: bool,
        restore: bool,
    ) -> Result<(DatasetGeneration, u64), CatchUp<S::Error>> {
        // The history point first: the keys visited reach at least it.
        let head = self.store.head().map_err(CatchUp::Store)?;
        let mut batch: Vec<Vec<u8>> = Vec::new();
        let mut failed = None;
        let mut taken = 0u64;
        let mut written = Vec::new();
        let mut flush = |batch: &mut Vec<Vec<u8>>, failed: &mut Option<RedisFilterError>| {
            if failed.is_none() && !batch.is_empty() {
                // The store's keys are encoded: with other tables, they mark the filter.
                let encoded: Vec<EncodedKey<'_>> =
                    batch.iter().map(|k| EncodedKey::from_encoded(k)).collect();
                let inserted = filter
                    .note_mixed_tables(&encoded)
                    .and_then(|()| filter.insert_keys(batch, !restore));
                match inserted {
                    Ok((_, took)) => {
                        taken += batch.len() as u64;
                        if restore {
                            written.extend(took);
                        }
                    }
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
        let identity = self.store.identity().map_err(CatchUp::Store)?;
        let binding = StoreBinding::new(identity, head.digest);
        if restore {
            filter
                .restored(Some((to, Some(binding))), &written)
                .map_err(CatchUp::Filter)?;
        }
        if record || to != from {
            filter
                .set_coverage(to, Some(binding))
                .map_err(CatchUp::Filter)?;
        }
        Ok((to, taken))
    }
}
