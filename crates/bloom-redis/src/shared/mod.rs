//! [`SharedFilteredStore`]: check-then-confirm over a primary store, with the filter held in
//! Redis and shared by every process that writes the store.

mod attach;
mod create;
mod insert;
mod metrics;
mod verdict;

pub use metrics::SharedMetrics;
use verdict::{Verdict, reason_code};

use std::sync::{Mutex, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use bloom_core::{EncodedKey, FilterConfig, Key, KeyEncoding};
use bloom_format::DatasetGeneration;
use bloom_store::{
    Bits, ClaimKind, ClaimRefused, ClaimStatus, Lookup, PrimaryStore, RebuildReport, StoreClaim,
};

use crate::connection::RedisTarget;
use crate::error::RedisFilterError;
use crate::filter::{RedisFilter, shard_geometry};

/// How often a bypassed wrapper tries to attach to the shared filter again, on queries.
const REATTACH_EVERY: Duration = Duration::from_secs(5);

/// The grace period of [`SharedFilteredStore::open`].
const DEFAULT_GRACE: Duration = Duration::from_secs(10);

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
    /// This process created the filter ([`SharedFilteredStore::open_or_create`]: Redis had
    /// none) and took in every key of the store: trusted.
    Created {
        /// The generation it covers.
        to: DatasetGeneration,
        /// Keys taken in.
        taken: u64,
    },
    /// The filter cannot be trusted (why is given): queries go to the store until it can
    /// (another process's rebuild is noticed within seconds) or
    /// [`SharedFilteredStore::rebuild`] repairs it.
    Bypassed(String),
}

/// `the shared filter is trusted ...`, or why it is bypassed.
impl std::fmt::Display for SharedOpen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Trusted {
                from,
                to,
                caught_up,
            } => write!(
                f,
                "the shared filter is trusted at generation {to} ({caught_up} keys taken in since generation {from})"
            ),
            Self::Created { to, taken } => write!(
                f,
                "the shared filter was created here and is trusted at generation {to} ({taken} keys of the store taken in)"
            ),
            Self::Bypassed(why) => write!(
                f,
                "the shared filter cannot be trusted ({why}); every lookup asks the store until it can"
            ),
        }
    }
}

/// Why an operation of a [`SharedFilteredStore`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SharedError<E: std::error::Error + 'static> {
    /// The primary store failed.
    #[error("primary store: {0}")]
    Store(E),
    /// The shared filter could not take a key's bits, so the key was not committed: other
    /// processes trust the filter, and a committed key without bits would be reported absent
    /// by them. Retry once Redis is back, or after [`SharedFilteredStore::rebuild`].
    #[error("the key was not committed: the shared filter could not take its bits: {0}")]
    Filter(RedisFilterError),
    /// The key was committed, but the shared filter it set bits in was lost before the
    /// commit landed, and setting them in the current filter failed: the key may be missing
    /// from the filter until the next rebuild or catch-up. This process stops trusting the
    /// filter; the others are covered only once the filter is rebuilt.
    #[error(
        "the key was committed, but the shared filter lost its bits and could not take them again: {0}"
    )]
    CommittedWithoutBits(RedisFilterError),
    /// A rebuild failed; nothing was deleted unless the filter was already lost.
    #[error("rebuilding the shared filter failed: {0}")]
    Rebuild(RedisFilterError),
    /// There is no shared filter this process can use: it is missing in Redis, Redis could
    /// not be reached when this process last looked, or the filter does not cover this store
    /// (`why` says which). With `committed` false the key was not committed; with `committed`
    /// true it was, and its bits could not be set again after the filter it set them in was
    /// lost (other processes may answer it absent until the filter is rebuilt).
    #[error("{}", no_filter_message(why, *committed))]
    NoFilter {
        /// Why there is no usable filter.
        why: String,
        /// Whether the key was committed all the same.
        committed: bool,
    },
    /// Another wrapper holds the store in a way a shared filter cannot share it: a
    /// `FilteredStore` (bloom-store), which answers "absent" from a filter of its own and
    /// would not see this wrapper's keys. Close it first.
    #[error(
        "a FilteredStore (bloom-store) has this store open, in this process or another: its own filter would answer \"absent\" for this wrapper's keys; close it before sharing the store"
    )]
    InUse,
    /// This wrapper's claim on the store is lost for good: the store was replaced under it
    /// (another database or file under its name, another identity, a history that went back
    /// or another way). The shared filter is never trusted by this wrapper again: open it
    /// again.
    #[error("the store is no longer the one this wrapper opened ({why}); open the wrapper again")]
    ClaimLost {
        /// What happened, as the store reported it.
        why: String,
    },
    /// The shared filter could not be created
    /// ([`SharedFilteredStore::open_or_create`]): a configuration Redis filters cannot use,
    /// a filter of that name made with another configuration, or Redis refusing the creation
    /// (its memory, a missing module).
    #[error("creating the shared filter failed: {0}")]
    Create(RedisFilterError),
    /// A key could not be encoded.
    #[error(transparent)]
    Key(#[from] bloom_core::KeyError),
    /// The name cannot name a shared filter ([`RedisFilterError::InvalidName`]): refused
    /// before anything is opened, or written to an event or a metric.
    #[error(transparent)]
    Name(RedisFilterError),
    /// The store's keys are in another encoding than the wrapper's (at `open`) or the
    /// configuration's (at `rebuild`): they could not be compared.
    #[error(
        "the store's keys are in the {store} key encoding, but {filter} was asked for; use {store}, or start a new store"
    )]
    EncodingMismatch {
        /// The store's.
        store: String,
        /// The one asked for.
        filter: String,
    },
}

