//! [`FilteredStore`]: the check-then-confirm protocol over a primary store.

use std::fmt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use bloom_core::{AllocError, AtomicBloomFilter, BloomFilter, EncodedKey};
use bloom_format::{
    AtomicFile, DatasetGeneration, SnapshotWriter, StoreBinding, StreamWriteError, WriteError,
    WriteOptions,
};

use crate::error::StoreError;
use crate::history::HistoryPoint;
use crate::load::{self, Matched};
use crate::options::{FilterOptions, OptionsError};
use crate::outcome::{
    BypassReason, Lookup, Metrics, Mode, OpenOutcome, RebuildReport, SharedError, SnapshotRefresh,
};
use crate::primary::PrimaryStore;

#[derive(Default)]
struct Counters {
    queries: AtomicU64,
    store_lookups: AtomicU64,
    lookups_avoided: AtomicU64,
    false_positives: AtomicU64,
    inserts: AtomicU64,
}

struct State {
    active: Arc<AtomicBloomFilter>,
    /// The generation up to which `active` is known to hold every key of the store (from
    /// the snapshot, a catch-up, a rebuild or a save); inserts through the wrapper go beyond
    /// it, and a save catches up from it, so that keys written behind the wrapper's back
    /// never make a snapshot claim more than its bits hold.
    synced: DatasetGeneration,
    capacity: u64,
    capacity_limited: bool,
    mode: Mode,
    /// The filter a rebuild is filling; inserts set its bits too.
    building: Option<Arc<AtomicBloomFilter>>,
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
/// All writes to the primary store must go through this wrapper: a key written behind its
/// back (by another program, another process's wrapper, or [`FilteredStore::store`]'s
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
    counters: Counters,
}

/// Shows the options (the salt redacted), the mode and the filter's size; never the bits.
impl<S: fmt::Debug> fmt::Debug for FilteredStore<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.state.read().unwrap_or_else(PoisonError::into_inner);
        f.debug_struct("FilteredStore")
            .field("store", &self.store)
            .field("options", &self.options)
            .field("mode", &state.mode)
            .field("bits", &state.active.config().bits())
            .field("hashes", &state.active.config().hashes())
            .field("capacity", &state.capacity)
            .finish_non_exhaustive()
    }
}

