//! [`FilteredStore`]: check-then-confirm over a primary store.

use std::fmt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};

use bloom_core::{
    AllocError, AtomicBloomFilter, BloomFilter, EncodedKey, FilterConfig, FilterParams,
    KeyEncoding, KeyError, ParamsError, PositionRule, Salt,
};
use bloom_format::{DecodeOptions, ReadError, Snapshot, WriteError};

use crate::primary::PrimaryStore;

/// How the filter for a store is made.
#[derive(Clone, Debug, PartialEq)]
pub struct FilterOptions {
    /// The number of keys the filter is planned for. Past it, the false-positive rate climbs
    /// above the target and [`Metrics::over_capacity`] reports it; [`FilteredStore::rebuild`]
    /// then grows the filter.
    pub capacity: u64,
    /// The target false-positive rate at capacity.
    pub false_positive_rate: f64,
    /// The position rule.
    pub rule: PositionRule,
    /// The key encoding, applied to every key before it reaches the filter or the store.
    pub encoding: KeyEncoding,
    /// Which salt a filter gets, and which salts a snapshot may carry.
    pub salt: SaltPolicy,
    /// The largest snapshot payload to read, in bytes.
    pub max_snapshot_bytes: u64,
}

/// Which salt new filters get and which snapshots are accepted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SaltPolicy {
    /// No salt; salted snapshots are incompatible.
    None,
    /// A fresh random salt for every new filter; a snapshot's salt, whatever it is, is kept.
    Random,
    /// This salt exactly.
    Fixed(Salt),
}

impl FilterOptions {
    /// Options for `capacity` keys at false-positive rate `fpr`, with the default rule,
    /// NFC keys and no salt.
    #[must_use]
    pub fn new(capacity: u64, fpr: f64) -> Self {
        Self {
            capacity,
            false_positive_rate: fpr,
            rule: PositionRule::Sha256Double,
            encoding: KeyEncoding::Nfc,
            salt: SaltPolicy::None,
            max_snapshot_bytes: 1 << 32,
        }
    }

    /// The configuration of a new filter planned for `capacity` keys. Generic over the
    /// store's error type so that callers can use `?` directly.
    fn config_for<E>(&self, capacity: u64) -> Result<FilterConfig, StoreError<E>> {
        let mut params =
            FilterParams::for_false_positive_rate(capacity.max(1), self.false_positive_rate)?;
        // A rule with fewer positions than the optimum (sha256-split4: 4) uses all it has.
        if params.hashes() > self.rule.max_hashes() {
            params = FilterParams::new(params.bits(), self.rule.max_hashes())?;
        }
        let salt = match &self.salt {
            SaltPolicy::None => Salt::none(),
            SaltPolicy::Fixed(salt) => salt.clone(),
            SaltPolicy::Random => Salt::random().map_err(|e| StoreError::Salt(e.to_string()))?,
        };
        let config = FilterConfig::new(params)
            .with_encoding(self.encoding)
            .with_salt(salt)
            .with_rule(self.rule)
            .map_err(|e| StoreError::Config(e.to_string()))?;
        Ok(config)
    }

    /// Why a snapshot's configuration cannot be used with these options, if it cannot.
    fn incompatibility(
        &self,
        _header: &bloom_format::Header,
        config: &FilterConfig,
    ) -> Option<String> {
        if config.rule() != self.rule {
            return Some(format!(
                "position rule is {}, configured {}",
                config.rule(),
                self.rule
            ));
        }
        if config.encoding() != self.encoding {
            return Some(format!(
                "key encoding is {}, configured {}",
                config.encoding(),
                self.encoding
            ));
        }
        if config.has_foreign_tables() {
            return Some(format!(
                "Unicode tables are {}, this build has {}",
                config.tables(),
                self.encoding.build_tables()
            ));
        }
        match &self.salt {
            SaltPolicy::None if !config.salt().is_empty() => {
                Some("snapshot is salted, configured no salt".into())
            }
            SaltPolicy::Fixed(salt) if salt != config.salt() => {
                Some("snapshot salt differs from the configured salt".into())
            }
            _ => None,
        }
    }
}

