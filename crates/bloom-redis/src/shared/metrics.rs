//! [`SharedMetrics`]: what one [`SharedFilteredStore`] counted, and how the shared filter
//! stands against the plan it was created with.

use std::sync::{Mutex, PoisonError};

use bloom_core::ObservedRate;
use bloom_store::telemetry::{PlanStanding, Standing, Telemetry};
use bloom_store::{LookupCounts, LookupTally, PrimaryStore};

use super::{SharedFilteredStore, reason_code};
use crate::error::RedisFilterError;
use crate::filter::{Info, RedisFilter};

/// This process's counts, exported with the events as the filter `name`'s telemetry.
pub(super) struct Counters {
    pub(super) telemetry: Telemetry,
    pub(super) lookups: LookupCounts,
    measured: Mutex<Measured>,
}

/// What this process measured on the shared filter installed now, and how much of it went
/// into the filter's record in Redis.
#[derive(Default)]
struct Measured {
    /// The creation id of the filter the measurements are of (`None` before one).
    creation: Option<String>,
    /// The lookups counted before it was installed.
    since: LookupTally,
    /// The lookups counted when its record was last added to.
    recorded: LookupTally,
}

impl Counters {
    pub(super) fn new(name: &str) -> Self {
        let telemetry = Telemetry::new(name);
        Self {
            lookups: LookupCounts::exported(&telemetry),
            telemetry,
            measured: Mutex::new(Measured::default()),
        }
    }

    fn measured(&self) -> std::sync::MutexGuard<'_, Measured> {
        self.measured.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A filter was installed: measurements start afresh when it is another filter than
    /// the one measured so far (what was measured described other bits), or after a
    /// rebuild (`rebuilt`: new bits in the same filter).
    pub(super) fn installed(&self, filter: Option<&RedisFilter>, rebuilt: bool) {
        let Some(creation) = filter.map(|f| f.creation.hex()) else {
            return;
        };
        let mut measured = self.measured();
        if rebuilt || measured.creation.as_deref() != Some(creation.as_str()) {
            let now = self.lookups.tally();
            *measured = Measured {
                creation: Some(creation),
                since: now,
                recorded: now,
            };
        }
    }

    /// The false positives measured on the installed filter, of the lookups `now`.
    fn observed(&self, now: &LookupTally) -> ObservedRate {
        now.since(&self.measured().since).observed()
    }

    /// Adds what this process measured on `filter` since the last time to the filter's
    /// record in Redis. A failure (Redis unreachable, a user allowed no writes) keeps the
    /// counts for the next call.
    fn record(&self, filter: &RedisFilter, now: LookupTally) {
        let mut measured = self.measured();
        if measured.creation.as_deref() != Some(filter.creation.hex().as_str()) {
            return;
        }
        let delta = now.since(&measured.recorded).observed();
        if delta.absent == 0 {
            return;
        }
        match filter.record_observed(delta.false_positives, delta.absent) {
            Ok(()) => measured.recorded = now,
            Err(e) => tracing::debug!(
                target: "bloom",
                filter = filter.name(),
                error = %e,
                "the measured false positives could not be added to the shared filter's record",
            ),
        }
    }
}

/// What [`SharedFilteredStore::metrics`] reports: this process's counts since it opened, and
/// the shared filter as Redis holds it (counted by Redis, for every process at once).
#[derive(Debug)]
#[non_exhaustive]
pub struct SharedMetrics {
    /// Membership queries answered by this process.
    pub queries: u64,
    /// Queries that went to the store.
    pub store_lookups: u64,
    /// Queries answered "absent" by the shared filter alone.
    pub lookups_avoided: u64,
    /// Filter "maybe" answers that the store refuted.
    pub false_positives: u64,
    /// Keys this process committed that the store did not have.
    pub inserts: u64,
    /// The false positives this process measured on the shared filter installed now (since
    /// it was installed: a filter rebuilt or created again starts afresh), of the queries
    /// for absent keys it answered.
    pub observed: ObservedRate,
    /// `observed`'s rate: `None` before any such query.
    pub observed_false_positive_rate: Option<f64>,
    /// Whether this process answers from the shared filter.
    pub trusted: bool,
    /// The shared filter's state ([`RedisFilter::info`](crate::RedisFilter::info): its set
    /// bits, estimates, and [`Info::capacity`], how it stands against the plan it was created
    /// with), or why it could not be read: no filter attached, Redis unreachable, a shard
    /// lost.
    pub filter: Result<Info, RedisFilterError>,
}

