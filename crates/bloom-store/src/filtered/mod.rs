//! [`FilteredStore`]: the check-then-confirm protocol over a primary store.

mod applied;
mod batch;
mod changes;
mod operations;
mod rebuild;
mod save;

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use bloom_core::{AllocError, BloomFilter, EncodedKey};
use bloom_format::DatasetGeneration;

use crate::claim::{ClaimKind, ClaimRefused, ClaimStatus, StoreClaim};
use crate::confirm::{Bits, LookupCounts, LookupTally};
use crate::error::StoreError;
use crate::history::HistoryPoint;
use crate::kind::StoreFilter;
use crate::load;
use crate::options::{FilterOptions, OptionsError};
use crate::outcome::{BypassReason, KeptError, Metrics, Mode, OpenOutcome, SnapshotRefresh};
use crate::primary::PrimaryStore;
use crate::telemetry::{Standing, Telemetry};

use applied::{Applied, Flights};
use changes::catch_up;

struct Counters {
    /// The events and metrics of this wrapper's filter; it counts inserts and removals.
    telemetry: Telemetry,
    lookups: LookupCounts,
    /// Removals whose bits a plain filter still holds (since it was built).
    stale_removals: AtomicU64,
    failed_automatic_rebuilds: AtomicU64,
}

impl Counters {
    fn new(filter: &str) -> Self {
        let telemetry = Telemetry::new(filter);
        Self {
            lookups: LookupCounts::exported(&telemetry),
            telemetry,
            stale_removals: AtomicU64::new(0),
            failed_automatic_rebuilds: AtomicU64::new(0),
        }
    }
}

struct State {
    active: Arc<StoreFilter>,
    /// The generation up to which `active` is known to hold every key of the store (from
    /// the snapshot, a catch-up, a rebuild or a save); inserts through the wrapper go beyond
    /// it, and a save catches up from it, so that keys written behind the wrapper's back
    /// never make a snapshot claim more than its bits hold.
    synced: DatasetGeneration,
    /// A point of the store's history the filter is known to follow (read at open, at the
    /// rebuild's start, at the last save). A save first checks that the store still has it:
    /// a store that lost acknowledged commits while the wrapper was open (a failover to a
    /// lagging replica, say) is caught there, and the filter bypassed.
    verified: HistoryPoint,
    capacity: u64,
    capacity_limited: bool,
    mode: Mode,
    /// The filter a rebuild is filling; inserts set its bits too.
    building: Option<Arc<StoreFilter>>,
    /// The generation up to which the rebuild replays the store's history into `building`.
    building_start: Option<DatasetGeneration>,
    /// The lookups counted before `active` was built or loaded: its measured false
    /// positives are those counted since.
    measured_since: LookupTally,
}

impl State {
    /// Changes the mode, and tells `telemetry` when trust is gained or lost (or a bypass's
    /// reason changes).
    fn set_mode(&mut self, mode: Mode, telemetry: &Telemetry) {
        match (&self.mode, &mode) {
            (Mode::Trusted, Mode::Trusted) => {}
            (Mode::Bypassed(_), Mode::Trusted) => {
                telemetry
                    .trusted(&"the filter covers the store again and answers \"absent\" alone");
            }
            (Mode::Bypassed(was), Mode::Bypassed(reason)) if was.code() == reason.code() => {}
            (was, Mode::Bypassed(reason)) => {
                telemetry.bypassed(reason.code(), reason, was.is_trusted());
            }
        }
        self.mode = mode;
    }
}

