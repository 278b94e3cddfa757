//! What a wrapper tells an operator: each trust decision and repair as a [`tracing`] event,
//! and its counts and its filter's state through the [`metrics`] facade, for whichever
//! subscriber and exporter the service installs. While none is installed, an event costs a
//! load and a branch at its call site, a count a branch beside the wrapper's own atomic add,
//! and a timed round trip (Redis, PostgreSQL) two clock reads.
//!
//! The exporter must be built on `metrics` 0.24, the version re-exported here as
//! [`metrics`]: a recorder of another major version is another
//! facade, and sees nothing.
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
//! items, predicted and observed false-positive rates) are set by each call of the wrapper's
//! `metrics()` (a `FilteredStore` also calls it at open and after each rebuild): call it when
//! the endpoint is scraped, or on a timer. The trust gauge also moves with each trust
//! decision.

mod catalogue;
mod count;
mod standing;

use std::fmt::Display;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};

use bloom_format::DatasetGeneration;

pub use catalogue::{METRICS, MetricInfo, MetricKind, describe, names};
pub use count::Count;
pub use metrics;
use metrics::{Counter, Gauge, Label};
pub use standing::{PlanStanding, Standing};

use crate::outcome::RebuildReport;

/// [`Telemetry::claim_checked`]'s states of the store's claim.
const CLAIM_HELD: u8 = 0;
const CLAIM_UNCONFIRMED: u8 = 1;
const CLAIM_BEHIND: u8 = 2;

/// The handles one wrapper records through, registered once as it opens, and its events:
/// used by this crate's `FilteredStore` and bloom-redis's `SharedFilteredStore`, so that
/// every wrapper's events and metrics read alike.
///
/// The trust gauge says whether the filter answers "absent" alone: the wrapper trusts it
/// (its mode), the store's claim holds, and (for a shared filter) Redis answers. Each of the
/// three is reported here as it changes, and `metrics()` reconciles the mode at every call.
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
    /// The wrapper's mode: whether it trusts its filter.
    mode_trusted: AtomicBool,
    /// The store's claim at the last look (`CLAIM_*`), so that a change is logged once.
    claim: AtomicU8,
    /// Whether the filter's server answered the last query (a shared filter's Redis).
    answering: AtomicBool,
    /// The reason of the current bypass, so that a reason repeated is not logged again.
    reason: Mutex<&'static str>,
    /// The reason the filter's server failed with, while it does (`answering` false): a
    /// bypass for that reason meanwhile is the same outage, counted once.
    failing: Mutex<&'static str>,
    /// Held while the trust gauge is set from the three flags, so that two changes at once
    /// cannot leave it at the older one.
    syncing: Mutex<()>,
    /// Whether the last standing was over its target, so that drift is logged once as it
    /// starts.
    drifting: AtomicBool,
}

/// The gauges of a filter's standing, each registered at its first value (a filter read at
/// least once; the measured rate after a query; a plan the filter records), so that a scrape
/// never shows a 0 that was not measured.
#[derive(Debug)]
struct StandingGauges {
    fill_ratio: LazyGauge,
    estimated_items: LazyGauge,
    predicted: LazyGauge,
    observed: LazyGauge,
    capacity: LazyGauge,
    remaining_capacity: LazyGauge,
    target: LazyGauge,
    observed_over_target: LazyGauge,
    over_capacity: LazyGauge,
}

/// A gauge registered at its first value.
#[derive(Debug)]
struct LazyGauge {
    name: &'static str,
    gauge: OnceLock<Gauge>,
}

impl LazyGauge {
    const fn new(name: &'static str) -> Self {
        Self {
            name,
            gauge: OnceLock::new(),
        }
    }

    fn set(&self, labels: &[Label], value: f64) {
        self.gauge
            .get_or_init(|| metrics::gauge!(self.name, labels.to_vec()))
            .set(value);
    }

    /// NaN (no value) if the gauge exists; nothing otherwise.
    fn clear(&self) {
        if let Some(gauge) = self.gauge.get() {
            gauge.set(f64::NAN);
        }
    }
}

/// The names of the wrappers open in this process, with how many of each: two with one name
/// would share every series.
static OPEN_NAMES: Mutex<Vec<(String, usize)>> = Mutex::new(Vec::new());

impl Drop for Telemetry {
    fn drop(&mut self) {
        let mut open = OPEN_NAMES.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(at) = open.iter().position(|(name, _)| *name == self.filter) {
            match open.get_mut(at) {
                Some((_, n)) if *n > 1 => *n -= 1,
                _ => {
                    open.swap_remove(at);
                }
            }
        }
    }
}