impl<S: PrimaryStore> FilteredStore<S> {
    /// Opens the wrapper, loading the snapshot at `snapshot` if given and comparing it with
    /// the store:
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
    /// # Errors
    /// Invalid options, or the store failing to report its identity or history.
    pub fn open(
        store: S,
        options: FilterOptions,
        snapshot: Option<&Path>,
    ) -> Result<(Self, OpenOutcome), StoreError<S::Error>> {
        options.validate()?;
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
        let matched = match snapshot {
            None => Err(BypassReason::NoSnapshot),
            Some(path) => {
                load::open_snapshot(path, &options, &store, head).map_err(StoreError::Store)?
            }
        };
        let (filter, outcome) = match matched {
            Ok(matched) => catch_up(&store, matched, head),
            Err(reason) => {
                let plan = options.plan(options.capacity)?;
                (
                    AtomicBloomFilter::new(plan.config)?,
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
        // A snapshot of a grown filter holds more than the configured capacity; one that grew
        // to the snapshot limit cannot grow further.
        let capacity = options
            .capacity
            .max(options.capacity_of(filter.config().bits()));
        // At the limit when not even one more block would fit.
        let config = filter.config();
        let capacity_limited =
            (config.bits() + config.layout().granule()).div_ceil(8) > options.max_snapshot_bytes;
        let wrapper = Self {
            store,
            options,
            state: RwLock::new(State {
                active: Arc::new(filter),
                synced,
                capacity,
                capacity_limited,
                mode,
                building: None,
            }),
            rebuilding: Mutex::new(()),
            counters: Counters::default(),
        };
        Ok((wrapper, outcome))
    }

    /// [`FilteredStore::open`], then, if the filter is bypassed, [`FilteredStore::rebuild`]
    /// and a fresh snapshot at `snapshot`, so that the next start finds a snapshot it can
    /// trust. The outcome says what really happened ([`OpenOutcome::Rebuilt`] with the
    /// reason, the rebuild and the fate of the snapshot file).
    ///
    /// # Errors
    /// As `open` and `rebuild`. Failing to write the fresh snapshot is not an error: the
    /// rebuilt filter is trusted, and the outcome reports [`SnapshotRefresh::Failed`].
    pub fn open_and_recover(
        store: S,
        options: FilterOptions,
        snapshot: Option<&Path>,
    ) -> Result<(Self, OpenOutcome), StoreError<S::Error>> {
        let (wrapper, outcome) = Self::open(store, options, snapshot)?;
        let OpenOutcome::Bypassed(reason) = outcome else {
            return Ok((wrapper, outcome));
        };
        let report = wrapper.rebuild()?;
        let refresh = match snapshot {
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

    /// Applies the configured key encoding to a text key.
    pub fn encode<'a>(&self, key: &'a str) -> EncodedKey<'a> {
        self.options.encoding.encode_str(key)
    }

    /// Whether a text key is in the store.
    ///
    /// # Errors
    /// [`StoreError::Store`] when the store is asked and fails.
    pub fn contains(&self, key: &str) -> Result<Lookup, StoreError<S::Error>> {
        self.contains_encoded(&self.encode(key))
    }

    /// Whether a byte key is in the store.
    ///
    /// # Errors
    /// [`StoreError::Key`] for non-UTF-8 keys under a text encoding, or a store error.
    pub fn contains_bytes(&self, key: &[u8]) -> Result<Lookup, StoreError<S::Error>> {
        let key = self.options.encoding.encode_bytes(key)?;
        self.contains_encoded(&key)
    }

    /// Whether a key that is already encoded with the configured encoding (such as a key
    /// read back from the store) is in the store. No encoding is applied again.
    ///
    /// # Errors
    /// [`StoreError::Store`] when the store is asked and fails.
    pub fn contains_encoded(&self, key: &EncodedKey<'_>) -> Result<Lookup, StoreError<S::Error>> {
        self.counters.queries.fetch_add(1, Ordering::Relaxed);
        let trusted_maybe = {
            let state = self.read();
            match state.mode {
                Mode::Trusted => Some(state.active.contains_encoded(key)),
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

    /// Inserts a text key: sets its bits (in the active filter and in a filter being rebuilt),
    /// then commits it to the store. Returns whether the store did not have it.
    ///
    /// # Errors
    /// [`StoreError::Store`]: the key is then not committed (its bits may be set, which only
    /// costs a false positive).
    pub fn insert(&self, key: &str) -> Result<bool, StoreError<S::Error>> {
        self.insert_encoded(&self.encode(key))
    }

    /// Inserts a byte key; see [`FilteredStore::insert`].
    ///
    /// # Errors
    /// [`StoreError::Key`] for non-UTF-8 keys under a text encoding, or a store error.
    pub fn insert_bytes(&self, key: &[u8]) -> Result<bool, StoreError<S::Error>> {
        let key = self.options.encoding.encode_bytes(key)?;
        self.insert_encoded(&key)
    }

    /// Inserts a key that is already encoded with the configured encoding; see
    /// [`FilteredStore::insert`].
    ///
    /// # Errors
    /// [`StoreError::Store`], as for `insert`.
    pub fn insert_encoded(&self, key: &EncodedKey<'_>) -> Result<bool, StoreError<S::Error>> {
        // The read guard is held through the commit: a rebuild installs its new filter and
        // switches over under the write lock, so no insert can set bits only in a filter that
        // is about to be dropped while its commit lands after the rebuild's scan.
        let state = self.read();
        state.active.insert_encoded(key);
        if let Some(building) = &state.building {
            building.insert_encoded(key);
        }
        let new = self
            .store
            .insert(key.as_bytes())
            .map_err(StoreError::Store)?;
        drop(state);
        self.counters.inserts.fetch_add(1, Ordering::Relaxed);
        Ok(new)
    }

    /// Builds a new filter from the store, off to the side, and switches to it once it covers
    /// the store. While it runs, a bypassed filter stays bypassed (queries go to the store)
    /// and a trusted one keeps answering. Inserts made during the rebuild set bits in the new
    /// filter too, so none is missed.
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
            let estimate = state.active.estimated_items().max(stored as f64);
            if estimate > state.capacity as f64 {
                (estimate * 2.0).ceil() as u64
            } else {
                state.capacity
            }
        };
        let plan = self.options.plan(wanted)?;
        let new = Arc::new(AtomicBloomFilter::new(plan.config)?);
        let start = {
            let mut state = self.write();
            state.building = Some(Arc::clone(&new));
            if let Mode::Bypassed(_) = state.mode {
                state.mode = Mode::Bypassed(BypassReason::Rebuilding);
            }
            // Every insert that missed `building` has committed (it held the read lock).
            self.store.generation()
        };
        let scan = start.and_then(|start| {
            let mut keys = 0u64;
            let reached =
                self.store
                    .keys_since(bloom_format::DatasetGeneration::ZERO, &mut |key| {
                        new.insert_encoded(&EncodedKey::from_encoded(key));
                        keys += 1;
                    })?;
            Ok((start, reached, keys))
        });
        let mut state = self.write();
        state.building = None;
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
        state.capacity = plan.capacity;
        state.capacity_limited = plan.limited;
        state.mode = Mode::Trusted;
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
    /// # Errors
    /// [`StoreError::NotTrusted`] while bypassed, a store error, or a write error (the
    /// previous file is then unchanged).
    pub fn save_snapshot(&self, path: &Path) -> Result<DatasetGeneration, StoreError<S::Error>> {
        let (filter, synced, head, identity) = {
            // The read lock keeps a rebuild from switching filters between reading the
            // history and taking the filter.
            let state = self.read();
            if let Mode::Bypassed(reason) = &state.mode {
                return Err(StoreError::NotTrusted(reason.clone()));
            }
            let identity = self.store.identity().map_err(StoreError::Store)?;
            let head = self.store.head().map_err(StoreError::Store)?;
            (Arc::clone(&state.active), state.synced, head, identity)
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
            }
        }
        write_snapshot(path, &filter, identity, head)?;
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

/// Adds the keys committed since a matched snapshot's generation; a failure leaves the filter
/// bypassed.
fn catch_up<S: PrimaryStore>(
    store: &S,
    matched: Matched,
    head: HistoryPoint,
) -> (AtomicBloomFilter, OpenOutcome) {
    let Matched { filter, generation } = matched;
    if generation == head.generation {
        return (filter, OpenOutcome::Trusted { generation });
    }
    let mut batch = Batcher::new(&filter);
    let caught_up = store.keys_since(generation, &mut |key| batch.push(key));
    let keys = batch.finish();
    match caught_up {
        Ok(to) => (
            filter,
            OpenOutcome::CaughtUp {
                from: generation,
                to,
                keys,
            },
        ),
        Err(e) => (
            filter,
            OpenOutcome::Bypassed(BypassReason::CatchUpFailed(shared(
                StoreError::<S::Error>::Store(e),
            ))),
        ),
    }
}

/// Streams `filter` into a snapshot file bound to `identity` at `head`.
fn write_snapshot(
    path: &Path,
    filter: &AtomicBloomFilter,
    identity: bloom_format::StoreIdentity,
    head: HistoryPoint,
) -> Result<(), WriteError> {
    let mut header = filter
        .current_config()
        .to_header(head.generation, filter.items_inserted());
    header.store = Some(StoreBinding::new(identity, head.digest));
    let file = AtomicFile::create_with(path, WriteOptions::for_snapshot(&header))?;
    let target = file.target().to_path_buf();
    let fail = |e: StreamWriteError| WriteError::Io {
        path: target.clone(),
        action: "writing the temporary file",
        source: e.into(),
    };
    let mut writer = SnapshotWriter::new(file, header).map_err(fail)?;
    filter
        .for_each_payload_chunk(|chunk| writer.write_payload(chunk))
        .map_err(fail)?;
    writer.finish().map_err(fail)?.commit()
}

/// Keys visited one at a time by `keys_since`, inserted into a filter a batch at a time (so
/// that the batch's cache misses overlap) from one reused buffer.
struct Batcher<'a> {
    filter: &'a AtomicBloomFilter,
    bytes: Vec<u8>,
    ends: Vec<usize>,
    keys: u64,
}

impl<'a> Batcher<'a> {
    const KEYS: usize = 256;

    fn new(filter: &'a AtomicBloomFilter) -> Self {
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
        self.filter.insert_all_encoded(self.ends.iter().map(|&end| {
            let key = bytes.get(start..end).unwrap_or_default();
            start = end;
            key
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