/// Errors of [`FilteredStore`]. A store error never leaves a wrong answer behind: the
/// operation simply did not happen.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError<E> {
    /// The primary store failed.
    #[error("primary store failed: {0}")]
    Store(#[source] E),
    /// The key could not be encoded.
    #[error(transparent)]
    Key(#[from] KeyError),
    /// The filter options are invalid.
    #[error("invalid filter options: {0}")]
    Params(#[from] ParamsError),
    /// The filter options do not fit together.
    #[error("invalid filter options: {0}")]
    Config(String),
    /// No salt could be made.
    #[error("cannot make a random salt: {0}")]
    Salt(String),
    /// The filter could not be allocated.
    #[error(transparent)]
    Alloc(#[from] AllocError),
    /// The snapshot could not be written; the previous snapshot file is unchanged.
    #[error(transparent)]
    Write(#[from] WriteError),
    /// A snapshot was requested while the filter is bypassed: its bits do not cover the store.
    #[error("the filter is bypassed ({0}); rebuild before saving a snapshot")]
    NotTrusted(BypassReason),
}

/// Why the filter is not used to answer "absent".
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum BypassReason {
    /// No snapshot file existed.
    NoSnapshot,
    /// The snapshot could not be read or decoded (corrupt, truncated, unknown version...).
    Unreadable(String),
    /// The snapshot was written with other rules, encoding or salt than configured.
    Incompatible(String),
    /// The snapshot claims a newer generation than the store has: it describes data the
    /// store does not hold (for example after the store was restored from a backup).
    NewerThanStore {
        /// The snapshot's generation.
        snapshot: u64,
        /// The store's generation.
        store: u64,
    },
    /// Catching up from the store failed.
    CatchUpFailed(String),
    /// A rebuild is running.
    Rebuilding,
}

impl fmt::Display for BypassReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoSnapshot => f.write_str("no snapshot"),
            Self::Unreadable(e) => write!(f, "snapshot unreadable: {e}"),
            Self::Incompatible(e) => write!(f, "snapshot incompatible: {e}"),
            Self::NewerThanStore { snapshot, store } => write!(
                f,
                "snapshot generation {snapshot} is newer than the store's {store}"
            ),
            Self::CatchUpFailed(e) => write!(f, "catch-up failed: {e}"),
            Self::Rebuilding => f.write_str("rebuilding"),
        }
    }
}

/// Whether the filter answers "absent" on its own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The filter covers the store: "absent" skips the store.
    Trusted,
    /// Every query goes to the store.
    Bypassed(BypassReason),
}

/// The answer to a membership query, with how it was reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// The trusted filter said absent; the store was not asked.
    AbsentByFilter,
    /// The filter said maybe and the store said no: a false positive.
    FalsePositive,
    /// The filter is bypassed and the store said no.
    AbsentBypassed,
    /// The store has the key.
    Present,
}

impl Lookup {
    /// Whether the key is in the primary store.
    #[must_use]
    pub const fn is_present(self) -> bool {
        matches!(self, Self::Present)
    }
}

/// What [`FilteredStore::open`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OpenOutcome {
    /// The snapshot matched the store's generation.
    Trusted,
    /// The snapshot was older; this many keys were added from the store.
    CaughtUp {
        /// The snapshot's generation.
        from: u64,
        /// The store's generation.
        to: u64,
        /// Keys added.
        keys: u64,
    },
    /// The filter is bypassed; call [`FilteredStore::rebuild`].
    NeedsRebuild(BypassReason),
}

/// What a rebuild did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RebuildReport {
    /// Keys read from the store.
    pub keys_scanned: u64,
    /// The generation the new filter covers.
    pub generation: u64,
    /// The new filter's capacity.
    pub capacity: u64,
}

/// A consistent copy of the counters and the filter state.
#[derive(Clone, Debug, PartialEq)]
pub struct Metrics {
    /// Membership queries answered.
    pub queries: u64,
    /// Queries that went to the store.
    pub store_lookups: u64,
    /// Queries answered "absent" by the filter alone.
    pub lookups_avoided: u64,
    /// Filter "maybe" answers that the store refuted.
    pub false_positives: u64,
    /// Keys inserted through the wrapper.
    pub inserts: u64,
    /// `false_positives / (false_positives + lookups_avoided)`: the filter's observed rate on
    /// keys that were absent, while trusted. `None` before any such query.
    pub observed_false_positive_rate: Option<f64>,
    /// `(X / m)^k` at the current fill.
    pub predicted_false_positive_rate: f64,
    /// `X / m`.
    pub fill_ratio: f64,
    /// Estimated distinct keys in the filter.
    pub estimated_items: f64,
    /// The number of keys the filter was planned for.
    pub capacity: u64,
    /// Whether the estimate passed the capacity: the false-positive rate is degrading, and a
    /// rebuild would grow the filter.
    pub over_capacity: bool,
    /// The current mode.
    pub mode: Mode,
    /// The filter's bit count.
    pub bits: u64,
    /// The filter's positions per key.
    pub hashes: u32,
}

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
    capacity: u64,
    mode: Mode,
    /// The filter a rebuild is filling; inserts set its bits too.
    building: Option<Arc<AtomicBloomFilter>>,
}

