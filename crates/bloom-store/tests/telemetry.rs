//! What an operator sees: each trust decision and repair as a `tracing` event, and the
//! wrapper's counts and its filter's standing through the `metrics` facade, scraped as
//! Prometheus text after a known workload.

use bloom_store::telemetry::{METRICS, MetricKind, names};
use bloom_store::{
    FilterOptions, FilteredStore, MemoryStore, OpenOutcome, OptionsError, SqliteStore, StoreError,
};
use bloom_testing::telemetry::{Seen, observed};

fn keys(prefix: &str, n: u32) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

#[test]
fn a_scrape_after_a_known_workload_shows_every_count_and_the_filters_standing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("store.db");
    let snapshot = dir.path().join("orders.bloom");
    let options = FilterOptions::new(10_000, 0.01)
        .with_snapshot(&snapshot)
        .with_name("orders");
    let ((first, second), scrape, events) = observed(|| {
        // No snapshot yet: bypassed, rebuilt, trusted, saved.
        let (w, outcome) =
            FilteredStore::open_and_recover(SqliteStore::open(&db).unwrap(), options.clone())
                .unwrap();
        assert!(matches!(outcome, OpenOutcome::Rebuilt { .. }));
        let new = w.insert_all(keys("order", 2_000)).unwrap();
        assert!(new.iter().all(|n| *n));
        let answers = w.contains_each(keys("order", 500)).unwrap();
        assert!(answers.iter().all(|l| l.is_present()));
        let answers = w.contains_each(keys("never", 4_000)).unwrap();
        assert!(answers.iter().all(|l| l.is_absent()));
        w.save_snapshot(&snapshot).unwrap();
        let first = w.metrics();
        drop(w);
        // The snapshot damaged while the process was down: bypassed, rebuilt.
        let mut bytes = std::fs::read(&snapshot).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0x40;
        std::fs::write(&snapshot, bytes).unwrap();
        let (w, outcome) =
            FilteredStore::open_and_recover(SqliteStore::open(&db).unwrap(), options.clone())
                .unwrap();
        assert!(
            matches!(outcome, OpenOutcome::Rebuilt { .. }),
            "{outcome:?}"
        );
        let answers = w.contains_each(keys("again", 1_000)).unwrap();
        assert!(answers.iter().all(|l| l.is_absent()));
        (first, w.metrics())
    });

    // Counters add up over both wrappers of the process, as the facade keeps them.
    let total = |f: fn(&bloom_store::Metrics) -> u64| (f(&first) + f(&second)) as f64;
    assert_eq!(scrape.of("orders", names::QUERIES), total(|m| m.queries));
    assert_eq!(scrape.of("orders", names::QUERIES), 5_500.0);
    assert_eq!(
        scrape.of("orders", names::STORE_LOOKUPS),
        total(|m| m.store_lookups)
    );
    assert_eq!(
        scrape.of("orders", names::LOOKUPS_AVOIDED),
        total(|m| m.lookups_avoided)
    );
    assert_eq!(
        scrape.of("orders", names::FALSE_POSITIVES),
        total(|m| m.false_positives)
    );
    assert_eq!(
        scrape.of("orders", names::STORE_LOOKUPS),
        500.0 + scrape.of("orders", names::FALSE_POSITIVES),
        "every store lookup was a present key or a false positive"
    );
    assert_eq!(scrape.of("orders", names::INSERTS), 2_000.0);
    let reason = |r| scrape.value(names::BYPASSES, &[("filter", "orders"), ("reason", r)]);
    assert_eq!(reason("no_snapshot"), Some(1.0));
    assert_eq!(reason("unreadable"), Some(1.0));
    assert_eq!(
        scrape.value(names::REBUILDS, &[("filter", "orders"), ("result", "ok")]),
        Some(2.0)
    );
    // The gauges are the second wrapper's standing, as its `metrics()` reported it.
    assert_eq!(scrape.of("orders", names::TRUSTED), 1.0);
    assert_eq!(scrape.of("orders", names::FILL_RATIO), second.fill_ratio);
    assert_eq!(
        scrape.of("orders", names::ESTIMATED_ITEMS),
        second.estimated_items
    );
    assert_eq!(scrape.of("orders", names::CAPACITY), second.capacity as f64);
    assert!(second.capacity >= 10_000);
    assert_eq!(
        scrape.of("orders", names::REMAINING_CAPACITY),
        second.remaining_capacity as f64
    );
    assert_eq!(scrape.of("orders", names::TARGET_FALSE_POSITIVE_RATE), 0.01);
    assert_eq!(
        scrape.of("orders", names::PREDICTED_FALSE_POSITIVE_RATE),
        second.predicted_false_positive_rate
    );
    assert_eq!(
        Some(scrape.of("orders", names::OBSERVED_FALSE_POSITIVE_RATE)),
        second.observed_false_positive_rate
    );
    assert_eq!(scrape.of("orders", names::OBSERVED_OVER_TARGET), 0.0);
    assert_eq!(scrape.of("orders", names::OVER_CAPACITY), 0.0);
    // Described, for the scrape's HELP lines.
    assert!(
        scrape
            .0
            .contains("# HELP bloom_false_positives_total Filter 'maybe' answers"),
        "{}",
        scrape.0
    );

    // The events, in order: each trust decision and repair, with its fields.
    let decisions: Vec<(tracing::Level, Option<&str>, Option<&str>)> = events
        .iter()
        .filter(|e| e.field("filter") == Some("orders") && e.level <= tracing::Level::INFO)
        .map(|e| (e.level, e.field("trusted"), e.field("reason")))
        .collect();
    use tracing::Level;
    assert_eq!(
        decisions,
        [
            (Level::INFO, Some("false"), Some("no_snapshot")),
            (Level::INFO, Some("false"), Some("rebuilding")),
            (Level::INFO, Some("true"), None),
            (Level::INFO, None, None), // rebuilt
            (Level::WARN, Some("false"), Some("unreadable")),
            (Level::INFO, Some("false"), Some("rebuilding")),
            (Level::INFO, Some("true"), None),
            (Level::INFO, None, None), // rebuilt
        ],
        "{events:#?}"
    );
    let rebuilt = events
        .iter()
        .find(|e| e.message.contains("rebuilt"))
        .unwrap();
    assert_eq!(rebuilt.field("keys_scanned"), Some("0"));
    let unreadable = events
        .iter()
        .find(|e| e.field("reason") == Some("unreadable"))
        .unwrap();
    assert!(
        unreadable.message.contains("snapshot unreadable"),
        "{unreadable:?}"
    );
}

