//! What the wrapper reports: its mode and why, lookups, open and rebuild outcomes, metrics.

use std::sync::Arc;

use bloom_core::{KeyEncoding, Layout, PositionRule, SnapshotError, UnicodeTables};
use bloom_format::{DatasetGeneration, ReadError, StoreIdentity};

/// An error kept inside a reason or an outcome: cheap to clone, and its source chain intact.
pub(crate) type KeptError = Arc<dyn std::error::Error + Send + Sync + 'static>;

/// Why a snapshot's filter cannot answer for these options.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Incompatibility {
    /// This build does not implement the snapshot's rules or parameters.
    #[error(transparent)]
    Unsupported(#[from] SnapshotError),
    /// Another layout than configured.
    #[error("layout is {snapshot}, configured {configured}")]
    Layout {
        /// The snapshot's.
        snapshot: Layout,
        /// The configured one.
        configured: Layout,
    },
    /// Another position rule than configured.
    #[error("position rule is {snapshot}, configured {configured}")]
    Rule {
        /// The snapshot's.
        snapshot: PositionRule,
        /// The configured one.
        configured: PositionRule,
    },
    /// Another key encoding than configured.
    #[error("key encoding is {snapshot}, configured {configured}")]
    Encoding {
        /// The snapshot's.
        snapshot: KeyEncoding,
        /// The configured one.
        configured: KeyEncoding,
    },
    /// The bits were built with other Unicode tables than this build's.
    #[error("Unicode tables are {snapshot}; this build has {build}")]
    UnicodeTables {
        /// The snapshot's record.
        snapshot: UnicodeTables,
        /// This build's.
        build: UnicodeTables,
    },
    /// The snapshot is salted and no salt is configured.
    #[error("snapshot is salted, configured no salt")]
    Salted,
    /// The snapshot's salt differs from the configured one.
    #[error("snapshot salt differs from the configured salt")]
    SaltDiffers,
    /// A counting snapshot for a plain filter, or the other way round.
    #[error("{}", if *snapshot { "snapshot is a counting filter, configured a plain one" } else { "snapshot is a plain filter, configured a counting one" })]
    Counting {
        /// Whether the snapshot is a counting filter.
        snapshot: bool,
    },
}

/// Why the filter is not used to answer "absent".
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BypassReason {
    /// No snapshot file existed (or none was given).
    #[error("no snapshot")]
    NoSnapshot,
    /// The snapshot could not be read or decoded: corrupt, truncated, over the size limit,
    /// an unknown version, or not a regular file.
    #[error("snapshot unreadable: {0}")]
    Unreadable(Arc<ReadError>),
    /// The snapshot was written with other rules, encoding, tables or salt than configured.
    #[error("snapshot incompatible: {0}")]
    Incompatible(Incompatibility),
    /// The snapshot is not bound to a store (format version 1, or written by the CLI): it
    /// cannot prove which history it covers.
    #[error("snapshot is not bound to a store (format version 1, or built outside bloom-store)")]
    NotBound,
    /// The snapshot belongs to another store: the database was recreated, or a snapshot of
    /// another database was put in its place.
    #[error("snapshot belongs to store {snapshot}, this store is {store}")]
    OtherStore {
        /// The snapshot's store identity.
        snapshot: StoreIdentity,
        /// This store's identity.
        store: StoreIdentity,
    },
    /// The snapshot claims a newer generation than the store has: it describes commits the
    /// store does not hold (lost in a power loss, or the store was restored from a backup).
    #[error("snapshot generation {snapshot} is newer than the store's {store}")]
    NewerThanStore {
        /// The snapshot's generation.
        snapshot: DatasetGeneration,
        /// The store's generation.
        store: DatasetGeneration,
    },
    /// The store's history up to the snapshot's generation is not the one the snapshot
    /// covers: commits were lost and others made since, the store was restored from an
    /// older copy and written to, or it is a copy that went its own way.
    #[error(
        "the store's history up to generation {generation} differs from the one the filter covers: it was rolled back, restored or copied since"
    )]
    HistoryDiverged {
        /// The generation at which the filter's history was checked (the snapshot's, or
        /// the last point a save, open or rebuild verified): the histories part at or before
        /// it.
        generation: DatasetGeneration,
    },
    /// The store went back behind what the filter holds, under an open wrapper: its newest
    /// commits were lost (a power loss, a restore, a failover to a replica that lagged).
    /// Found by a save.
    #[error(
        "the store is at generation {store}, behind generation {holds} that the filter holds: its newest commits were lost (rolled back, restored or failed over); rebuild"
    )]
    RolledBack {
        /// The generation the filter holds every change up to.
        holds: DatasetGeneration,
        /// The store's generation.
        store: DatasetGeneration,
    },
    /// The wrapper's claim on the store is lost for good ([`ClaimStatus::Lost`]): the store
    /// was replaced under the running wrapper (another database or file under its name,
    /// another identity, a history that went back or another way), or another wrapper took
    /// it. Never trusted again: reopen the wrapper.
    ///
    /// [`ClaimStatus::Lost`]: crate::ClaimStatus::Lost
    #[error("the store's claim is lost for good ({why}); reopen the wrapper")]
    ClaimLost {
        /// What happened, as the store reported it.
        why: String,
    },
    /// Catching up from the store at open failed.
    #[error("catch-up from the store failed: {0}")]
    CatchUpFailed(Arc<dyn std::error::Error + Send + Sync + 'static>),
    /// The last rebuild failed (its error was returned by
    /// [`FilteredStore::rebuild`](crate::FilteredStore::rebuild)); call it again.
    #[error("the last rebuild failed")]
    RebuildFailed,
    /// A rebuild is running.
    #[error("rebuilding")]
    Rebuilding,
    /// A counting filter was asked to take off a key the store removed, whose insert it had
    /// counted, and said the key was absent: its counts no longer describe the store (a
    /// snapshot written with wrong counts, say). It is never trusted again; a rebuild counts
    /// afresh.
    #[error(
        "the counting filter's counts do not match the store (the removal at generation {generation} found the key absent); rebuild it"
    )]
    CountsDiverged {
        /// The generation of the removal.
        generation: DatasetGeneration,
    },
}