/// A membership set over a primary store, accelerated by a Bloom filter that is used only
/// while it can be trusted.
///
/// **Invariant:** a key committed to the primary store is never reported absent.
///
/// - Inserts set the filter's bits *before* the store commit, so every committed key's bits
///   are set; a crash in between leaves only a false positive.
/// - A snapshot records the store's identity and the point of its history (generation and
///   history digest) read *before* the bits are copied, so it never claims to cover a key
///   whose bits it lacks.
/// - A snapshot is trusted, or caught up from, only if the store has the same identity and
///   the same history digest at the snapshot's generation. A snapshot that is missing,
///   corrupt, incompatible, of another store, newer than the store, or of a history the
///   store no longer has (lost commits, a restored backup, a diverged copy) is never
///   trusted: queries go to the store until [`FilteredStore::rebuild`] has built a filter
///   that covers it. A snapshot refused because of the store's history (another store,
///   newer than the store, another history) stays untrusted forever, since the store's
///   history can only move away from it.
///
/// One wrapper per store ([`FilteredStore::open`] refuses a second with
/// [`StoreError::InUse`]). All writes to the primary store must go through it: a key written
/// behind its back (by another program, or [`FilteredStore::store`]'s
/// `insert`) is not in the filter, and may be reported absent until the next
/// [`FilteredStore::save_snapshot`] or [`FilteredStore::rebuild`] takes it in. A snapshot
/// never claims such a key without its bits: saving catches up with the store first.
pub struct FilteredStore<S> {
    store: S,
    options: FilterOptions,
    state: RwLock<State>,
    /// Serializes rebuilds: two at once would each install a `building` filter, and the one
    /// replaced first would miss the inserts made after the replacement.
    rebuilding: Mutex<()>,
    /// Held shared by each removal (store, then filter) and exclusively by rebuilds and by
    /// saves of a counting filter, so that neither sees a removal half done.
    removal_gate: RwLock<()>,
    /// Held shared by each insert into a counting filter (from its count to the record of
    /// its generation) and exclusively by a counting save while it reads the head and copies
    /// the counters.
    insert_gate: RwLock<()>,
    /// The counting inserts between the start of their commit and the record of its
    /// generation, so that an insert that finds its key already there can wait for the one
    /// that put it there, if it is one of this wrapper's.
    flights: Flights,
    applied: Mutex<Applied>,
    counters: Counters,
    /// This wrapper's claim on the store ([`PrimaryStore::claim_wrapper`]). The last field,
    /// so the last dropped: the store's connections are closed (and, for SQLite, the log
    /// checkpointed) before another wrapper can claim it.
    claim: StoreClaim,
}

/// Shows the options (the salt redacted), the mode and the filter's size; never the bits.
impl<S: fmt::Debug> fmt::Debug for FilteredStore<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.state.read().unwrap_or_else(PoisonError::into_inner);
        f.debug_struct("FilteredStore")
            .field("store", &self.store)
            .field("options", &self.options)
            .field("mode", &state.mode)
            .field("counting", &state.active.is_counting())
            .field("bits", &state.active.config().bits())
            .field("hashes", &state.active.config().hashes())
            .field("capacity", &state.capacity)
            .finish_non_exhaustive()
    }
}

/// What a [`FilteredStore`]'s filter answers: nothing unless it is trusted and the store's
/// claim holds.
struct Answering<'w, S>(&'w FilteredStore<S>);

impl<S: PrimaryStore> Bits for Answering<'_, S> {
    fn maybe_each(&self, keys: &[EncodedKey<'_>]) -> Option<Vec<bool>> {
        self.0.with_trusted(|filter| filter.contains_each(keys))
    }

    fn maybe(&self, key: &EncodedKey<'_>) -> Option<bool> {
        self.0.with_trusted(|filter| filter.contains(key))
    }
}