/// A wrapper named `name`, planned for 2,000 keys at 1 %, holding `inserted` keys, after 2,000
/// queries for keys it never held.
fn filled(name: &str, inserted: u32) -> FilteredStore<MemoryStore> {
    let options = FilterOptions::new(2_000, 0.01).with_name(name);
    let (w, _) = FilteredStore::open_and_recover(MemoryStore::new(), options).unwrap();
    w.insert_all(keys("key", inserted)).unwrap();
    w.contains_each(keys("absent", 2_000)).unwrap();
    w
}

#[test]
fn drift_is_flagged_in_the_gauge_logged_once_as_it_starts_and_cleared_by_a_rebuild() {
    let ((), scrape, events) = observed(|| {
        // Ten times its plan.
        let w = filled("drifting", 20_000);
        for _ in 0..3 {
            assert!(w.metrics().observed_over_target);
        }
    });
    assert_eq!(scrape.of("drifting", names::OBSERVED_OVER_TARGET), 1.0);
    assert_eq!(scrape.of("drifting", names::OVER_CAPACITY), 1.0);
    let drift: Vec<&Seen> = events
        .iter()
        .filter(|e| {
            e.message
                .contains("measured false-positive rate passed the target")
        })
        .collect();
    assert_eq!(drift.len(), 1, "{events:#?}");
    assert_eq!(drift[0].level, tracing::Level::WARN);
    assert_eq!(drift[0].field("target"), Some("0.01"));

    // The remedy: a rebuild grows the filter, and its measurements start afresh.
    let ((), scrape, _) = observed(|| {
        let w = filled("rebuilt", 20_000);
        assert!(w.metrics().observed_over_target);
        w.rebuild().unwrap();
        let m = w.metrics();
        assert!(!m.observed_over_target && !m.over_capacity, "{m:?}");
        assert_eq!(
            m.observed_false_positive_rate, None,
            "nothing measured since"
        );
        w.contains_each(keys("later", 2_000)).unwrap();
        let m = w.metrics();
        assert!(!m.observed_over_target, "{m:?}");
        assert!(
            m.false_positives > 100,
            "the process's count goes on: {m:?}"
        );
    });
    assert_eq!(scrape.of("rebuilt", names::OBSERVED_OVER_TARGET), 0.0);
    assert_eq!(scrape.of("rebuilt", names::OVER_CAPACITY), 0.0);
}

