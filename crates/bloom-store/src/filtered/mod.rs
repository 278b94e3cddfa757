//! [`FilteredStore`]: the check-then-confirm protocol over a primary store.

mod batch;

use std::collections::BTreeSet;
use std::fmt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{
    Arc, Condvar, Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard,
};

use bloom_core::{AllocError, BloomFilter, EncodedKey, Key};
use bloom_format::DatasetGeneration;

use crate::error::StoreError;
use crate::history::{Change, ChangeKind, HistoryPoint, KeyGeneration};
use crate::kind::{StoreFilter, write_snapshot};
use crate::load::{self, Matched};
use crate::options::{FilterOptions, OptionsError};
use crate::outcome::{
    BypassReason, Lookup, Metrics, Mode, OpenOutcome, RebuildReport, SharedError, SnapshotRefresh,
};
use crate::primary::{PrimaryStore, StoreClaim};

#[derive(Default)]
struct Counters {
    queries: AtomicU64,
    store_lookups: AtomicU64,
    lookups_avoided: AtomicU64,
    false_positives: AtomicU64,
    inserts: AtomicU64,
    removals: AtomicU64,
    /// Removals whose bits a plain filter still holds (since it was built).
    stale_removals: AtomicU64,
    failed_automatic_rebuilds: AtomicU64,
}

/// For a counting filter: the generations whose change the wrapper applied itself, so that a
/// save takes in exactly the changes made behind its back (counts must be neither missed
/// nor taken off twice).
#[derive(Debug, Default)]
struct Applied {
    /// Every change up to here is in the filter.
    through: DatasetGeneration,
    /// Changes past `through` that the wrapper applied (past a gap left by a change made
    /// behind its back).
    ahead: BTreeSet<u64>,
    /// More than [`Applied::MAX_AHEAD`] were pending: the next save rebuilds instead.
    overflowed: bool,
}

impl Applied {
    const MAX_AHEAD: usize = 1 << 20;

    fn record(&mut self, generation: DatasetGeneration) {
        if generation <= self.through {
            return;
        }
        if self.ahead.len() >= Self::MAX_AHEAD {
            self.overflowed = true;
            self.ahead.clear();
            return;
        }
        self.ahead.insert(generation.get());
        self.compact();
    }

    fn compact(&mut self) {
        while let Some(next) = self.through.next()
            && self.ahead.remove(&next.get())
        {
            self.through = next;
        }
    }

    /// Every change up to `through` is now in the filter (and, as before, those recorded).
    /// `through` may already be behind: changes recorded past it while a rebuild or a save
    /// ran are in the filter too, so it never moves back.
    fn reset(&mut self, through: DatasetGeneration) {
        self.through = self.through.max(through);
        let through = self.through.get();
        self.ahead.retain(|&g| g > through);
        self.compact();
    }

    /// After a rebuild counted afresh up to `start`: an overflow is forgotten. Records lost
    /// to an overflow during the rebuild were inserts only (removals wait for rebuilds), so
    /// at worst a later save counts one of them twice: a stale "maybe", never a lost key.
    fn rebuilt(&mut self, start: DatasetGeneration) {
        self.overflowed = false;
        self.reset(start);
    }

    fn applied(&self, generation: DatasetGeneration) -> bool {
        generation <= self.through || self.ahead.contains(&generation.get())
    }
}

/// Counting inserts in flight: taken off before the store commit, landed once its
/// generation is recorded (or it committed nothing).
#[derive(Default)]
struct Flights {
    open: Mutex<(u64, BTreeSet<u64>)>,
    landed: Condvar,
}

impl Flights {
    fn lock(&self) -> MutexGuard<'_, (u64, BTreeSet<u64>)> {
        // Only numbers are kept; a panic elsewhere leaves them usable.
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn take_off(&self) -> u64 {
        let mut open = self.lock();
        let ticket = open.0;
        open.0 += 1;
        open.1.insert(ticket);
        ticket
    }

    fn land(&self, ticket: u64) {
        self.lock().1.remove(&ticket);
        self.landed.notify_all();
    }

