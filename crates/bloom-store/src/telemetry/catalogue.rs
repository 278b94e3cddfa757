//! The catalogue of every metric bloom records: [`METRICS`], each one's name, kind, labels and
//! meaning, the names as constants ([`names`]), and [`describe`], which gives a recorder their
//! help texts.

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