impl<E: std::error::Error + 'static> SharedError<E> {
    /// Whether the key (or batch) was committed to the store all the same: the insert failed
    /// after its commit, while making sure the shared filter has its bits
    /// ([`SharedError::CommittedWithoutBits`], [`SharedError::NoFilter`] with `committed`).
    /// Inserting it again is safe either way, and answers whether it is new.
    #[must_use]
    pub fn is_committed(&self) -> bool {
        matches!(
            self,
            Self::CommittedWithoutBits(_)
                | Self::NoFilter {
                    committed: true,
                    ..
                }
        )
    }
}

/// The message of [`SharedError::NoFilter`].
fn no_filter_message(why: &str, committed: bool) -> String {
    if committed {
        format!(
            "the key was committed, but no usable shared filter could take its bits again ({why}): other processes may answer it absent until the filter is rebuilt (SharedFilteredStore::rebuild)"
        )
    } else {
        format!(
            "the key was not committed: there is no usable shared filter ({why}); retry once Redis answers, and if the filter is missing there, create it (SharedFilteredStore::open_or_create or rebuild with a sharded configuration, or bloom redis create)"
        )
    }
}

/// Why no filter can take a batch's bits.
enum Unset {
    /// None is installed: why.
    NoFilter(String),
    /// The installed one failed.
    Filter(RedisFilterError),
}

/// The filter this process uses, and whether it answers from it: changed together.
struct Attached {
    filter: Option<RedisFilter>,
    /// What this process saw of the write counts of the filter it used last, kept while no
    /// filter is installed (Redis unreachable for a while): the handle opened next on the
    /// same filter still knows the counts seen before, so a state put back meanwhile is
    /// seen.
    seen: Option<std::sync::Arc<crate::filter::Seen>>,
    /// Why there is no filter (the last attach's reason), while there is none.
    unusable: String,
    trusted: bool,
    /// Bumped at every change, so that a verdict about one filter is never applied to the
    /// next.
    epoch: u64,
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
/// - After the commit, the insert checks that the shard it wrote still holds its bits (one
///   more round trip). If the filter was lost or recreated in between, the bits are set
///   again in the current filter; if that fails, the insert reports
///   [`SharedError::CommittedWithoutBits`].
/// - Queries answer "absent" only from a filter that is trusted and replied; a Redis error,
///   a lost shard or an untrusted filter turn the query into a store lookup.
/// - A filter is trusted when its metadata binds it to this store's identity and its history
///   digest at the generation it records; it then takes in the keys committed since (written
///   behind the wrapper's back, or during a lost-state window). Coverage records are written
///   only while the metadata is still the filter's (checked by Redis in the same step).
/// - [`SharedFilteredStore::rebuild`] repairs a filter that is lost or untrusted: it adds
///   every key of the store to the existing shards when they are intact (never clearing bits
///   other processes rely on), or recreates them when Redis lost them. A recreated filter
///   waits a grace period before it scans the store, so that inserts in flight at the loss
///   have committed. The remaining window: a writer that stalls longer than the grace
///   between setting bits and committing; its post-commit check then sets the bits again,
///   and until it does, a process trusting the rebuilt filter can report that one key absent.
pub struct SharedFilteredStore<S> {
    store: S,
    target: RedisTarget,
    name: String,
    encoding: KeyEncoding,
    state: RwLock<Attached>,
    /// Held while an attach runs: one at a time per wrapper, and callers that find one
    /// running (an insert, a lookup due to look again) go on with what is installed instead
    /// of waiting out its grace period.
    attaching: Mutex<()>,
    last_attach: Mutex<Instant>,
    /// How often a bypassed wrapper's queries look for a repaired filter.
    reattach_every: Duration,
    grace: Duration,
    /// What [`SharedFilteredStore::open_or_create`] creates the filter with, whenever an
    /// attach finds none (Redis was down at the first start, or restarted empty).
    create: Option<FilterConfig>,
    counters: metrics::Counters,
    /// This wrapper's shared claim on the store ([`ClaimKind::Shared`]): no `FilteredStore`
    /// opens beside it, and it says when the store was replaced under it. The last field.
    claim: StoreClaim,
}

impl<S> std::fmt::Debug for SharedFilteredStore<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let trusted = self
            .state
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .trusted;
        f.debug_struct("SharedFilteredStore")
            .field("name", &self.name)
            .field("target", &self.target)
            .field("trusted", &trusted)
            .finish_non_exhaustive()
    }
}