impl<S: PrimaryStore> FilteredStore<S> {
    /// Opens the wrapper, loading the snapshot file of the options
    /// ([`FilterOptions::with_snapshot`]) if they name one and comparing it with the store:
    ///
    /// - same identity, same history digest at the snapshot's generation, which is the
    ///   store's: trusted;
    /// - the same, with the store further along: the keys committed since are added from
    ///   `keys_since`, then trusted;
    /// - anything else (see [`BypassReason`]): bypassed until [`FilteredStore::rebuild`]
    ///   (which [`FilteredStore::open_and_recover`] calls).
    ///
    /// The snapshot path may be a symbolic link; anything that is not a regular file (a
    /// named pipe, a directory, a device) is refused without being read.
    ///
    /// Its events go to the `tracing` subscriber current where each call runs, and its
    /// metrics to the `metrics` recorder installed when it opens, labelled with
    /// [`FilterOptions::name`]: install the recorder first (see [`crate::telemetry`]).
    ///
    /// One wrapper per store: the store is claimed first ([`PrimaryStore::claim_wrapper`];
    /// for [`SqliteStore`](crate::SqliteStore) a lock beside the database file), and a
    /// second wrapper over it, in this process or another, is refused with
    /// [`StoreError::InUse`] until the first is dropped (or its process ends).
    ///
    /// # Errors
    /// Invalid options, [`StoreError::InUse`], or the store failing to report its identity
    /// or history.
    pub fn open(
        store: S,
        options: FilterOptions,
    ) -> Result<(Self, OpenOutcome), StoreError<S::Error>> {
        options.validate()?;
        let snapshot = options.snapshot.clone();
        let claim = match StoreClaim::for_wrapper(&store, ClaimKind::Exclusive, options.encoding)
            .map_err(StoreError::Store)?
        {
            Ok(claim) => claim,
            Err(ClaimRefused::InUse) => return Err(StoreError::InUse),
            Err(ClaimRefused::EncodingMismatch { store, wrapper }) => {
                return Err(OptionsError::EncodingMismatch {
                    store,
                    configured: wrapper,
                }
                .into());
            }
        };
        let head = store.head().map_err(StoreError::Store)?;
        let matched = match &snapshot {
            None => Err(BypassReason::NoSnapshot),
            Some(path) => {
                load::open_snapshot(path, &options, &store, head).map_err(StoreError::Store)?
            }
        };
        let mut stale = 0;
        let (filter, outcome) = match matched {
            Ok(matched) => catch_up(&store, matched, head, &mut stale),
            Err(reason) => {
                let plan = options.plan(options.capacity)?;
                (
                    StoreFilter::new(plan.config, options.counting)?,
                    OpenOutcome::Bypassed(reason),
                )
            }
        };
        let (mode, synced) = match &outcome {
            OpenOutcome::Bypassed(reason) => {
                (Mode::Bypassed(reason.clone()), DatasetGeneration::ZERO)
            }
            OpenOutcome::Trusted { generation } => (Mode::Trusted, *generation),
            OpenOutcome::CaughtUp { to, .. } => (Mode::Trusted, *to),
            _ => (Mode::Trusted, DatasetGeneration::ZERO),
        };
        // The head read before the catch-up: the filter holds every change up to it.
        let verified = head;
        // A snapshot of a grown filter holds more than the configured capacity; one that grew
        // to the snapshot limit cannot grow further.
        let capacity = options
            .capacity
            .max(options.capacity_of(filter.config().bits()));
        // At the limit when not even one more block would fit.
        let config = filter.config();
        let capacity_limited = options.payload_bytes(config.bits() + config.layout().granule())
            > options.max_snapshot_bytes;
        let counters = Counters::new(&options.name);
        counters.stale_removals.store(stale, Ordering::Relaxed);
        announce(&counters.telemetry, &outcome);
        let wrapper = Self {
            store,
            options,
            state: RwLock::new(State {
                active: Arc::new(filter),
                synced,
                verified,
                capacity,
                capacity_limited,
                mode,
                building: None,
                building_start: None,
                measured_since: LookupTally::default(),
            }),
            rebuilding: Mutex::new(()),
            removal_gate: RwLock::new(()),
            insert_gate: RwLock::new(()),
            flights: Flights::default(),
            applied: Mutex::new(Applied {
                through: synced,
                ..Applied::default()
            }),
            counters,
            claim,
        };
        // The gauges of the filter's standing, from the start.
        wrapper.metrics();
        Ok((wrapper, outcome))
    }

