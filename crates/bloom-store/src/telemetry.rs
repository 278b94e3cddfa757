//! What a wrapper tells an operator: each trust decision and repair as a [`tracing`] event,
//! and its counts and its filter's state through the [`metrics`] facade, for whichever
//! subscriber and exporter the service installs. Both cost a load and a branch per call site
//! while none is installed.
//!
//! Every metric is listed in [`METRICS`], with its kind, labels and meaning (docs/operations.md
//! says what to do when each moves). Each wrapper labels its metrics `filter` with its name
//! ([`FilterOptions::with_name`](crate::FilterOptions::with_name); a shared filter's is its
//! Redis name).
//!
//! **Install the recorder before opening the wrapper:** the wrapper registers its counters
//! and gauges as it opens, as the `metrics` crate's handles are meant to be used, and a
//! handle registered while no recorder is installed stays a no-op.
//!
//! Counters move as the events happen. The gauges of the filter's state (its fill, estimated
//! items, predicted and observed false-positive rates) are set at open, after a rebuild, and
//! at each call of the wrapper's `metrics()`: call it when the endpoint is scraped, or on a
//! timer. The trust gauge also moves with each trust decision.

use std::fmt::Display;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};

use bloom_format::DatasetGeneration;

use metrics::{Counter, Gauge, Label};

use crate::outcome::{Metrics, RebuildReport};

/// What kind of metric a [`MetricInfo`] describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum MetricKind {
    /// Only goes up (Prometheus: `_total`).
    Counter,
    /// Set to the current value.
    Gauge,
    /// A distribution of measurements, in seconds.
    Histogram,
}

/// One metric this workspace records: its name, kind, labels and meaning.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct MetricInfo {
    /// The name, as exported.
    pub name: &'static str,
    /// Its kind.
    pub kind: MetricKind,
    /// Its label keys.
    pub labels: &'static [&'static str],
    /// What it measures.
    pub help: &'static str,
}