impl<S: PrimaryStore> SharedFilteredStore<S> {
    /// Opens the shared filter `name` over `store`, with the key encoding `encoding` (the
    /// store's keys and the filter's must agree), and the default grace period of
    /// [`SharedFilteredStore::open_with_grace`] (10 s).
    ///
    /// Its events go to the `tracing` subscriber current where each call runs, and its
    /// metrics to the `metrics` recorder installed when it opens, labelled with `name`:
    /// install the recorder first (see `bloom_store::telemetry`).
    ///
    /// The store is claimed first, shared ([`PrimaryStore::claim_wrapper`] with
    /// [`ClaimKind::Shared`]): any number of shared wrappers open together, and none beside a
    /// `FilteredStore`, whose own filter would answer "absent" for their keys.
    ///
    /// # Errors
    /// [`SharedError::Name`] for a name Redis filters cannot have (before anything else),
    /// [`SharedError::Store`], [`SharedError::InUse`] or [`SharedError::EncodingMismatch`].
    /// Redis being unreachable or the filter being lost is not an error: the wrapper opens
    /// bypassed.
    pub fn open(
        store: S,
        target: RedisTarget,
        name: &str,
        encoding: KeyEncoding,
    ) -> Result<(Self, SharedOpen), SharedError<S::Error>> {
        Self::open_with_grace(store, target, name, encoding, DEFAULT_GRACE)
    }

    /// [`SharedFilteredStore::open`] with the grace period `grace`: how long the wrapper waits
    /// before it scans the store into a filter that may replace one whose writers are still
    /// in flight (a writer sets a key's bits, then commits it): a filter bound to no store yet
    /// (just created, perhaps in place of a lost one), at its first open, and the shards a
    /// rebuild recreates. Longer than any insert takes from setting bits to committing.
    ///
    /// # Errors
    /// As [`SharedFilteredStore::open`].
    pub fn open_with_grace(
        store: S,
        target: RedisTarget,
        name: &str,
        encoding: KeyEncoding,
        grace: Duration,
    ) -> Result<(Self, SharedOpen), SharedError<S::Error>> {
        let wrapper = Self::claimed(store, target, name, encoding, grace)?;
        let outcome = wrapper.attach()?;
        Ok((wrapper, outcome))
    }

    /// The wrapper over `store`, claimed (shared) and with the store's key encoding checked;
    /// attached to no filter yet.
    fn claimed(
        store: S,
        target: RedisTarget,
        name: &str,
        encoding: KeyEncoding,
        grace: Duration,
    ) -> Result<Self, SharedError<S::Error>> {
        crate::filter::check_name(name).map_err(SharedError::Name)?;
        let claim = match StoreClaim::for_wrapper(&store, ClaimKind::Shared, encoding)
            .map_err(SharedError::Store)?
        {
            Ok(claim) => claim,
            Err(ClaimRefused::EncodingMismatch { store, wrapper }) => {
                return Err(SharedError::EncodingMismatch {
                    store,
                    filter: wrapper,
                });
            }
            Err(ClaimRefused::InUse) => return Err(SharedError::InUse),
        };
        Ok(Self {
            store,
            target,
            name: name.to_owned(),
            encoding,
            state: RwLock::new(Attached {
                filter: None,
                seen: None,
                unusable: "not attached yet".into(),
                trusted: false,
                epoch: 0,
            }),
            attaching: Mutex::new(()),
            last_attach: Mutex::new(Instant::now()),
            reattach_every: REATTACH_EVERY,
            create: None,
            grace,
            counters: metrics::Counters::new(name),
            claim,
        })
    }