    /// Waits until every insert in flight now has landed. A landed insert waits for no
    /// other, and one in flight only commits and records, so this never waits for itself.
    fn wait_for_those_in_flight(&self) {
        let mut open = self.lock();
        let waiting: Vec<u64> = open.1.iter().copied().collect();
        while waiting.iter().any(|t| open.1.contains(t)) {
            open = self
                .landed
                .wait(open)
                .unwrap_or_else(PoisonError::into_inner);
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
    _claim: StoreClaim,
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
        let claim = store
            .claim_wrapper()
            .map_err(StoreError::Store)?
            .ok_or(StoreError::InUse)?;
        let configured = options.encoding_label();
        let recorded = store
            .claim_key_encoding(&configured)
            .map_err(StoreError::Store)?;
        if recorded != configured {
            return Err(OptionsError::EncodingMismatch {
                store: recorded,
                configured,
            }
            .into());
        }
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
        let counters = Counters::default();
        counters.stale_removals.store(stale, Ordering::Relaxed);
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
            _claim: claim,
        };
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
        self.read().mode.clone()
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

    /// Applies the configured key encoding to a text key.
    pub fn encode<'a>(&self, key: &'a str) -> EncodedKey<'a> {
        self.options.encoding.encode_str(key)
    }

    /// Whether a key (text, bytes or already encoded, such as a key read back from the
    /// store: see [`Key`]) is in the store. An encoded key is not encoded again.
    ///
    /// # Errors
    /// [`StoreError::Key`] for a byte key a text encoding refuses, or [`StoreError::Store`]
    /// when the store is asked and fails.
    pub fn contains<K: Key + ?Sized>(&self, key: &K) -> Result<Lookup, StoreError<S::Error>> {
        let key = key.encode(self.options.encoding).map_err(Into::into)?;
        self.contains_encoded(&key)
    }

    fn contains_encoded(&self, key: &EncodedKey<'_>) -> Result<Lookup, StoreError<S::Error>> {
        self.counters.queries.fetch_add(1, Ordering::Relaxed);
        let trusted_maybe = {
            let state = self.read();
            match state.mode {
                Mode::Trusted => Some(state.active.contains(key)),
                Mode::Bypassed(_) => None,
            }
        };
        if trusted_maybe == Some(false) {
            self.counters
                .lookups_avoided
                .fetch_add(1, Ordering::Relaxed);
            return Ok(Lookup::AbsentByFilter);
        }
        self.counters.store_lookups.fetch_add(1, Ordering::Relaxed);
        let present = self
            .store
            .contains(key.as_bytes())
            .map_err(StoreError::Store)?;
        Ok(match (present, trusted_maybe) {
            (true, _) => Lookup::Present,
            (false, Some(_)) => {
                self.counters
                    .false_positives
                    .fetch_add(1, Ordering::Relaxed);
                Lookup::FalsePositive
            }
            (false, None) => Lookup::AbsentBypassed,
        })
    }

    /// Inserts a key (text, bytes or already encoded: see [`Key`]): sets its bits (in the
    /// active filter and in a filter being rebuilt), then commits it to the store. Returns
    /// whether the store did not have it.
    ///
    /// # Errors
    /// [`StoreError::Key`] for a byte key a text encoding refuses, and for an encoded key
    /// whose bytes the encoding would not make ([`bloom_core::KeyError::NotEncoded`]:
    /// committed, they would never match the same key given as text); nothing is then
    /// inserted. [`StoreError::Store`]: the key is then not committed (its bits may be set,
    /// which only costs a false positive).
    pub fn insert<K: Key + ?Sized>(&self, key: &K) -> Result<bool, StoreError<S::Error>> {
        let key = key.encode_checked(self.options.encoding)?;
        self.insert_encoded_with(&key, |store, key| store.insert(key))
    }

    /// Inserts a key with a commit of the application's own: sets the key's bits as
    /// [`FilteredStore::insert`] does, then calls `commit` with the store and the encoded
    /// key, which writes the record (with whatever else the application keeps in it) and
    /// returns what [`PrimaryStore::insert`] would: the generation of the change, or `None`
    /// when the key was already there. Returns whether the store did not have it.
    ///
    /// This is how a record with more than its key goes in (a user with a name, say) while
    /// the filter stays in step: a write to the store that does not pass through the
    /// wrapper is not in the filter until the next save or rebuild takes it in. `commit` must
    /// record the change in the store's history as `PrimaryStore::insert` does.
    ///
    /// # Errors
    /// [`StoreError::Store`] with `commit`'s error: the record is then not committed (its
    /// bits may be set, which only costs a false positive).
    pub fn insert_with<K, F>(&self, key: &K, commit: F) -> Result<bool, StoreError<S::Error>>
    where
        K: Key + ?Sized,
        F: FnOnce(&S, &[u8]) -> Result<Option<DatasetGeneration>, S::Error>,
    {
        let key = key.encode_checked(self.options.encoding)?;
        self.insert_encoded_with(&key, commit)
    }

    fn insert_encoded_with<F>(
        &self,
        key: &EncodedKey<'_>,
        commit: F,
    ) -> Result<bool, StoreError<S::Error>>
    where
        F: FnOnce(&S, &[u8]) -> Result<Option<DatasetGeneration>, S::Error>,
    {
        // The read guard is held through the commit: a rebuild installs its new filter and
        // switches over under the write lock, so no insert can set bits only in a filter that
        // is about to be dropped while its commit lands after the rebuild's scan.
        let _gate = self.options.counting.then(|| {
            self.insert_gate
                .read()
                .unwrap_or_else(PoisonError::into_inner)
        });
        let state = self.read();
        state.active.insert(key);
        if let Some(building) = &state.building {
            building.insert(key);
        }
        let counting = state.active.is_counting();
        let ticket = counting.then(|| self.flights.take_off());
        let committed = commit(&self.store, key.as_bytes());
        if let Ok(Some(generation)) = committed
            && counting
        {
            self.applied().record(generation);
        }
        if let Some(ticket) = ticket {
            self.flights.land(ticket);
        }
        let committed = committed.map_err(StoreError::Store)?;
        if counting && committed.is_none() {
            self.settle_duplicate(&state, key);
        }
        drop(state);
        self.counters.inserts.fetch_add(1, Ordering::Relaxed);
        Ok(committed.is_some())
    }

    /// A counting insert found its key already in the store: the count it just added stands
    /// for the key's insert if the filter never counted that insert (one made by another
    /// process, not yet taken in), and is taken back if it did, or if the key is gone again.
    /// A store that cannot tell which insert put the key there leaves the count (at worst a
    /// stale "maybe" after a removal). The added count was just made, so taking it back
    /// cannot be refused.
    fn settle_duplicate(&self, state: &State, key: &EncodedKey<'_>) {
        let take_back = || {
            let _ = state.active.remove(key);
            if let Some(building) = &state.building {
                let _ = building.remove(key);
            }
        };
        match self.store.generation_of(key.as_bytes()) {
            Ok(KeyGeneration::Since(generation)) => {
                if !self.applied().applied(generation) {
                    // Maybe one of this wrapper's inserts, committed and about to record
                    // itself.
                    self.flights.wait_for_those_in_flight();
                }
                let mut applied = self.applied();
                if applied.applied(generation) {
                    take_back();
                    return;
                }
                // Not counted: this count stands for that insert, once; no save replays it.
                applied.record(generation);
                // A rebuild counts the inserts up to its start itself.
                if let (Some(building), Some(start)) = (&state.building, state.building_start)
                    && generation <= start
                {
                    let _ = building.remove(key);
                }
            }
            // Removed since the commit found it: its counts are for the history to settle.
            Ok(KeyGeneration::Absent) => take_back(),
            // A store that cannot tell (or failed to): keep the count while the key is there.
            _ => {
                if !self.store.contains(key.as_bytes()).unwrap_or(true) {
                    take_back();
                }
            }
        }
    }

    /// Removes a key (text, bytes or already encoded: see [`Key`]) from the store, then from the filter. Returns whether the store
    /// had it.
    ///
    /// - With a counting filter ([`FilterOptions::counting`]) the key's counters go down, so
    ///   the filter forgets it. Only keys the store confirmed present (and removed) are taken
    ///   off the filter, never a key it only reports "maybe". A crash between the store's
    ///   removal and the filter's leaves a stale "maybe", and the next open takes the removal
    ///   off from the store's history.
    /// - With a plain filter the key's bits stay (a stale "maybe", confirmed absent by the
    ///   store); [`Metrics::stale_removals`] counts them, and once the filter's estimated
    ///   false-positive rate passes the target the remove that notices it rebuilds the filter
    ///   from the store before returning (a failed rebuild does not fail the remove: it is
    ///   counted in [`Metrics::failed_automatic_rebuilds`] and tried again later).
    ///
    /// Removals wait while a rebuild runs, and while a counting filter's snapshot is being
    /// taken.
    ///
    /// # Errors
    /// [`StoreError::Key`] for a byte key a text encoding refuses; [`StoreError::Store`]:
    /// the key is then not removed (and the filter unchanged).
    pub fn remove<K: Key + ?Sized>(&self, key: &K) -> Result<bool, StoreError<S::Error>> {
        let key = key.encode(self.options.encoding).map_err(Into::into)?;
        self.remove_encoded(&key)
    }

    fn remove_encoded(&self, key: &EncodedKey<'_>) -> Result<bool, StoreError<S::Error>> {
        let gate = self
            .removal_gate
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        let state = self.read();
        let Some(removal) = self
            .store
            .remove(key.as_bytes())
            .map_err(StoreError::Store)?
        else {
            return Ok(false);
        };
        let generation = removal.generation;
        self.counters.removals.fetch_add(1, Ordering::Relaxed);
        let trusted = matches!(state.mode, Mode::Trusted);
        let mut diverged = false;
        let mut stale = 0;
        let state = if state.active.is_counting()
            && trusted
            && !self.applied().applied(removal.inserted_at)
        {
            // The insert this removal undoes is not recorded yet: it may be one of this
            // wrapper's, committed and about to be recorded (a removal racing the key's
            // insert). Wait until every insert in flight has recorded its generation, then
            // look again. The state guard is let go while waiting (an insert waiting for it
            // behind a pending writer would wait for this removal in turn); the removal
            // gate, still held, keeps rebuilds and saves out, so the filter stays the same.
            drop(state);
            drop(
                self.insert_gate
                    .write()
                    .unwrap_or_else(PoisonError::into_inner),
            );
            self.read()
        } else {
            state
        };
        if state.active.is_counting() {
            let mut applied = self.applied();
            // Only a count the filter holds is taken off: the key's insert must be in it. An
            // insert made behind the wrapper's back and not yet taken in is left alone, and so
            // is this removal (unrecorded): the next save replays both, in order. Taking it
            // off now would take a count from other keys when the key reads maybe by chance.
            // (Left for the save, the removals of a key inserted and removed often would pile
            // up its counts until they saturate: the wait above keeps that to keys inserted
            // behind the wrapper's back.)
            if trusted && applied.applied(removal.inserted_at) {
                // The filter counted the key: a refusal means the counts no longer describe
                // the store.
                diverged = state.active.remove(key).is_err();
                applied.record(generation);
            }
        } else {
            stale = self.counters.stale_removals.fetch_add(1, Ordering::Relaxed) + 1;
        }
        let active = Arc::clone(&state.active);
        drop(state);
        drop(gate);
        if diverged {
            let mut state = self.write();
            if Arc::ptr_eq(&state.active, &active) {
                state.mode = Mode::Bypassed(BypassReason::CountsDiverged { generation });
            }
        } else if trusted && !active.is_counting() && self.stale_check_due(stale) {
            let target = self.options.false_positive_rate;
            // The key is removed whatever the rebuild does: a failed rebuild keeps the old
            // filter (trusted, stale bits and all), is counted, and is tried again later.
            if active.estimated_false_positive_rate() > target && self.rebuild().is_err() {
                self.counters
                    .failed_automatic_rebuilds
                    .fetch_add(1, Ordering::Relaxed);
            }
        }
        Ok(true)
    }

    /// Whether enough removals piled up since the last look at a plain filter's rate: every
    /// 1% of the capacity (at least every 64), so that the look (a pass over the bits) costs
    /// little per removal.
    fn stale_check_due(&self, stale: u64) -> bool {
        let every = (self.read().capacity / 100).max(64);
        stale > 0 && stale.is_multiple_of(every)
    }

    /// Builds a new filter from the store, off to the side, and switches to it once it covers
    /// the store. While it runs, a bypassed filter stays bypassed (queries go to the store)
    /// and a trusted one keeps answering. Inserts made during the rebuild set bits in the new
    /// filter too, so none is missed.
    ///
    /// A counting filter is rebuilt by replaying the store's change log up to the rebuild's
    /// start (so that its counts are exact there), which takes time in proportion to every
    /// change the store ever committed, removals included; a plain filter reads the keys in
    /// the store.
    ///
    /// If the estimated item count passed the capacity, the new filter is planned for twice
    /// the estimate, which brings the false-positive rate back to the target, but never
    /// larger than `max_snapshot_bytes` ([`RebuildReport::capacity_limited`] then says so).
    ///
    /// # Errors
    /// A store error; the previous filter and mode are then kept.
    pub fn rebuild(&self) -> Result<RebuildReport, StoreError<S::Error>> {
        // Holds no data, so a panic in another rebuild leaves nothing inconsistent.
        let _one_at_a_time = self
            .rebuilding
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // No removal runs during a rebuild: the scan could miss a key removed at the same
        // time, and the removal would then take it off the new filter too.
        let _no_removals = self
            .removal_gate
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        // The store's generation bounds its key count: a filter rebuilt after a bypass is
        // sized for the store, not for the empty filter it replaces.
        let stored = match self.store.generation() {
            Ok(generation) => generation.get(),
            Err(e) => {
                let mut state = self.write();
                if let Mode::Bypassed(_) = state.mode {
                    state.mode = Mode::Bypassed(BypassReason::RebuildFailed);
                }
                return Err(StoreError::Store(e));
            }
        };
        let wanted = {
            let state = self.read();
            // The generation counts removals too; a trusted filter's estimate (less the
            // removed keys a plain filter still holds) is the better count then.
            let estimate = match state.mode {
                Mode::Trusted => (state.active.estimated_items()
                    - self.counters.stale_removals.load(Ordering::Relaxed) as f64)
                    .max(0.0),
                Mode::Bypassed(_) => stored as f64,
            };
            if estimate > state.capacity as f64 {
                (estimate * 2.0).ceil() as u64
            } else {
                state.capacity
            }
        };
        let plan = self.options.plan(wanted)?;
        let new = Arc::new(StoreFilter::new(plan.config, self.options.counting)?);
        let start = {
            let mut state = self.write();
            state.building = Some(Arc::clone(&new));
            if let Mode::Bypassed(_) = state.mode {
                state.mode = Mode::Bypassed(BypassReason::Rebuilding);
            }
            // Every insert that missed `building` has committed (it held the read lock).
            let head = self.store.head();
            state.building_start = head.as_ref().ok().map(|point| point.generation);
            head
        };
        let start_point = start.as_ref().ok().copied();
        let start = start.map(|point| point.generation);
        let scan = start.and_then(|start| {
            let mut keys = 0u64;
            let reached = if new.is_counting() {
                // Counts must match the store exactly at `start`: replay its history up to
                // there (a scan of the keys now could miss one removed behind the wrapper's
                // back after `start`, whose removal a later catch-up would then take off
                // again).
                self.store
                    .changes_since(DatasetGeneration::ZERO, &mut |change| {
                        if change.generation > start {
                            return;
                        }
                        let key = EncodedKey::from_encoded(change.key);
                        match change.kind {
                            ChangeKind::Inserted => {
                                new.insert(&key);
                                keys += 1;
                            }
                            ChangeKind::Removed => {
                                let _ = new.remove(&key);
                            }
                        }
                    })?
                    .min(start)
            } else {
                let mut batch = Batcher::new(&new);
                let reached = self
                    .store
                    .keys_since(DatasetGeneration::ZERO, &mut |key| batch.push(key))?;
                keys = batch.finish();
                reached
            };
            Ok((start, reached, keys))
        });
        let mut state = self.write();
        state.building = None;
        state.building_start = None;
        let (start, reached, keys) = match scan {
            Ok(v) => v,
            Err(e) => {
                if matches!(state.mode, Mode::Bypassed(BypassReason::Rebuilding)) {
                    state.mode = Mode::Bypassed(BypassReason::RebuildFailed);
                }
                return Err(StoreError::Store(e));
            }
        };
        // Keys committed after the scan started had their bits set directly, so covering the
        // generation at the start is covering the store.
        state.active = new;
        state.synced = start.min(reached);
        if let Some(point) = start_point {
            state.verified = point;
        }
        state.capacity = plan.capacity;
        state.capacity_limited = plan.limited;
        state.mode = Mode::Trusted;
        self.applied().rebuilt(state.synced);
        self.counters.stale_removals.store(0, Ordering::Relaxed);
        Ok(RebuildReport {
            keys_scanned: keys,
            generation: reached.max(start),
            capacity: plan.capacity,
            capacity_limited: plan.limited,
        })
    }

    /// Writes a snapshot atomically, bound to the store: its identity and the point of its
    /// history (generation and digest) are read first, the filter takes in every key committed
    /// since it last caught up with the store (which covers keys written behind the wrapper's
    /// back too), then the bits are streamed to the file while inserts continue (no copy of the
    /// filter is made). The snapshot therefore covers every key committed at that generation.
    /// Returns the generation.
    ///
    /// The path may be a symbolic link (the file it names is replaced, in its directory); an
    /// existing path that is not a regular file, or a file that is not a snapshot (a mistyped
    /// path naming the database, say), is refused and left alone. Temporary files left by an
    /// earlier writer that was killed are removed. A new salted snapshot is readable by its
    /// owner only.
    ///
    /// A counting filter is copied and the copy written, so saving one holds its counters
    /// twice for a moment. Inserts wait while the head is read and the counters copied (one
    /// memory copy), removals until the changes made behind the wrapper's back are taken in
    /// (exactly once, removals included); lookups go on. Every change the wrapper makes after
    /// one made behind its back is remembered until that save (8 bytes or so each, up to
    /// about a million; past that the save rebuilds the filter from the store's history).
    ///
    /// Before anything is written, the store must still have the history the filter follows:
    /// a store that lost commits it had acknowledged while the wrapper was open (a failover to
    /// a lagging replica, say) fails the save with [`StoreError::NotTrusted`]
    /// ([`BypassReason::HistoryDiverged`]) and the filter is bypassed until a rebuild. A
    /// primary store must not lose acknowledged commits; this catches it at the next save,
    /// not before: between the loss and that save, a key whose removal was lost may read
    /// absent from a counting filter.
    ///
    /// # Errors
    /// [`StoreError::NotTrusted`] while bypassed, a store error, or a write error (the
    /// previous file is then unchanged).
    pub fn save_snapshot(
        &self,
        path: impl AsRef<Path>,
    ) -> Result<DatasetGeneration, StoreError<S::Error>> {
        let path = path.as_ref();
        if self.options.counting {
            return self.save_counting(path);
        }
        let (filter, synced, head, identity) = {
            // The read lock keeps a rebuild from switching filters between reading the
            // history and taking the filter.
            let state = self.read();
            if let Mode::Bypassed(reason) = &state.mode {
                return Err(StoreError::NotTrusted(reason.clone()));
            }
            let identity = self.store.identity().map_err(StoreError::Store)?;
            let head = self.store.head().map_err(StoreError::Store)?;
            let verified = state.verified;
            let filter = Arc::clone(&state.active);
            let synced = state.synced;
            drop(state);
            self.check_history(&filter, verified, head, synced)?;
            (filter, synced, head, identity)
        };
        if head.generation > synced {
            let mut batch = Batcher::new(&filter);
            self.store
                .keys_since(synced, &mut |key| batch.push(key))
                .map_err(StoreError::Store)?;
            batch.finish();
            let mut state = self.write();
            if Arc::ptr_eq(&state.active, &filter) && state.synced < head.generation {
                state.synced = head.generation;
                state.verified = head;
            }
        }
        write_snapshot(path, &*filter, identity, head)?;
        Ok(head.generation)
    }

    /// Checks, before a save, that the store still has the history the filter follows: the
    /// verified point, and nothing behind what the filter already holds. A store that lost
    /// commits it had acknowledged fails this; the filter is then bypassed until a rebuild.
    fn check_history(
        &self,
        filter: &Arc<StoreFilter>,
        verified: HistoryPoint,
        head: HistoryPoint,
        holds: DatasetGeneration,
    ) -> Result<(), StoreError<S::Error>> {
        let reason = if head.generation < holds.max(verified.generation) {
            BypassReason::RolledBack {
                holds: holds.max(verified.generation),
                store: head.generation,
            }
        } else if self
            .store
            .history_at(verified.generation)
            .map_err(StoreError::Store)?
            != Some(verified.digest)
        {
            BypassReason::HistoryDiverged {
                generation: verified.generation,
            }
        } else {
            return Ok(());
        };
        let mut state = self.write();
        if Arc::ptr_eq(&state.active, filter) {
            state.mode = Mode::Bypassed(reason.clone());
        }
        Err(StoreError::NotTrusted(reason))
    }

    fn save_counting(&self, path: &Path) -> Result<DatasetGeneration, StoreError<S::Error>> {
        let gate = self
            .removal_gate
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        let (filter, mut copy, head, identity) = {
            // No insert is in flight while the inserts' gate is held: each has recorded the
            // generation it committed at, so the head read here splits the history exactly
            // into changes the filter holds and changes made behind the wrapper's back, and
            // the copy holds exactly the former. Lookups go on meanwhile.
            let _no_inserts = self
                .insert_gate
                .write()
                .unwrap_or_else(PoisonError::into_inner);
            let state = self.read();
            if let Mode::Bypassed(reason) = &state.mode {
                return Err(StoreError::NotTrusted(reason.clone()));
            }
            let identity = self.store.identity().map_err(StoreError::Store)?;
            let head = self.store.head().map_err(StoreError::Store)?;
            let filter = Arc::clone(&state.active);
            let verified = state.verified;
            drop(state);
            let through = self.applied().through;
            self.check_history(&filter, verified, head, through)?;
            let Some(copy) = filter.counting_copy() else {
                return Err(StoreError::NotTrusted(BypassReason::Rebuilding));
            };
            (filter, copy, head, identity)
        };
        // The changes made behind the wrapper's back, up to the head: into the filter and
        // the copy alike, each once.
        let mut diverged = None;
        {
            let mut applied = self.applied();
            if applied.overflowed {
                // Too many changes behind the wrapper's back to tell apart (checked under the
                // record's lock, which inserts also take): count afresh.
                drop(applied);
                drop(gate);
                self.rebuild()?;
                return self.save_counting(path);
            }
            if head.generation > applied.through {
                let from = applied.through;
                // Each change is recorded as it is applied, so that a replay that fails
                // halfway (a store error) is resumed, never applied twice, by the next save.
                self.store
                    .changes_since(from, &mut |change| {
                        if change.generation > head.generation || applied.applied(change.generation)
                        {
                            return;
                        }
                        applied.record(change.generation);
                        let key = EncodedKey::from_encoded(change.key);
                        let refused = match change.kind {
                            ChangeKind::Inserted => {
                                copy.insert(&key);
                                false
                            }
                            ChangeKind::Removed => copy.remove(&key).is_err(),
                        };
                        if apply_change(&filter, change).is_err() || refused {
                            diverged.get_or_insert(change.generation);
                        }
                    })
                    .map_err(StoreError::Store)?;
                applied.reset(head.generation);
            }
        }
        drop(gate);
        if let Some(generation) = diverged {
            let reason = BypassReason::CountsDiverged { generation };
            let mut state = self.write();
            if Arc::ptr_eq(&state.active, &filter) {
                state.mode = Mode::Bypassed(reason.clone());
            }
            return Err(StoreError::NotTrusted(reason));
        }
        {
            let mut state = self.write();
            if Arc::ptr_eq(&state.active, &filter) && state.synced < head.generation {
                state.synced = head.generation;
                state.verified = head;
            }
        }
        write_snapshot(path, &copy, identity, head)?;
        Ok(head.generation)
    }

    /// A copy of the counters and the filter state.
    pub fn metrics(&self) -> Metrics {
        let state = self.read();
        let filter = &state.active;
        let c = &self.counters;
        let avoided = c.lookups_avoided.load(Ordering::Relaxed);
        let false_positives = c.false_positives.load(Ordering::Relaxed);
        let negatives = avoided + false_positives;
        let estimated_items = filter.estimated_items();
        Metrics {
            queries: c.queries.load(Ordering::Relaxed),
            store_lookups: c.store_lookups.load(Ordering::Relaxed),
            lookups_avoided: avoided,
            false_positives,
            inserts: c.inserts.load(Ordering::Relaxed),
            removals: c.removals.load(Ordering::Relaxed),
            stale_removals: c.stale_removals.load(Ordering::Relaxed),
            failed_automatic_rebuilds: c.failed_automatic_rebuilds.load(Ordering::Relaxed),
            counting: filter.is_counting(),
            saturated_counters: filter.saturated_counters().unwrap_or(0),
            observed_false_positive_rate: (negatives > 0)
                .then(|| false_positives as f64 / negatives as f64),
            predicted_false_positive_rate: filter.estimated_false_positive_rate(),
            fill_ratio: filter.fill_ratio(),
            estimated_items,
            capacity: state.capacity,
            over_capacity: estimated_items > state.capacity as f64,
            capacity_limited: state.capacity_limited,
            mode: state.mode.clone(),
            bits: filter.config().bits(),
            hashes: filter.config().hashes(),
        }
    }

    /// A copy of the active filter, for inspection.
    ///
    /// # Errors
    /// [`AllocError`] when the copy cannot be allocated.
    pub fn filter_copy(&self) -> Result<BloomFilter, AllocError> {
        self.read().active.to_filter()
    }
}