impl BypassReason {
    /// A short stable name for the reason, as events and the
    /// [`bloom_bypasses_total`](crate::telemetry::names::BYPASSES) metric's `reason` label
    /// carry it: `no_snapshot`, `unreadable`, `incompatible`, `not_bound`, `other_store`,
    /// `newer_than_store`, `history_diverged`, `rolled_back`, `claim_lost`,
    /// `catch_up_failed`, `rebuild_failed`, `rebuilding` or `counts_diverged`. (The metric
    /// also counts `claim_behind`, writes behind the wrapper's back, and a shared filter's
    /// Redis states: see docs/operations.md.)
    #[must_use]
    pub const fn code(&self) -> &'static str {
        match self {
            Self::NoSnapshot => "no_snapshot",
            Self::Unreadable(_) => "unreadable",
            Self::Incompatible(_) => "incompatible",
            Self::NotBound => "not_bound",
            Self::OtherStore { .. } => "other_store",
            Self::NewerThanStore { .. } => "newer_than_store",
            Self::HistoryDiverged { .. } => "history_diverged",
            Self::RolledBack { .. } => "rolled_back",
            Self::ClaimLost { .. } => "claim_lost",
            Self::CatchUpFailed(_) => "catch_up_failed",
            Self::RebuildFailed => "rebuild_failed",
            Self::Rebuilding => "rebuilding",
            Self::CountsDiverged { .. } => "counts_diverged",
        }
    }
}

/// Whether the filter answers "absent" on its own.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Mode {
    /// The filter covers the store: "absent" skips the store.
    Trusted,
    /// Every query goes to the store.
    Bypassed(BypassReason),
}

impl Mode {
    /// Whether the filter answers "absent" on its own.
    #[must_use]
    pub const fn is_trusted(&self) -> bool {
        matches!(self, Self::Trusted)
    }
}

/// The answer to a membership query, with how it was reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
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

    /// Whether the key is not in the primary store (whichever way that was found: by the
    /// trusted filter alone, or by the store).
    #[must_use]
    pub const fn is_absent(self) -> bool {
        !self.is_present()
    }
}

/// What happened to the snapshot file after a rebuild at open.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum SnapshotRefresh {
    /// A fresh snapshot of the rebuilt filter replaced the old file.
    Saved(DatasetGeneration),
    /// No snapshot path was given.
    NoPath,
    /// Writing it failed (the rebuilt filter is trusted all the same; the stale file can
    /// never be trusted, since it does not match the store's history).
    Failed(Arc<dyn std::error::Error + Send + Sync + 'static>),
}

/// What [`FilteredStore::open`](crate::FilteredStore::open) and
/// [`FilteredStore::open_and_recover`](crate::FilteredStore::open_and_recover) found and did.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum OpenOutcome {
    /// The snapshot matched the store's history and generation.
    Trusted {
        /// The generation it covers.
        generation: DatasetGeneration,
    },
    /// The snapshot matched the store's history up to its generation; the keys committed
    /// since were added from the store.
    CaughtUp {
        /// The snapshot's generation.
        from: DatasetGeneration,
        /// The store's generation.
        to: DatasetGeneration,
        /// Keys added.
        keys: u64,
        /// Removals replayed: taken off a counting filter, or left as stale bits in a plain
        /// one ([`Metrics::stale_removals`]).
        removals: u64,
    },
    /// The filter is bypassed; call [`FilteredStore::rebuild`](crate::FilteredStore::rebuild).
    Bypassed(BypassReason),
    /// The snapshot could not be used, so the filter was rebuilt from the store and is
    /// trusted, and a fresh snapshot was written (see `snapshot`).
    Rebuilt {
        /// Why the snapshot was not used.
        reason: BypassReason,
        /// What the rebuild did.
        report: RebuildReport,
        /// What became of the snapshot file.
        snapshot: SnapshotRefresh,
    },
}

impl OpenOutcome {
    /// Whether the filter is trusted after this outcome.
    #[must_use]
    pub const fn is_trusted(&self) -> bool {
        !matches!(self, Self::Bypassed(_))
    }
}