impl Telemetry {
    /// The handles of the filter `filter` (its `filter` label), registered with the recorder
    /// installed now, which is also given [`METRICS`]' descriptions. A second wrapper of the
    /// same name open in this process shares every series with the first: it is logged
    /// (`WARN`), and [`FilterOptions::with_name`](crate::FilterOptions::with_name) tells
    /// them apart.
    #[must_use]
    pub fn new(filter: &str) -> Self {
        describe();
        {
            let mut open = OPEN_NAMES.lock().unwrap_or_else(PoisonError::into_inner);
            match open.iter_mut().find(|(name, _)| name == filter) {
                Some((_, n)) => {
                    *n += 1;
                    tracing::warn!(target: "bloom", filter, open = *n, "another wrapper named {filter:?} is open in this process: their metrics are merged; give each its own name (FilterOptions::with_name, or the shared filter's name)");
                }
                None => open.push((filter.to_owned(), 1)),
            }
        }
        let labels = vec![Label::new("filter", filter.to_owned())];
        let gauges = StandingGauges {
            fill_ratio: LazyGauge::new(names::FILL_RATIO),
            estimated_items: LazyGauge::new(names::ESTIMATED_ITEMS),
            predicted: LazyGauge::new(names::PREDICTED_FALSE_POSITIVE_RATE),
            observed: LazyGauge::new(names::OBSERVED_FALSE_POSITIVE_RATE),
            capacity: LazyGauge::new(names::CAPACITY),
            remaining_capacity: LazyGauge::new(names::REMAINING_CAPACITY),
            target: LazyGauge::new(names::TARGET_FALSE_POSITIVE_RATE),
            observed_over_target: LazyGauge::new(names::OBSERVED_OVER_TARGET),
            over_capacity: LazyGauge::new(names::OVER_CAPACITY),
        };
        Self {
            filter: filter.to_owned(),
            inserts: Count::registered(names::INSERTS, &labels),
            removals: Count::registered(names::REMOVALS, &labels),
            catch_up_keys: metrics::counter!(names::CATCH_UP_KEYS, labels.clone()),
            trusted: metrics::gauge!(names::TRUSTED, labels.clone()),
            gauges,
            mode_trusted: AtomicBool::new(false),
            claim: AtomicU8::new(CLAIM_HELD),
            answering: AtomicBool::new(true),
            reason: Mutex::new(""),
            failing: Mutex::new(""),
            syncing: Mutex::new(()),
            drifting: AtomicBool::new(false),
            labels,
        }
    }

    /// The filter's name, as its events and metrics carry it.
    #[must_use]
    pub fn filter(&self) -> &str {
        &self.filter
    }

    /// Sets the trust gauge from the three things it depends on.
    fn sync_trust(&self) {
        let _one = self.syncing.lock().unwrap_or_else(PoisonError::into_inner);
        let answers = self.mode_trusted.load(Ordering::Relaxed)
            && self.claim.load(Ordering::Relaxed) == CLAIM_HELD
            && self.answering.load(Ordering::Relaxed);
        self.trusted.set(f64::from(u8::from(answers)));
    }

    /// The wrapper trusts its filter from now on; `how` says why (an open outcome, a
    /// rebuild).
    pub fn trusted(&self, how: &dyn Display) {
        self.mode_trusted.store(true, Ordering::Relaxed);
        *self.reason.lock().unwrap_or_else(PoisonError::into_inner) = "";
        self.sync_trust();
        tracing::info!(target: "bloom", filter = %self.filter, trusted = true, "{how}");
    }

    /// The wrapper does not trust its filter: every query asks the store. `reason` is a
    /// short stable code (the `reason` label; [`BypassReason::code`](crate::BypassReason::code)),
    /// `why` the whole reason. `newly` when it was trusted until now (or the wrapper just
    /// opened): only that is counted in [`names::BYPASSES`]. A bypassed filter's new reason
    /// (a rebuild starting, failing) is an event only, and the same reason again (a shared
    /// filter looked at again) nothing.
    pub fn bypassed(&self, reason: &'static str, why: &dyn Display, newly: bool) {
        self.mode_trusted.store(false, Ordering::Relaxed);
        self.sync_trust();
        let repeated = {
            let mut last = self.reason.lock().unwrap_or_else(PoisonError::into_inner);
            std::mem::replace(&mut *last, reason) == reason
        };
        // The outage a failed query reported already (`answered`): the same bypass.
        let same_outage = !self.answering.load(Ordering::Relaxed)
            && *self.failing.lock().unwrap_or_else(PoisonError::into_inner) == reason;
        let filter = &self.filter;
        if reason == "claim_lost" {
            if newly {
                metrics::counter!(names::BYPASSES, self.with("reason", reason)).increment(1);
            }
            if !repeated {
                tracing::error!(target: "bloom", filter = %filter, trusted = false, reason, "the filter is bypassed for good: {why}");
            }
            return;
        }
        if !newly || same_outage {
            if !repeated {
                tracing::info!(target: "bloom", filter = %filter, trusted = false, reason, "the filter stays bypassed: {why}");
            }
            return;
        }
        metrics::counter!(names::BYPASSES, self.with("reason", reason)).increment(1);
        match reason {
            // Every start without a snapshot, and a new shared filter's grace period: expected.
            "no_snapshot" | "not_bound" => {
                tracing::info!(target: "bloom", filter = %filter, trusted = false, reason, "the filter is bypassed, every query asks the store: {why}");
            }
            _ => {
                tracing::warn!(target: "bloom", filter = %filter, trusted = false, reason, "the filter is bypassed, every query asks the store: {why}");
            }
        }
    }