/// Applies one change of the store's history to a filter: an insert sets (or counts) the
/// key; a removal takes a count off a counting filter (refused when the filter says the key
/// is absent: its counts do not match the store) and leaves a plain filter's bits.
fn apply_change(filter: &StoreFilter, change: Change<'_>) -> Result<(), bloom_core::RemoveError> {
    let key = EncodedKey::from_encoded(change.key);
    match change.kind {
        ChangeKind::Inserted => {
            filter.insert(&key);
            Ok(())
        }
        ChangeKind::Removed => filter.remove(&key),
    }
}

/// Replays the changes committed since a matched snapshot's generation (keys added, and taken
/// off a counting filter); a failure leaves the filter bypassed. Removals a plain filter keeps
/// the bits of are added to `stale`.
fn catch_up<S: PrimaryStore>(
    store: &S,
    matched: Matched,
    head: HistoryPoint,
    stale: &mut u64,
) -> (StoreFilter, OpenOutcome) {
    let Matched { filter, generation } = matched;
    if generation == head.generation {
        return (filter, OpenOutcome::Trusted { generation });
    }
    let mut batch = Batcher::new(&filter);
    let mut removals = 0u64;
    let mut diverged = None;
    let caught_up = store.changes_since(generation, &mut |change| match change.kind {
        ChangeKind::Inserted => batch.push(change.key),
        ChangeKind::Removed => {
            // In order: the key's insert may be in the batch.
            batch.flush();
            removals += 1;
            if apply_change(batch.filter, change).is_err() {
                diverged.get_or_insert(change.generation);
            }
        }
    });
    let keys = batch.finish();
    if !filter.is_counting() {
        *stale += removals;
    }
    match (caught_up, diverged) {
        (Ok(_), Some(generation)) => (
            filter,
            OpenOutcome::Bypassed(BypassReason::CountsDiverged { generation }),
        ),
        (Ok(to), None) => (
            filter,
            OpenOutcome::CaughtUp {
                from: generation,
                to,
                keys,
                removals,
            },
        ),
        (Err(e), _) => (
            filter,
            OpenOutcome::Bypassed(BypassReason::CatchUpFailed(shared(
                StoreError::<S::Error>::Store(e),
            ))),
        ),
    }
}