macro_rules! catalogue {
    ($($(#[$doc:meta])* $constant:ident = $name:literal, $kind:ident, [$($label:literal),*], $help:literal;)*) => {
        /// The metric names, as constants.
        pub mod names {
            $(
                $(#[$doc])*
                pub const $constant: &str = $name;
            )*
        }

        /// Every metric bloom records (the wrappers of bloom-store and bloom-redis, the Redis
        /// round trips, and bloom-postgres's queries and pool).
        pub const METRICS: &[MetricInfo] = &[
            $(MetricInfo {
                name: $name,
                kind: MetricKind::$kind,
                labels: &[$($label),*],
                help: $help,
            },)*
        ];
    };
}

catalogue! {
    /// Membership queries answered.
    QUERIES = "bloom_queries_total", Counter, ["filter"],
        "Membership queries answered by this process.";
    /// Queries that went to the primary store.
    STORE_LOOKUPS = "bloom_store_lookups_total", Counter, ["filter"],
        "Queries that went to the primary store (a filter 'maybe', or the filter bypassed).";
    /// Queries the filter answered "absent" alone.
    LOOKUPS_AVOIDED = "bloom_lookups_avoided_total", Counter, ["filter"],
        "Queries answered 'absent' by the trusted filter alone, with no store lookup.";
    /// "Maybe" answers the store refuted.
    FALSE_POSITIVES = "bloom_false_positives_total", Counter, ["filter"],
        "Filter 'maybe' answers that the store refuted: measured false positives.";
    /// Keys inserted through the wrapper.
    INSERTS = "bloom_inserts_total", Counter, ["filter"],
        "Keys inserted through the wrapper (for a shared filter, those the store did not have).";
    /// Keys removed that the store had.
    REMOVALS = "bloom_removals_total", Counter, ["filter"],
        "Keys removed through the wrapper that the store had.";
    /// The filter stopped being trusted, by reason.
    BYPASSES = "bloom_bypasses_total", Counter, ["filter", "reason"],
        "Times the filter stopped answering 'absent' (every query then asks the store), by reason.";
    /// Rebuilds, by result.
    REBUILDS = "bloom_rebuilds_total", Counter, ["filter", "result"],
        "Rebuilds of the filter from the store, by result (ok, failed).";
    /// Keys taken in from the store by catch-ups.
    CATCH_UP_KEYS = "bloom_catch_up_keys_total", Counter, ["filter"],
        "Keys committed behind the filter's back (or while it was away) that a catch-up took in.";
    /// Whether the filter answers "absent" alone.
    TRUSTED = "bloom_trusted", Gauge, ["filter"],
        "1 while the filter is trusted (answers 'absent' alone), 0 while every query asks the store.";
    /// The share of bits set.
    FILL_RATIO = "bloom_fill_ratio", Gauge, ["filter"],
        "The share of the filter's bits (or counters) set.";
    /// Distinct keys estimated from the fill.
    ESTIMATED_ITEMS = "bloom_estimated_items", Gauge, ["filter"],
        "Distinct keys in the filter, estimated from its fill.";
    /// The keys the filter was planned for.
    CAPACITY = "bloom_capacity", Gauge, ["filter"],
        "The number of keys the filter was planned for.";
    /// Keys that still fit the plan.
    REMAINING_CAPACITY = "bloom_remaining_capacity", Gauge, ["filter"],
        "Keys that still fit the plan: the capacity less the estimated items, 0 once over.";
    /// The planned false-positive rate.
    TARGET_FALSE_POSITIVE_RATE = "bloom_target_false_positive_rate", Gauge, ["filter"],
        "The false-positive rate the filter was planned for.";
    /// The rate predicted from the fill.
    PREDICTED_FALSE_POSITIVE_RATE = "bloom_predicted_false_positive_rate", Gauge, ["filter"],
        "The false-positive rate predicted from the filter's fill.";
    /// The rate measured on absent keys.
    OBSERVED_FALSE_POSITIVE_RATE = "bloom_observed_false_positive_rate", Gauge, ["filter"],
        "False positives over the queries for absent keys the filter answered, measured by this process (absent before the first).";
    /// Whether the measured rate passed the target by more than chance allows.
    OBSERVED_OVER_TARGET = "bloom_observed_over_target", Gauge, ["filter"],
        "1 when the measured false positives pass the target rate by more than chance allows (at least 10, and a chance below e^-30): rebuild.";
    /// Whether the filter is past its plan.
    OVER_CAPACITY = "bloom_over_capacity", Gauge, ["filter"],
        "1 when the filter is past its plan (more keys than its capacity, or a predicted rate over the target by more than noise): rebuild larger.";
    /// Redis operations, as the caller waited for them.
    REDIS_ROUND_TRIP_SECONDS = "bloom_redis_round_trip_seconds", Histogram, [],
        "The time a caller waited for one Redis operation (a command or a pipeline, redirects and retries included), in seconds.";
    /// Redis operations that failed.
    REDIS_ERRORS = "bloom_redis_errors_total", Counter, ["kind"],
        "Redis operations that failed, by kind (timeout, failed: a connection refused or lost, an error reply, a cluster that kept redirecting).";
    /// PostgreSQL statements, by operation.
    POSTGRES_QUERY_SECONDS = "bloom_postgres_query_seconds", Histogram, ["operation"],
        "The time of one PostgreSQL statement, by operation (contains, present_of, append, head, keys_page, ...), in seconds, pool wait excluded.";
    /// Waits for a pooled connection.
    POSTGRES_POOL_WAIT_SECONDS = "bloom_postgres_pool_wait_seconds", Histogram, [],
        "The time a caller waited for a pooled PostgreSQL connection, in seconds.";
    /// Checkouts that found the pool exhausted.
    POSTGRES_POOL_EXHAUSTED = "bloom_postgres_pool_exhausted_total", Counter, ["outcome"],
        "Checkouts that found every pooled connection in use, by outcome (waited, timed_out).";
}

/// Describes every metric of [`METRICS`] to the recorder installed now (its help text, and
/// seconds as the histograms' unit), for exporters that show them (Prometheus's `# HELP`).
/// Each wrapper calls it as it opens; call it yourself to describe them before that.
pub fn describe() {
    metrics::with_recorder(|recorder| {
        for metric in METRICS {
            let (name, help) = (metrics::KeyName::from(metric.name), metric.help.into());
            match metric.kind {
                MetricKind::Counter => recorder.describe_counter(name, None, help),
                MetricKind::Gauge => recorder.describe_gauge(name, None, help),
                MetricKind::Histogram => {
                    recorder.describe_histogram(name, Some(metrics::Unit::Seconds), help);
                }
            }
        }
    });
}

/// [`Telemetry::claim_checked`]'s states of the store's claim.
const CLAIM_HELD: u8 = 0;
const CLAIM_UNCONFIRMED: u8 = 1;
const CLAIM_BEHIND: u8 = 2;

/// A count one wrapper keeps for its `metrics()` and exports through the facade.
#[derive(Debug)]
pub struct Count {
    local: AtomicU64,
    exported: Counter,
}

impl Default for Count {
    /// A count exported nowhere.
    fn default() -> Self {
        Self {
            local: AtomicU64::new(0),
            exported: Counter::noop(),
        }
    }
}

impl Count {
    /// The count `name`, labelled `labels`, registered with the recorder installed now.
    pub(crate) fn registered(name: &'static str, labels: &[Label]) -> Self {
        Self {
            local: AtomicU64::new(0),
            exported: metrics::counter!(name, labels.to_vec()),
        }
    }

    /// Adds `n`.
    #[inline]
    pub fn add(&self, n: u64) {
        self.local.fetch_add(n, Ordering::Relaxed);
        self.exported.increment(n);
    }

    /// The count so far.
    #[inline]
    #[must_use]
    pub fn get(&self) -> u64 {
        self.local.load(Ordering::Relaxed)
    }

    /// Sets the kept count (a wrapper's counts replayed at open), exporting the difference.
    pub fn set(&self, n: u64) {
        let before = self.local.swap(n, Ordering::Relaxed);
        self.exported.increment(n.saturating_sub(before));
    }
}

/// How a filter stands, for its gauges: what a wrapper's `metrics()` reports.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct Standing {
    /// The share of bits (or counters) set.
    pub fill_ratio: f64,
    /// Distinct keys estimated from the fill.
    pub estimated_items: f64,
    /// The rate predicted from the fill.
    pub predicted_false_positive_rate: f64,
    /// The rate measured on absent keys, if any were asked.
    pub observed_false_positive_rate: Option<f64>,
    /// How it stands against the plan it records, if it records one (a filter in Redis
    /// created without a plan records none; its plan's gauges are then left unset).
    pub plan: Option<PlanStanding>,
}

/// How a filter stands against its plan.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct PlanStanding {
    /// The keys it was planned for.
    pub capacity: u64,
    /// Keys that still fit the plan.
    pub remaining_capacity: u64,
    /// The planned rate.
    pub target_false_positive_rate: f64,
    /// Whether the measured rate passed the target by more than chance allows.
    pub observed_over_target: bool,
    /// Whether the filter is past its plan.
    pub over_capacity: bool,
}

impl From<&Metrics> for Standing {
    fn from(m: &Metrics) -> Self {
        Self {
            fill_ratio: m.fill_ratio,
            estimated_items: m.estimated_items,
            predicted_false_positive_rate: m.predicted_false_positive_rate,
            observed_false_positive_rate: m.observed_false_positive_rate,
            plan: Some(PlanStanding {
                capacity: m.capacity,
                remaining_capacity: m.remaining_capacity,
                target_false_positive_rate: m.target_false_positive_rate,
                observed_over_target: m.observed_over_target,
                over_capacity: m.over_capacity,
            }),
        }
    }
}

/// The handles one wrapper records through, registered once as it opens, and its events.
/// Wrappers of other crates (bloom-redis's shared filter) report through it too, so that
/// every wrapper's events and metrics read alike.
#[derive(Debug)]
pub struct Telemetry {
    filter: String,
    labels: Vec<Label>,
    /// Keys inserted through the wrapper.
    pub inserts: Count,
    /// Keys removed that the store had.
    pub removals: Count,
    catch_up_keys: Counter,
    trusted: Gauge,
    gauges: StandingGauges,
    /// Whether the last standing was over its target, so that drift is logged once as it
    /// starts.
    drifting: AtomicBool,
    /// The store's claim at the last look (`CLAIM_*`), so that a change is logged once.
    claim: AtomicU8,
}

#[derive(Debug)]
struct StandingGauges {
    fill_ratio: Gauge,
    estimated_items: Gauge,
    capacity: Gauge,
    remaining_capacity: Gauge,
    target: Gauge,
    predicted: Gauge,
    observed: Gauge,
    observed_over_target: Gauge,
    over_capacity: Gauge,
}

impl Default for Telemetry {
    /// Telemetry for a filter named `default`.
    fn default() -> Self {
        Self::new("default")
    }
}

impl Telemetry {
    /// The handles of the filter `filter` (its `filter` label), registered with the recorder
    /// installed now, which is also given [`METRICS`]' descriptions.
    #[must_use]
    pub fn new(filter: &str) -> Self {
        describe();
        let labels = vec![Label::new("filter", filter.to_owned())];
        let gauge = |name: &'static str| metrics::gauge!(name, labels.clone());
        let gauges = StandingGauges {
            fill_ratio: gauge(names::FILL_RATIO),
            estimated_items: gauge(names::ESTIMATED_ITEMS),
            capacity: gauge(names::CAPACITY),
            remaining_capacity: gauge(names::REMAINING_CAPACITY),
            target: gauge(names::TARGET_FALSE_POSITIVE_RATE),
            predicted: gauge(names::PREDICTED_FALSE_POSITIVE_RATE),
            observed: gauge(names::OBSERVED_FALSE_POSITIVE_RATE),
            observed_over_target: gauge(names::OBSERVED_OVER_TARGET),
            over_capacity: gauge(names::OVER_CAPACITY),
        };
        Self {
            filter: filter.to_owned(),
            inserts: Count::registered(names::INSERTS, &labels),
            removals: Count::registered(names::REMOVALS, &labels),
            catch_up_keys: metrics::counter!(names::CATCH_UP_KEYS, labels.clone()),
            trusted: gauge(names::TRUSTED),
            gauges,
            drifting: AtomicBool::new(false),
            claim: AtomicU8::new(CLAIM_HELD),
            labels,
        }
    }

    /// The filter's name, as its events and metrics carry it.
    #[must_use]
    pub fn filter(&self) -> &str {
        &self.filter
    }

    /// The filter answers "absent" alone from now on; `how` says why (an open outcome, a
    /// rebuild).
    pub fn trusted(&self, how: &dyn Display) {
        self.trusted.set(1.0);
        tracing::info!(target: "bloom", filter = %self.filter, trusted = true, "{how}");
    }

    /// The filter does not answer "absent": every query asks the store. `reason` is a short
    /// stable code (the `reason` label; [`BypassReason::code`](crate::BypassReason::code)),
    /// `why` the whole reason. `newly` when it was trusted until now (or the wrapper just
    /// opened): only that is counted in [`names::BYPASSES`]; a bypassed filter's new reason
    /// (a rebuild starting, failing) is an event only.
    pub fn bypassed(&self, reason: &'static str, why: &dyn Display, newly: bool) {
        self.trusted.set(0.0);
        if !newly {
            tracing::info!(target: "bloom", filter = %self.filter, trusted = false, reason, "the filter stays bypassed: {why}");
            return;
        }
        metrics::counter!(names::BYPASSES, self.with("reason", reason)).increment(1);
        if reason == "claim_lost" {
            tracing::error!(target: "bloom", filter = %self.filter, trusted = false, reason, "the filter is bypassed for good: {why}");
        } else if reason == "no_snapshot" {
            // Every start without a snapshot: expected, and rebuilt by `open_and_recover`.
            tracing::info!(target: "bloom", filter = %self.filter, trusted = false, reason, "the filter is bypassed, every query asks the store: {why}");
        } else {
            tracing::warn!(target: "bloom", filter = %self.filter, trusted = false, reason, "the filter is bypassed, every query asks the store: {why}");
        }
    }

    /// The store's claim at a lookup: `held`, or not, and then `behind` says whether writes
    /// went past the filter behind the wrapper's back ([`StoreClaim::behind`]). While they
    /// did, every query asks the store until a save or a rebuild takes them in: entering
    /// that is a `WARN` event, a bypass counted as `claim_behind` and the trust gauge at 0;
    /// leaving it an `INFO` event and the gauge back at `trusted()` (the mode). A claim that
    /// cannot be confirmed for a moment (a change to the store's file being looked at) is a
    /// `DEBUG` event only; a claim lost for good is the mode's own decision
    /// ([`Telemetry::bypassed`] with `claim_lost`). Only a change is reported; `behind` and
    /// `trusted` are asked only when the claim does not hold or a change is reported.
    ///
    /// [`StoreClaim::behind`]: crate::StoreClaim::behind
    #[inline]
    pub fn claim_checked(
        &self,
        held: bool,
        behind: impl FnOnce() -> Option<DatasetGeneration>,
        trusted: impl FnOnce() -> bool,
    ) {
        if held && self.claim.load(Ordering::Relaxed) == CLAIM_HELD {
            return;
        }
        self.claim_changed(held, behind, trusted);
    }

    #[cold]
    fn claim_changed(
        &self,
        held: bool,
        behind: impl FnOnce() -> Option<DatasetGeneration>,
        trusted: impl FnOnce() -> bool,
    ) {
        let behind = if held { None } else { behind() };
        let now = match (held, behind) {
            (true, _) => CLAIM_HELD,
            (false, Some(_)) => CLAIM_BEHIND,
            (false, None) => CLAIM_UNCONFIRMED,
        };
        let was = self.claim.swap(now, Ordering::Relaxed);
        if was == now {
            return;
        }
        if was == CLAIM_BEHIND && now == CLAIM_UNCONFIRMED {
            // Still not answering: it is behind until the claim holds again.
            self.claim.store(CLAIM_BEHIND, Ordering::Relaxed);
            return;
        }
        let filter = &self.filter;
        match (was, behind) {
            (_, Some(head)) => {
                self.trusted.set(0.0);
                metrics::counter!(names::BYPASSES, self.with("reason", "claim_behind"))
                    .increment(1);
                tracing::warn!(
                    target: "bloom",
                    filter = %filter,
                    trusted = false,
                    reason = "claim_behind",
                    head = head.get(),
                    "the store's claim does not hold (the store went past the filter to generation {head} by writes that did not pass through the wrapper): every query asks the store until a save or a rebuild takes them in",
                );
            }
            (CLAIM_BEHIND, None) if held => {
                let trusted = trusted();
                self.trusted.set(f64::from(u8::from(trusted)));
                tracing::info!(target: "bloom", filter = %filter, trusted, "the store's claim holds again");
            }
            _ => {
                tracing::debug!(target: "bloom", filter = %filter, held, "the store's claim is {}", if held { "confirmed" } else { "unconfirmed for now" })
            }
        }
    }

    /// A rebuild finished.
    pub fn rebuilt(&self, report: &RebuildReport) {
        metrics::counter!(names::REBUILDS, self.with("result", "ok")).increment(1);
        tracing::info!(target: "bloom", filter = %self.filter,
            keys_scanned = report.keys_scanned,
            generation = report.generation.get(),
            capacity = report.capacity,
            capacity_limited = report.capacity_limited,
            "the filter was rebuilt from the store",
        );
    }

    /// A rebuild failed: `error` is why.
    pub fn rebuild_failed(&self, error: &dyn Display) {
        metrics::counter!(names::REBUILDS, self.with("result", "failed")).increment(1);
        tracing::error!(target: "bloom", filter = %self.filter, error = %error, "rebuilding the filter failed");
    }

    /// A catch-up took in `keys` keys committed from generation `from` to `to`.
    pub fn caught_up(&self, from: u64, to: u64, keys: u64) {
        self.catch_up_keys.increment(keys);
        tracing::info!(target: "bloom", filter = %self.filter, from, to, keys, "the filter caught up with the store");
    }

    /// Sets the gauges of the filter's standing; logs once as the measured false positives
    /// start to pass the target.
    pub fn standing(&self, standing: &Standing) {
        let g = &self.gauges;
        g.fill_ratio.set(standing.fill_ratio);
        g.estimated_items.set(standing.estimated_items);
        g.predicted.set(standing.predicted_false_positive_rate);
        if let Some(observed) = standing.observed_false_positive_rate {
            g.observed.set(observed);
        }
        let Some(plan) = standing.plan else {
            return;
        };
        g.capacity.set(plan.capacity as f64);
        g.remaining_capacity.set(plan.remaining_capacity as f64);
        g.target.set(plan.target_false_positive_rate);
        g.observed_over_target
            .set(f64::from(u8::from(plan.observed_over_target)));
        g.over_capacity.set(f64::from(u8::from(plan.over_capacity)));
        let was = self
            .drifting
            .swap(plan.observed_over_target, Ordering::Relaxed);
        if plan.observed_over_target && !was {
            tracing::warn!(target: "bloom", filter = %self.filter,
                observed = standing.observed_false_positive_rate,
                target = plan.target_false_positive_rate,
                predicted = standing.predicted_false_positive_rate,
                "the measured false-positive rate passed the target by more than chance allows: rebuild the filter",
            );
        }
    }

    /// This filter's labels.
    pub(crate) fn labels(&self) -> &[Label] {
        &self.labels
    }

    fn with(&self, key: &'static str, value: &'static str) -> Vec<Label> {
        let mut labels = self.labels.clone();
        labels.push(Label::from_static_parts(key, value));
        labels
    }
}