    /// Whether the filter's server answered a query (`ok`), for a filter held elsewhere (a
    /// shared filter's Redis): a query it fails goes to the store, and the filter is not
    /// distrusted for it. Going from answering to not is a `WARN` event and a bypass counted
    /// by `why`'s reason; answering again an `INFO` event. `why` is asked only then.
    #[inline]
    pub fn answered(&self, ok: bool, why: impl FnOnce() -> (&'static str, String)) {
        if self.answering.load(Ordering::Relaxed) != ok {
            self.answered_changed(ok, why);
        }
    }

    #[cold]
    fn answered_changed(&self, ok: bool, why: impl FnOnce() -> (&'static str, String)) {
        if self.answering.swap(ok, Ordering::Relaxed) == ok {
            return;
        }
        self.sync_trust();
        let filter = &self.filter;
        if ok {
            tracing::info!(target: "bloom", filter = %filter, "the filter's server answers again");
            return;
        }
        let (reason, why) = why();
        *self.failing.lock().unwrap_or_else(PoisonError::into_inner) = reason;
        metrics::counter!(names::BYPASSES, self.with("reason", reason)).increment(1);
        tracing::warn!(target: "bloom", filter = %filter, trusted = false, reason, "the filter's server failed a query, which went to the store, as every query does until it answers again: {why}");
    }

    /// The store's claim at a lookup: `held`, or not, and then `behind` says whether writes
    /// went past the filter behind the wrapper's back ([`StoreClaim::behind`]). While they
    /// did, every query asks the store until a save or a rebuild takes them in: entering
    /// that is a `WARN` event and a bypass counted as `claim_behind`, leaving it an `INFO`
    /// event. A claim that cannot be confirmed for a moment (a change to the store's file
    /// being looked at) is a `DEBUG` event only; a claim lost for good is the mode's own
    /// decision ([`Telemetry::bypassed`] with `claim_lost`). The trust gauge follows all of
    /// them. Only a change is reported; `behind` is asked only while the claim does not hold.
    ///
    /// [`StoreClaim::behind`]: crate::StoreClaim::behind
    #[inline]
    pub fn claim_checked(&self, held: bool, behind: impl FnOnce() -> Option<DatasetGeneration>) {
        if held && self.claim.load(Ordering::Relaxed) == CLAIM_HELD {
            return;
        }
        self.claim_changed(held, behind);
    }

    #[cold]
    fn claim_changed(&self, held: bool, behind: impl FnOnce() -> Option<DatasetGeneration>) {
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
        self.sync_trust();
        let filter = &self.filter;
        match (was, behind) {
            (_, Some(head)) if self.mode_trusted.load(Ordering::Relaxed) => {
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
            (_, Some(head)) => {
                tracing::info!(target: "bloom", filter = %filter, trusted = false, reason = "claim_behind", head = head.get(), "the store went past the bypassed filter by writes that did not pass through the wrapper");
            }
            (CLAIM_BEHIND, None) => {
                let trusted = self.mode_trusted.load(Ordering::Relaxed);
                tracing::info!(target: "bloom", filter = %filter, trusted, "the store's claim holds again");
            }
            _ => {
                tracing::debug!(target: "bloom", filter = %filter, held, "the store's claim is {}", if held { "confirmed" } else { "unconfirmed for now" });
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
    /// The wrapper's mode is also taken from it, so that the trust gauge agrees with the
    /// wrapper at every `metrics()`.
    pub fn standing(&self, standing: &Standing) {
        self.mode_trusted.store(standing.trusted, Ordering::Relaxed);
        self.sync_trust();
        let (g, labels) = (&self.gauges, self.labels.as_slice());
        g.fill_ratio.set(labels, standing.fill_ratio);
        g.estimated_items.set(labels, standing.estimated_items);
        g.predicted
            .set(labels, standing.predicted_false_positive_rate);
        match standing.observed_false_positive_rate {
            Some(observed) => g.observed.set(labels, observed),
            // Nothing measured on this filter yet (a rebuild starts afresh): NaN rather than
            // the last filter's rate, once the gauge exists.
            None => g.observed.clear(),
        }
        let Some(plan) = standing.plan else {
            return;
        };
        g.capacity.set(labels, plan.capacity as f64);
        g.remaining_capacity
            .set(labels, plan.remaining_capacity as f64);
        g.target.set(labels, plan.target_false_positive_rate);
        g.observed_over_target
            .set(labels, f64::from(u8::from(plan.observed_over_target)));
        g.over_capacity
            .set(labels, f64::from(u8::from(plan.over_capacity)));
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