/// Keys visited one at a time by `keys_since`, inserted into a filter a batch at a time (so
/// that the batch's cache misses overlap) from one reused buffer.
struct Batcher<'a> {
    filter: &'a StoreFilter,
    bytes: Vec<u8>,
    ends: Vec<usize>,
    keys: u64,
}

impl<'a> Batcher<'a> {
    const KEYS: usize = 256;

    fn new(filter: &'a StoreFilter) -> Self {
        Self {
            filter,
            bytes: Vec::new(),
            ends: Vec::with_capacity(Self::KEYS),
            keys: 0,
        }
    }

    fn push(&mut self, key: &[u8]) {
        self.bytes.extend_from_slice(key);
        self.ends.push(self.bytes.len());
        self.keys += 1;
        if self.ends.len() == Self::KEYS {
            self.flush();
        }
    }

    fn flush(&mut self) {
        let mut start = 0;
        let bytes = &self.bytes;
        self.filter.set_all(self.ends.iter().map(|&end| {
            let key = bytes.get(start..end).unwrap_or_default();
            start = end;
            EncodedKey::from_encoded(key)
        }));
        self.bytes.clear();
        self.ends.clear();
    }

    /// Inserts what is left; returns how many keys were pushed.
    fn finish(mut self) -> u64 {
        self.flush();
        self.keys
    }
}