    /// How often, at most, a bypassed wrapper's queries open the filter again to see whether
    /// it was repaired (default 5 s; inserts and rebuilds attach whenever they need to).
    #[must_use]
    pub fn with_reattach_every(mut self, every: Duration) -> Self {
        self.reattach_every = every;
        self
    }

    /// The primary store.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// Whether queries are answered from the filter: it is trusted, and the store's claim
    /// holds (the store is the one opened, and can be checked).
    #[must_use]
    pub fn is_trusted(&self) -> bool {
        self.claim_holds() && self.read().trusted
    }

    /// The store's claim, as the store reports it: a wrapper whose claim does not hold asks
    /// the store for every lookup; one whose claim is lost never trusts the filter again.
    #[must_use]
    pub fn claim_status(&self) -> ClaimStatus {
        self.claim.status()
    }

    /// [`SharedError::ClaimLost`] once the claim is lost for good.
    fn check_claim(&self) -> Result<(), SharedError<S::Error>> {
        match self.claim.status() {
            ClaimStatus::Lost { why } => Err(SharedError::ClaimLost { why }),
            _ => Ok(()),
        }
    }

    /// Queries answered "absent" without asking the store.
    #[must_use]
    pub fn lookups_avoided(&self) -> u64 {
        self.counters.lookups.tally().lookups_avoided
    }

    fn read(&self) -> RwLockReadGuard<'_, Attached> {
        self.state.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, Attached> {
        self.state.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether a key (text, bytes or already encoded: see [`Key`]) is in the store.
    ///
    /// # Errors
    /// [`SharedError::Key`] for a byte key a text encoding refuses; [`SharedError::Store`]
    /// when the store is asked and fails.
    pub fn contains<K: Key + ?Sized>(&self, key: &K) -> Result<Lookup, SharedError<S::Error>> {
        Ok(self
            .contains_each([key])?
            .pop()
            .unwrap_or(Lookup::AbsentBypassed))
    }

    /// Looks up many keys: one pass over the shared filter (a pipeline per batch), then one
    /// [`PrimaryStore::contains_each`] for the keys it could not rule out. The answers, in key
    /// order, are those of [`SharedFilteredStore::contains`].
    ///
    /// # Errors
    /// As [`SharedFilteredStore::contains`], before any key is looked up for a refused one.
    pub fn contains_each<I>(&self, keys: I) -> Result<Vec<Lookup>, SharedError<S::Error>>
    where
        I: IntoIterator,
        I::Item: Key,
    {
        let keys: Vec<I::Item> = keys.into_iter().collect();
        let encoded = encode_all(&keys, |k| k.encode(self.encoding).map_err(Into::into))?;
        // A bypassed wrapper looks for a repaired filter first, every few seconds; one whose
        // filter fails during this call is distrusted, and looks at its next call.
        self.maybe_reattach()?;
        self.counters
            .lookups
            .lookup_each(&Answering(self), &self.store, &encoded)
            .map_err(SharedError::Store)
    }

    /// A bypassed wrapper looks for a repaired filter every few seconds.
    fn maybe_reattach(&self) -> Result<(), SharedError<S::Error>> {
        let due = self
            .last_attach
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .elapsed()
            >= self.reattach_every;
        if due && !self.is_trusted() {
            self.try_attach()?;
        }
        Ok(())
    }

    /// Makes the shared filter cover the store again, then trusts it: the store's keys are
    /// added to the existing shards when they are intact, or the filter is recreated with
    /// `config` (sharded layout, the wrapper's encoding) when Redis lost it. Returns what it
    /// did, as `FilteredStore::rebuild` does: the keys taken in, the generation covered,
    /// and the capacity of the filter (the existing one's, or `config`'s plan). A healthy filter is never deleted: a Redis that cannot be
    /// reached fails the rebuild instead.
    ///
    /// # Errors
    /// [`SharedError::Rebuild`] (an unusable `config` is refused before anything is
    /// touched), or a store error; the wrapper then stays bypassed.
    pub fn rebuild(&self, config: FilterConfig) -> Result<RebuildReport, SharedError<S::Error>> {
        let telemetry = &self.counters.telemetry;
        let _span =
            tracing::info_span!(target: "bloom", "bloom.rebuild", filter = telemetry.filter())
                .entered();
        let report = self.rebuild_filter(config);
        if let Err(e) = &report {
            telemetry.rebuild_failed(e);
        }
        report
    }

    /// [`SharedFilteredStore::rebuild`]'s work.
    fn rebuild_filter(&self, config: FilterConfig) -> Result<RebuildReport, SharedError<S::Error>> {
        self.check_claim()?;
        shard_geometry(&config).map_err(SharedError::Rebuild)?;
        if config.encoding() != self.encoding {
            let label = |e: KeyEncoding| format!("{} v{}", e.name(), e.version());
            return Err(SharedError::EncodingMismatch {
                store: label(self.encoding),
                filter: label(config.encoding()),
            });
        }
        let opened = RedisFilter::open(&self.target, &self.name).and_then(|filter| {
            match filter.check_shards() {
                // Its nodes may have lost writes: every key is added again below, and the
                // nodes recorded.
                Err(e) if e.is_unverified() => Ok((filter, true)),
                checked => checked.map(|()| (filter, false)),
            }
        });
        let (filter, restore) = match opened {
            Ok(opened) => opened,
            Err(e) if e.is_lost_state() => {
                // Lost or missing: recreate. Writers fail against the lost shards until they
                // attach to the new ones, so none commits a key whose bits went nowhere.
                RedisFilter::delete(&self.target, &self.name).map_err(SharedError::Rebuild)?;
                let created = RedisFilter::create(&self.target, &self.name, config)
                    .map_err(SharedError::Rebuild)?;
                std::thread::sleep(self.grace);
                (created, false)
            }
            Err(e) => return Err(SharedError::Rebuild(e)),
        };
        let capacity = filter.config().plan().map_or(0, |plan| plan.capacity);
        match self.take_in_since(&filter, DatasetGeneration::ZERO, true, restore) {
            Ok((generation, taken)) => {
                let report = RebuildReport::new(taken, generation, capacity, false);
                self.counters.telemetry.rebuilt(&report);
                let how = format!(
                    "the shared filter was rebuilt from the store and is trusted at generation {generation}"
                );
                self.install(Some(filter), Verdict::Rebuilt(how));
                Ok(report)
            }
            Err(CatchUp::Store(e)) => Err(SharedError::Store(e)),
            Err(CatchUp::Filter(e)) => Err(SharedError::Rebuild(e)),
        }
    }
}

/// What the shared filter answers: nothing unless it is trusted, the store's claim holds,
/// and Redis replied (a filter that failed is never asked again before a new verdict: a lost
/// or unverified one is distrusted).
struct Answering<'w, S>(&'w SharedFilteredStore<S>);