#[test]
fn a_filter_at_its_plan_raises_no_drift() {
    let ((), scrape, events) = observed(|| {
        let w = filled("at-plan", 2_000);
        assert!(!w.metrics().observed_over_target);
    });
    assert_eq!(scrape.of("at-plan", names::OBSERVED_OVER_TARGET), 0.0);
    assert!(
        !events.iter().any(|e| e.level == tracing::Level::WARN),
        "{events:#?}"
    );
}

#[test]
fn a_name_that_cannot_label_a_metric_is_refused_and_gauges_with_nothing_to_say_are_absent() {
    let long = "x".repeat(65);
    for name in ["", "a\nb", "quote\"", long.as_str(), "caf\u{e9}"] {
        let options = FilterOptions::new(100, 0.01).with_name(name);
        let refused = FilteredStore::open(MemoryStore::new(), options).map(|_| ());
        assert!(
            matches!(
                refused,
                Err(StoreError::Options(OptionsError::InvalidName { length })) if length == name.len()
            ),
            "{name:?}: {refused:?}"
        );
    }
    let ((), scrape, _) = observed(|| {
        let options = FilterOptions::new(100, 0.01).with_name("fresh-1.a_b");
        let (w, _) = FilteredStore::open_and_recover(MemoryStore::new(), options).unwrap();
        assert_eq!(w.metrics().observed_false_positive_rate, None);
    });
    // Nothing measured: no series, rather than a 0 that was not measured.
    assert_eq!(
        scrape.value(
            names::OBSERVED_FALSE_POSITIVE_RATE,
            &[("filter", "fresh-1.a_b")]
        ),
        None,
        "{}",
        scrape.0
    );
    assert_eq!(scrape.of("fresh-1.a_b", names::TRUSTED), 1.0);
}

#[test]
fn two_wrappers_of_one_name_are_told_apart_or_warned_about() {
    let ((), _, events) = observed(|| {
        let options = FilterOptions::new(100, 0.01).with_name("twice");
        let (_a, _) = FilteredStore::open(MemoryStore::new(), options.clone()).unwrap();
        let (_b, _) = FilteredStore::open(MemoryStore::new(), options).unwrap();
    });
    let warned = events
        .iter()
        .filter(|e| e.message.contains("another wrapper named \"twice\""))
        .count();
    assert_eq!(warned, 1, "{events:#?}");
    // Once both are dropped, the name is free again.
    let ((), _, events) = observed(|| {
        let options = FilterOptions::new(100, 0.01).with_name("twice");
        let (_a, _) = FilteredStore::open(MemoryStore::new(), options).unwrap();
    });
    assert!(
        !events.iter().any(|e| e.message.contains("another wrapper")),
        "{events:#?}"
    );
}

#[test]
fn the_operators_page_documents_every_metric_and_nothing_else() {
    let page = include_str!("../../../docs/operations.md");
    for metric in METRICS {
        let row = page
            .lines()
            .find(|l| l.starts_with(&format!("| `{}`", metric.name)))
            .unwrap_or_else(|| panic!("docs/operations.md has no row for {}", metric.name));
        let kind = match metric.kind {
            MetricKind::Counter => "counter",
            MetricKind::Gauge => "gauge",
            MetricKind::Histogram => "histogram",
            _ => unreachable!("a new kind must be documented"),
        };
        assert!(row.contains(kind), "{row}: not a {kind}");
        for label in metric.labels {
            assert!(
                row.contains(&format!("`{label}`")),
                "{row}: no label {label}"
            );
        }
    }
    let documented = page.lines().filter(|l| l.starts_with("| `bloom_")).count();
    assert_eq!(
        documented,
        METRICS.len(),
        "a row names a metric bloom does not record"
    );
}