fn shared<E: std::error::Error + Send + Sync + 'static>(e: E) -> SharedError {
    Arc::new(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(n: u64) -> DatasetGeneration {
        DatasetGeneration::new(n)
    }

    #[test]
    fn the_applied_record_tracks_gaps_and_never_moves_back() {
        let mut applied = Applied::default();
        applied.record(g(1));
        applied.record(g(3)); // 2 was made behind the wrapper's back
        assert_eq!(applied.through, g(1));
        assert!(applied.applied(g(3)) && !applied.applied(g(2)));
        applied.reset(g(2)); // a save took 2 in
        assert_eq!(applied.through, g(3));
        assert!(applied.ahead.is_empty());
        applied.reset(g(1)); // never back
        assert_eq!(applied.through, g(3));
    }

    #[test]
    fn an_overflowed_record_stays_overflowed_until_a_rebuild() {
        let mut applied = Applied::default();
        // A gap at 1, then more changes than the record keeps.
        for n in 2..(Applied::MAX_AHEAD as u64 + 3) {
            applied.record(g(n));
        }
        assert!(applied.overflowed);
        // A save's reset does not clear it: the save must rebuild instead.
        applied.reset(g(5));
        assert!(applied.overflowed);
        applied.rebuilt(g(10));
        assert!(!applied.overflowed);
        assert_eq!(applied.through, g(10));
    }
}