impl SharedMetrics {
    /// Whether this process's observed false positives pass the shared filter's planned rate
    /// by more than chance allows ([`bloom_core::ObservedRate::passes`]), as
    /// `bloom_store::Metrics::observed_over_target` says it for one process's filter.
    /// `false` when the filter could not be read or records no plan.
    #[must_use]
    pub fn observed_over_target(&self) -> bool {
        self.filter
            .as_ref()
            .ok()
            .and_then(|info| info.capacity)
            .is_some_and(|c| self.observed.passes(c.plan.false_positive_rate))
    }

    /// Whether the shared filter is past the plan it was created with: more items than its
    /// capacity, or an estimated false-positive rate above the target by more than the
    /// estimate's noise. Queries then go to the store more often than planned (never
    /// wrongly); the remedy is a larger filter: delete it and
    /// [`SharedFilteredStore::rebuild`] with a larger configuration (writers fail against
    /// the deleted filter and attach to the new one). `false` when the filter could not be
    /// read or records no plan.
    #[must_use]
    pub fn over_capacity(&self) -> bool {
        self.filter
            .as_ref()
            .ok()
            .and_then(|info| info.capacity)
            .is_some_and(|c| c.is_over())
    }
}

impl<S: PrimaryStore> SharedFilteredStore<S> {
    /// This process's counts and the shared filter's state. The filter's part asks Redis
    /// (one `BITCOUNT` per shard, pipelined, and the metadata): call it as a gauge is
    /// scraped, not on every query. It also sets the gauges of the filter's standing in the
    /// `metrics` recorder (`bloom_store::telemetry`), and adds what this process measured
    /// since its last call to the filter's record of every process's measurements
    /// ([`Info::observed`]).
    pub fn metrics(&self) -> SharedMetrics {
        let c = &self.counters;
        // The store's claim, as a lookup would find it (a change is told to the telemetry).
        self.claim_holds();
        let lookups = c.lookups.tally();
        let observed = c.observed(&lookups);
        // Under the state's lock until the gauges are set, so that no verdict made meanwhile
        // is overwritten by this one's view of the mode.
        let state = self.read();
        if let Some(filter) = &state.filter {
            c.record(filter, lookups);
        }
        let filter = match &state.filter {
            Some(filter) => {
                let info = filter.info();
                // Whether Redis answers, as a query would find it: a scrape with no queries
                // still sees an outage, and its end.
                match &info {
                    Err(e) if !(e.is_lost_state() || e.is_unverified()) => c
                        .telemetry
                        .answered(false, || (reason_code(e), e.to_string())),
                    Err(_) => {}
                    Ok(_) => c.telemetry.answered(true, || ("", String::new())),
                }
                info
            }
            // Why no filter is attached (Redis unreachable, the filter lost or absent),
            // as `SharedError::NoFilter` says it.
            None => Err(RedisFilterError::Unavailable(format!(
                "no shared filter is attached: {}",
                state.unusable
            ))),
        };
        let metrics = SharedMetrics {
            queries: lookups.queries,
            store_lookups: lookups.store_lookups,
            lookups_avoided: lookups.lookups_avoided,
            false_positives: lookups.false_positives,
            inserts: c.telemetry.inserts.get(),
            observed,
            observed_false_positive_rate: observed.rate(),
            trusted: state.trusted,
            filter,
        };
        if let Some(standing) = metrics.standing() {
            c.telemetry.standing(&standing);
        }
        drop(state);
        metrics
    }
}

impl SharedMetrics {
    /// The gauges' figures, when the filter could be read.
    fn standing(&self) -> Option<Standing> {
        let info = self.filter.as_ref().ok()?;
        let mut standing = Standing::default();
        standing.trusted = self.trusted;
        standing.fill_ratio = info.set_bits as f64 / info.header.bit_count.max(1) as f64;
        standing.estimated_items = info.estimated_items;
        standing.predicted_false_positive_rate = info.estimated_false_positive_rate;
        standing.observed_false_positive_rate = self.observed_false_positive_rate;
        standing.plan = info.capacity.map(|capacity| {
            let mut plan = PlanStanding::default();
            plan.capacity = capacity.plan.capacity;
            plan.remaining_capacity = capacity.remaining();
            plan.target_false_positive_rate = capacity.plan.false_positive_rate;
            plan.observed_over_target = self.observed_over_target();
            plan.over_capacity = capacity.is_over();
            plan
        });
        Some(standing)
    }
}