/// A membership set over a primary store, accelerated by a Bloom filter that is used only
/// while it can be trusted.
///
/// **Invariant:** a key committed to the primary store is never reported absent. Inserts set
/// the filter's bits *before* the store commit, so every committed key's bits are set; a crash
/// in between leaves only a false positive. A snapshot records the store generation read
/// *before* the bits are copied, so it never claims to cover a key whose bits it lacks. A
/// snapshot that is missing, corrupt, incompatible or newer than the store is never trusted:
/// queries go to the store until [`FilteredStore::rebuild`] has built a filter that covers it.
///
/// All writes to the primary store must go through this wrapper (or be followed by a
/// rebuild); keys written behind its back are not in the filter.
pub struct FilteredStore<S> {
    store: S,
    options: FilterOptions,
    state: RwLock<State>,
    /// Serializes rebuilds: two at once would each install a `building` filter, and the one
    /// replaced first would miss the inserts made after the replacement.
    rebuilding: Mutex<()>,
    counters: Counters,
}

impl<S: PrimaryStore> FilteredStore<S> {
    /// Opens the wrapper, loading the snapshot at `snapshot` if given and comparing it with
    /// the store:
    ///
    /// - same generation: trusted;
    /// - older: catch up from `keys_since`, then trusted;
    /// - missing, corrupt, incompatible or newer than the store: bypassed until
    ///   [`FilteredStore::rebuild`] (see [`FilteredStore::open_and_recover`]).
    ///
    /// # Errors
    /// Invalid options, or the store failing to report its generation.
    pub fn open(
        store: S,
        options: FilterOptions,
        snapshot: Option<&Path>,
    ) -> Result<(Self, OpenOutcome), StoreError<S::Error>> {
        let store_generation = store.generation().map_err(StoreError::Store)?;
        let loaded = match snapshot {
            None => Err(BypassReason::NoSnapshot),
            Some(path) => load(path, &options),
        };
        let (filter, outcome) = match loaded {
            Ok((filter, generation)) if generation > store_generation => (
                filter,
                OpenOutcome::NeedsRebuild(BypassReason::NewerThanStore {
                    snapshot: generation,
                    store: store_generation,
                }),
            ),
            Ok((filter, generation)) if generation == store_generation => {
                (filter, OpenOutcome::Trusted)
            }
            Ok((filter, generation)) => {
                let mut keys = 0u64;
                let caught_up = store.keys_since(generation, &mut |key| {
                    filter.insert_encoded(&EncodedKey::from_encoded(key));
                    keys += 1;
                });
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
                        OpenOutcome::NeedsRebuild(BypassReason::CatchUpFailed(e.to_string())),
                    ),
                }
            }
            Err(reason) => {
                let config = options.config_for(options.capacity)?;
                (
                    AtomicBloomFilter::new(config)?,
                    OpenOutcome::NeedsRebuild(reason),
                )
            }
        };
        let mode = match &outcome {
            OpenOutcome::NeedsRebuild(reason) => Mode::Bypassed(reason.clone()),
            _ => Mode::Trusted,
        };
        // A snapshot of a grown filter holds more than the configured capacity.
        let planned_for = filter.config().bits() as f64 * std::f64::consts::LN_2.powi(2)
            / -options.false_positive_rate.ln();
        let capacity = options.capacity.max(planned_for.floor() as u64);
        let wrapper = Self {
            store,
            options,
            state: RwLock::new(State {
                active: Arc::new(filter),
                capacity,
                mode,
                building: None,
            }),
            rebuilding: Mutex::new(()),
            counters: Counters::default(),
        };
        Ok((wrapper, outcome))
    }

    /// [`FilteredStore::open`], then [`FilteredStore::rebuild`] if the filter is bypassed.
    ///
    /// # Errors
    /// As `open` and `rebuild`.
    pub fn open_and_recover(
        store: S,
        options: FilterOptions,
        snapshot: Option<&Path>,
    ) -> Result<(Self, OpenOutcome), StoreError<S::Error>> {
        let (wrapper, outcome) = Self::open(store, options, snapshot)?;
        if matches!(outcome, OpenOutcome::NeedsRebuild(_)) {
            wrapper.rebuild()?;
        }
        Ok((wrapper, outcome))
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
        self.state
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, State> {
        self.state
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
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

    fn contains_encoded(&self, key: &EncodedKey<'_>) -> Result<Lookup, StoreError<S::Error>> {
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

    fn insert_encoded(&self, key: &EncodedKey<'_>) -> Result<bool, StoreError<S::Error>> {
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
    /// the estimate, which brings the false-positive rate back to the target.
    ///
    /// # Errors
    /// A store error; the previous filter and mode are then kept.
    pub fn rebuild(&self) -> Result<RebuildReport, StoreError<S::Error>> {
        // Holds no data, so a panic in another rebuild leaves nothing inconsistent.
        let _one_at_a_time = self
            .rebuilding
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let capacity = {
            let state = self.read();
            let estimate = state.active.estimated_items();
            if estimate > state.capacity as f64 {
                (estimate * 2.0).ceil() as u64
            } else {
                state.capacity
            }
        };
        let config = self.options.config_for(capacity)?;
        let new = Arc::new(AtomicBloomFilter::new(config)?);
        let start_generation = {
            let mut state = self.write();
            state.building = Some(Arc::clone(&new));
            if let Mode::Bypassed(_) = state.mode {
                state.mode = Mode::Bypassed(BypassReason::Rebuilding);
            }
            // Every insert that missed `building` has committed (it held the read lock).
            self.store.generation()
        };
        let scan = start_generation.and_then(|start| {
            let mut keys = 0u64;
            let reached = self.store.keys_since(0, &mut |key| {
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
                if state.mode == Mode::Bypassed(BypassReason::Rebuilding) {
                    state.mode = Mode::Bypassed(BypassReason::CatchUpFailed(e.to_string()));
                }
                return Err(StoreError::Store(e));
            }
        };
        // Keys committed after the scan started had their bits set directly, so covering the
        // generation at the start is covering the store.
        debug_assert!(reached >= start);
        state.active = new;
        state.capacity = capacity;
        state.mode = Mode::Trusted;
        Ok(RebuildReport {
            keys_scanned: keys,
            generation: reached.max(start),
            capacity,
        })
    }

    /// Writes a snapshot atomically. The generation is read from the store first, then the
    /// bits are copied word by word (readers are not blocked; inserts continue), so the
    /// snapshot covers at least every key committed at that generation.
    ///
    /// # Errors
    /// [`StoreError::NotTrusted`] while bypassed, a store error, or a write error.
    pub fn save_snapshot(&self, path: &Path) -> Result<u64, StoreError<S::Error>> {
        let (copy, generation) = {
            // The read lock keeps a rebuild from switching filters between reading the
            // generation and copying the bits.
            let state = self.read();
            if let Mode::Bypassed(reason) = &state.mode {
                return Err(StoreError::NotTrusted(reason.clone()));
            }
            let generation = self.store.generation().map_err(StoreError::Store)?;
            (state.active.to_filter()?, generation)
        };
        copy.to_snapshot(generation).write_file(path)?;
        Ok(generation)
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

/// Loads and checks a snapshot; any problem becomes the reason to bypass.
fn load(path: &Path, options: &FilterOptions) -> Result<(AtomicBloomFilter, u64), BypassReason> {
    let decode = DecodeOptions::with_max_payload_len(options.max_snapshot_bytes);
    let snapshot = match Snapshot::read_file(path, &decode) {
        Ok(s) => s,
        Err(ReadError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            return Err(BypassReason::NoSnapshot);
        }
        Err(e) => return Err(BypassReason::Unreadable(e.to_string())),
    };
    let filter = BloomFilter::from_snapshot(&snapshot)
        .map_err(|e| BypassReason::Incompatible(e.to_string()))?;
    if let Some(why) = options.incompatibility(snapshot.header(), filter.config()) {
        return Err(BypassReason::Incompatible(why));
    }
    Ok((
        AtomicBloomFilter::from(filter),
        snapshot.header().dataset_generation.get(),
    ))
}