impl<S: PrimaryStore> Bits for Answering<'_, S> {
    fn maybe_each(&self, keys: &[EncodedKey<'_>]) -> Option<Vec<bool>> {
        let wrapper = self.0;
        // A claim that does not hold (the store replaced, or unreachable to check): the store
        // answers every key.
        let claimed = wrapper.claim_holds();
        let (maybe, lost_epoch) = {
            let state = wrapper.read();
            match (&state.filter, state.trusted && claimed) {
                (Some(filter), true) => match filter.contains_each(keys) {
                    Ok(maybe) => {
                        wrapper
                            .counters
                            .telemetry
                            .answered(true, || ("", String::new()));
                        (Some(maybe), None)
                    }
                    Err(e) => {
                        let lost = e.is_lost_state() || e.is_unverified();
                        if !lost {
                            // Not distrusted: this query goes to the store, and so does every
                            // one until Redis answers again.
                            wrapper
                                .counters
                                .telemetry
                                .answered(false, || (reason_code(&e), e.to_string()));
                        }
                        (None, lost.then_some((state.epoch, e)))
                    }
                },
                _ => (None, None),
            }
        };
        if let Some((epoch, e)) = lost_epoch {
            wrapper.distrust(epoch, &e, reason_code(&e));
        }
        maybe
    }
}

/// Every key encoded by `encode`, or the first refusal.
fn encode_all<'k, K: Key>(
    keys: &'k [K],
    encode: impl Fn(&'k K) -> Result<EncodedKey<'k>, bloom_core::KeyError>,
) -> Result<Vec<EncodedKey<'k>>, bloom_core::KeyError> {
    keys.iter().map(encode).collect()
}

enum CatchUp<E> {
    Store(E),
    Filter(RedisFilterError),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_outcomes_read_as_sentences() {
        let trusted = SharedOpen::Trusted {
            from: DatasetGeneration::new(5),
            to: DatasetGeneration::new(9),
            caught_up: 4,
        };
        assert_eq!(
            trusted.to_string(),
            "the shared filter is trusted at generation 9 (4 keys taken in since generation 5)"
        );
        let bypassed = SharedOpen::Bypassed("the filter was lost".into());
        assert!(bypassed.to_string().contains("(the filter was lost)"));
    }
}