/// What a rebuild did.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RebuildReport {
    /// Keys read from the store.
    pub keys_scanned: u64,
    /// The generation the new filter covers.
    pub generation: DatasetGeneration,
    /// The new filter's capacity.
    pub capacity: u64,
    /// Whether the capacity was cut to fit `max_snapshot_bytes`.
    pub capacity_limited: bool,
}

impl RebuildReport {
    /// A rebuild that read `keys_scanned` keys into a filter for `capacity` keys (cut to fit
    /// a size limit when `capacity_limited`), covering the store up to `generation`: for a
    /// wrapper of another crate (bloom-redis's shared filter) to report its rebuild as this
    /// crate's does.
    #[must_use]
    pub fn new(
        keys_scanned: u64,
        generation: DatasetGeneration,
        capacity: u64,
        capacity_limited: bool,
    ) -> Self {
        Self {
            keys_scanned,
            generation,
            capacity,
            capacity_limited,
        }
    }
}

/// A consistent copy of the counters and the filter state.
#[derive(Clone, Debug)]
#[non_exhaustive]
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
    /// Keys removed through the wrapper (that the store had).
    pub removals: u64,
    /// For a plain filter, removed keys whose bits it still holds, as seen by this wrapper
    /// (removals through it and removals replayed at open) since the filter was built or
    /// loaded: each is a stale "maybe" confirmed absent by the store. The filter is rebuilt
    /// when its estimated false-positive rate passes the target. Always 0 for a counting
    /// filter, which takes removed keys off.
    pub stale_removals: u64,
    /// Rebuilds started by [`FilteredStore::remove`](crate::FilteredStore::remove) (for a
    /// plain filter past its target rate) that failed; the filter was kept and the rebuild is
    /// tried again after more removals. Call [`FilteredStore::rebuild`](crate::FilteredStore::rebuild)
    /// to see the error.
    pub failed_automatic_rebuilds: u64,
    /// Whether the filter is a counting filter.
    pub counting: bool,
    /// For a counting filter, counters stuck at 15 (each a position that stays "maybe" for
    /// good); 0 for a plain filter.
    pub saturated_counters: u64,
    /// The filter's measured rate on keys that were absent, while it answered: the false
    /// positives over those and the lookups avoided, counted since this filter was built or
    /// loaded (a rebuild starts afresh). `None` before any such query.
    pub observed_false_positive_rate: Option<f64>,
    /// `(X / m)^k` at the current fill (`X` the set bits, or the counters above zero).
    pub predicted_false_positive_rate: f64,
    /// `X / m`.
    pub fill_ratio: f64,
    /// Estimated distinct keys in the filter.
    pub estimated_items: f64,
    /// The number of keys the filter was planned for.
    pub capacity: u64,
    /// The false-positive rate the filter was planned for
    /// ([`FilterOptions::false_positive_rate`](crate::FilterOptions::false_positive_rate)).
    pub target_false_positive_rate: f64,
    /// The estimated rate past which the filter is over its target: the target plus ten
    /// standard deviations of the rate of filters of its layout and size
    /// ([`bloom_core::Capacity::rate_limit`]), so that a filter filled exactly to its plan is
    /// not called over by chance.
    pub false_positive_rate_limit: f64,
    /// Keys that still fit the plan: the capacity less the estimated items, 0 once over.
    pub remaining_capacity: u64,
    /// Whether the predicted false-positive rate passed
    /// [`Metrics::false_positive_rate_limit`]: "maybe" answers, each a store lookup, come more
    /// often than planned. Also catches bits the item estimate does not explain (removed
    /// keys a plain filter still holds).
    pub over_target_rate: bool,
    /// Whether the false positives measured since this filter was built or loaded (of the
    /// queries for absent keys it answered) pass the target rate by more than chance allows
    /// ([`bloom_core::ObservedRate::passes`]: at least 10 of them, and a chance below
    /// `e^-30` at the target). "Maybe" answers, each a store lookup, come more often than
    /// planned: the filter is overfilled, holds removed keys' bits, or one absent key is asked
    /// again and again. [`FilteredStore::rebuild`](crate::FilteredStore::rebuild) makes a
    /// filter for the store's keys as they are.
    pub observed_over_target: bool,
    /// Whether the filter is past its plan: the estimated items passed the capacity, or
    /// [`Metrics::over_target_rate`]. The filter still answers correctly, only with more
    /// store lookups; [`FilteredStore::rebuild`](crate::FilteredStore::rebuild) grows it
    /// (unless [`Metrics::capacity_limited`]).
    pub over_capacity: bool,
    /// Whether the filter's capacity was cut to fit `max_snapshot_bytes`: a rebuild cannot
    /// grow it further, and the false-positive rate stays above the target once the store
    /// passes the capacity. Raise the limit to grow.
    pub capacity_limited: bool,
    /// The current mode.
    pub mode: Mode,
    /// The filter's bit count.
    pub bits: u64,
    /// The filter's positions per key.
    pub hashes: u32,
}