    /// [`FilteredStore::open`], then, if the filter is bypassed, [`FilteredStore::rebuild`]
    /// and a fresh snapshot at the options' snapshot path, so that the next start finds a snapshot it can
    /// trust. The outcome says what really happened ([`OpenOutcome::Rebuilt`] with the
    /// reason, the rebuild and the fate of the snapshot file).
    ///
    /// # Errors
    /// As `open` and `rebuild`. Failing to write the fresh snapshot is not an error: the
    /// rebuilt filter is trusted, and the outcome reports [`SnapshotRefresh::Failed`].
    pub fn open_and_recover(
        store: S,
        options: FilterOptions,
    ) -> Result<(Self, OpenOutcome), StoreError<S::Error>> {
        let snapshot = options.snapshot.clone();
        let (wrapper, outcome) = Self::open(store, options)?;
        let OpenOutcome::Bypassed(reason) = outcome else {
            return Ok((wrapper, outcome));
        };
        let report = wrapper.rebuild()?;
        let refresh = match &snapshot {
            None => SnapshotRefresh::NoPath,
            Some(path) => match wrapper.save_snapshot(path) {
                Ok(generation) => SnapshotRefresh::Saved(generation),
                Err(e) => SnapshotRefresh::Failed(shared(e)),
            },
        };
        Ok((
            wrapper,
            OpenOutcome::Rebuilt {
                reason,
                report,
                snapshot: refresh,
            },
        ))
    }

    /// The primary store.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// The filter options.
    pub fn options(&self) -> &FilterOptions {
        &self.options
    }

    /// The current mode.
    pub fn mode(&self) -> Mode {
        self.claim_answers();
        self.read().mode.clone()
    }

    /// The store's claim, as the store reports it ([`ClaimStatus`]): while it is not held
    /// the wrapper asks the store for every lookup; once it is lost (the store replaced under
    /// the wrapper, or taken by another wrapper) the filter is bypassed for good.
    pub fn claim_status(&self) -> ClaimStatus {
        self.claim_answers();
        self.claim.status()
    }

    /// Whether the filter may answer "absent" alone as far as the store's claim goes: only
    /// while it holds. A claim lost for good (the store replaced under the wrapper, or taken
    /// by another wrapper) bypasses the filter for good, with the store's reason.
    /// `answer` of the active filter, while it answers: trusted, and the store's claim holds.
    fn with_trusted<R>(&self, answer: impl FnOnce(&StoreFilter) -> R) -> Option<R> {
        let answers = self.claim_answers();
        let state = self.read();
        match state.mode {
            Mode::Trusted if answers => Some(answer(&state.active)),
            Mode::Trusted | Mode::Bypassed(_) => None,
        }
    }

    pub(super) fn claim_answers(&self) -> bool {
        let valid = self.claim.is_valid();
        self.counters
            .telemetry
            .claim_checked(valid, || self.claim.behind());
        if valid {
            return true;
        }
        if let ClaimStatus::Lost { why } = self.claim.status() {
            let mut state = self.write();
            if !matches!(state.mode, Mode::Bypassed(BypassReason::ClaimLost { .. })) {
                state.set_mode(
                    Mode::Bypassed(BypassReason::ClaimLost { why }),
                    &self.counters.telemetry,
                );
            }
        }
        false
    }

    /// [`StoreError::ClaimLost`] once the claim is lost for good: nothing may make the filter
    /// trusted again (a rebuild, a snapshot bound to a store that is no longer there).
    pub(super) fn check_claim(&self) -> Result<(), StoreError<S::Error>> {
        match self.claim.status() {
            ClaimStatus::Lost { why } => {
                self.claim_answers();
                Err(StoreError::ClaimLost { why })
            }
            _ => Ok(()),
        }
    }

    fn read(&self) -> RwLockReadGuard<'_, State> {
        // State is replaced only as a whole under the write lock, so a panic elsewhere cannot
        // leave it half-updated.
        self.state.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(PoisonError::into_inner)
    }

    fn applied(&self) -> MutexGuard<'_, Applied> {
        // Every update leaves the set consistent before it can panic.
        self.applied.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A copy of the counters and the filter state. It also sets the gauges of the
    /// filter's standing in the `metrics` recorder ([`crate::telemetry`]): call it when
    /// your metrics are scraped, or on a timer. It counts the filter's bits (a pass over
    /// them): not on every query.
    pub fn metrics(&self) -> Metrics {
        self.claim_answers();
        let state = self.read();
        let filter = &state.active;
        let c = &self.counters;
        let lookups = c.lookups.tally();
        let observed = lookups.since(&state.measured_since).observed();
        let estimated_items = filter.estimated_items();
        let predicted = filter.estimated_false_positive_rate();
        let config = filter.config();
        let target = self.options.false_positive_rate;
        // Judged as the filters judge themselves (and `bloom inspect` their snapshots).
        let standing = bloom_core::Plan::new(state.capacity.max(1), target).map(|plan| {
            bloom_core::Capacity::from_estimate(
                plan,
                estimated_items.round() as u64,
                predicted,
                config.layout(),
                config.bits(),
                config.hashes(),
            )
        });
        let rate_limit = standing.map_or(target, |s| s.rate_limit);
        let over_target_rate = standing.is_some_and(|s| s.is_over_rate());
        let metrics = Metrics {
            queries: lookups.queries,
            store_lookups: lookups.store_lookups,
            lookups_avoided: lookups.lookups_avoided,
            false_positives: lookups.false_positives,
            inserts: c.telemetry.inserts.get(),
            removals: c.telemetry.removals.get(),
            stale_removals: c.stale_removals.load(Ordering::Relaxed),
            failed_automatic_rebuilds: c.failed_automatic_rebuilds.load(Ordering::Relaxed),
            counting: filter.is_counting(),
            saturated_counters: filter.saturated_counters().unwrap_or(0),
            observed_false_positive_rate: observed.rate(),
            predicted_false_positive_rate: predicted,
            fill_ratio: filter.fill_ratio(),
            estimated_items,
            capacity: state.capacity,
            target_false_positive_rate: target,
            false_positive_rate_limit: rate_limit,
            remaining_capacity: standing.map_or(0, |s| s.remaining()),
            over_target_rate,
            observed_over_target: observed.passes(target),
            over_capacity: estimated_items > state.capacity as f64 || over_target_rate,
            capacity_limited: state.capacity_limited,
            mode: state.mode.clone(),
            bits: config.bits(),
            hashes: config.hashes(),
        };
        c.telemetry.standing(&Standing::from(&metrics));
        metrics
    }

    /// A copy of the active filter, for inspection.
    ///
    /// # Errors
    /// [`AllocError`] when the copy cannot be allocated.
    pub fn filter_copy(&self) -> Result<BloomFilter, AllocError> {
        self.read().active.to_filter()
    }
}

/// Tells `telemetry` what the open found.
fn announce(telemetry: &Telemetry, outcome: &OpenOutcome) {
    match outcome {
        OpenOutcome::Trusted { generation } => telemetry.trusted(&format_args!(
            "the snapshot covers the store at generation {generation}: trusted"
        )),
        OpenOutcome::CaughtUp { from, to, keys, .. } => {
            telemetry.caught_up(from.get(), to.get(), *keys);
            telemetry.trusted(&format_args!(
                "the snapshot covered the store up to generation {from}, and took in the keys committed up to {to}: trusted"
            ));
        }
        OpenOutcome::Bypassed(reason) => telemetry.bypassed(reason.code(), reason, true),
        OpenOutcome::Rebuilt { .. } => {}
    }
}

fn shared<E: std::error::Error + Send + Sync + 'static>(e: E) -> KeptError {
    Arc::new(e)
}
