//! What an operator of a fleet sees of a shared filter: each trust decision (the first open,
//! a filter lost in Redis, a Redis that went away, the repairs) as an event with its reason,
//! and the counts, the shared filter's standing and the Redis latencies in a scrape.

use std::time::Duration;

use bloom_core::{FilterConfig, FilterParams, KeyEncoding, Layout, Plan};
use bloom_redis::{SharedFilteredStore, SharedOpen};
use bloom_store::telemetry::names;
use bloom_store::{Lookup, SqliteStore};
use bloom_testing::redis::RedisServer;
use bloom_testing::telemetry::observed;
use tracing::Level;

fn config() -> FilterConfig {
    let params = FilterParams::planned(Layout::sharded(8).unwrap(), 20_000, 0.01).unwrap();
    FilterConfig::new(params).with_plan(Plan::new(20_000, 0.01))
}

/// A wrapper named `name` over the SQLite store at `db`, with a short grace period.
fn open(
    db: &std::path::Path,
    server: &RedisServer,
    name: &str,
) -> (SharedFilteredStore<SqliteStore>, SharedOpen) {
    SharedFilteredStore::open_with_grace(
        SqliteStore::open(db).unwrap(),
        server.target(),
        name,
        KeyEncoding::Nfc,
        Duration::from_millis(50),
    )
    .unwrap()
}

#[test]
fn trust_decisions_about_a_shared_filter_are_events_and_metrics() {
    let mut server = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("records.sqlite");
    let (counts, scrape, events) = observed(|| {
        let (w, outcome) = open(&db, &server, "records");
        let w = w.with_reattach_every(Duration::ZERO);
        // No filter in Redis yet.
        assert!(matches!(outcome, SharedOpen::Bypassed(_)), "{outcome:?}");
        w.rebuild(config()).unwrap();
        for i in 0..200 {
            assert!(w.insert(&format!("record-{i}")).unwrap());
        }
        for i in 0..1_000 {
            assert_ne!(w.contains(&format!("never-{i}")).unwrap(), Lookup::Present);
        }
        let before = w.metrics();
        assert!(before.trusted);
        // The filter lost in Redis (flushed): the next lookup asks the store, and says why.
        server.cli(&["FLUSHALL"]);
        assert_eq!(w.contains("record-1").unwrap(), Lookup::Present);
        assert!(!w.is_trusted());
        w.rebuild(config()).unwrap();
        assert!(w.is_trusted());
        // Redis gone: each lookup falls back to the store (the failed round trip is counted),
        // and the trust gauge says the filter does not answer, though the wrapper still
        // trusts it for when Redis is back.
        server.kill();
        for i in 0..10 {
            let key = format!("record-{i}");
            assert_eq!(w.contains(&key).unwrap(), Lookup::Present);
        }
        let after = w.metrics();
        assert!(after.trusted);
        (before, after)
    });
    let (before, after) = counts;

    // The decisions, in order, with their reason codes.
    let decisions: Vec<(Level, Option<&str>, Option<&str>)> = events
        .iter()
        .filter(|e| e.field("filter") == Some("records") && e.field("trusted").is_some())
        .map(|e| (e.level, e.field("trusted"), e.field("reason")))
        .collect();
    assert_eq!(
        decisions,
        [
            (Level::WARN, Some("false"), Some("not_found")),
            (Level::INFO, Some("true"), None),
            (Level::WARN, Some("false"), Some("lost")),
            (Level::INFO, Some("true"), None),
            (Level::WARN, Some("false"), Some("unreachable")),
        ],
        "{events:#?}"
    );
    assert_eq!(
        events
            .iter()
            .filter(|e| e.field("keys_scanned").is_some())
            .count(),
        2
    );

    let of = |name| scrape.of("records", name);
    let bypasses = |reason| {
        scrape.value(
            names::BYPASSES,
            &[("filter", "records"), ("reason", reason)],
        )
    };
    assert_eq!(bypasses("not_found"), Some(1.0));
    assert_eq!(bypasses("lost"), Some(1.0));
    assert_eq!(bypasses("unreachable"), Some(1.0));
    assert_eq!(
        scrape.value(names::REBUILDS, &[("filter", "records"), ("result", "ok")]),
        Some(2.0)
    );
    assert_eq!(of(names::TRUSTED), 0.0);
    assert_eq!(of(names::INSERTS), 200.0);
    assert_eq!(of(names::QUERIES), after.queries as f64);
    assert_eq!(after.queries, 1_011);
    assert_eq!(of(names::LOOKUPS_AVOIDED), after.lookups_avoided as f64);
    assert_eq!(of(names::FALSE_POSITIVES), after.false_positives as f64);
    assert_eq!(
        after.lookups_avoided + after.false_positives,
        1_000,
        "every never-inserted key was answered by the trusted filter"
    );
    // The gauges of the shared filter's standing, as the last `metrics()` that could read it
    // (before the flush) set them; the one after the kill could not read Redis.
    let info = before.filter.as_ref().unwrap();
    assert!(after.filter.is_err());
    assert_eq!(of(names::ESTIMATED_ITEMS), info.estimated_items);
    assert_eq!(
        of(names::PREDICTED_FALSE_POSITIVE_RATE),
        info.estimated_false_positive_rate
    );
    assert_eq!(of(names::CAPACITY), 20_000.0);
    assert_eq!(of(names::TARGET_FALSE_POSITIVE_RATE), 0.01);
    assert_eq!(of(names::OBSERVED_OVER_TARGET), 0.0);
    // Every round trip timed, and the failed ones counted.
    let round_trips = scrape
        .value(&format!("{}_count", names::REDIS_ROUND_TRIP_SECONDS), &[])
        .unwrap_or_else(|| panic!("{}", scrape.0));
    assert!(round_trips >= 1_000.0, "{round_trips}");
    let failed = ["failed", "timeout"]
        .iter()
        .filter_map(|kind| scrape.value(names::REDIS_ERRORS, &[("kind", kind)]))
        .sum::<f64>();
    assert!(failed >= 10.0, "{}", scrape.0);
    // One WARN for the outage, not one per query.
    let outage: Vec<_> = events
        .iter()
        .filter(|e| e.message.contains("server failed a query"))
        .collect();
    assert_eq!(outage.len(), 1, "{events:#?}");
}

#[test]
fn a_name_that_cannot_name_a_shared_filter_is_refused_before_anything_is_logged() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("records.sqlite");
    // Nothing listens there: the name is refused before any connection is tried.
    let target = bloom_redis::RedisTarget::single("redis://127.0.0.1:1/");
    let (refused, _, events) = observed(|| {
        SharedFilteredStore::open(
            SqliteStore::open(&db).unwrap(),
            target,
            "records\n{forged}",
            KeyEncoding::Nfc,
        )
        .map(|_| ())
    });
    assert!(
        matches!(
            refused,
            Err(bloom_redis::SharedError::Name(
                bloom_redis::RedisFilterError::InvalidName { .. }
            ))
        ),
        "{refused:?}"
    );
    assert!(events.is_empty(), "{events:#?}");
}

#[test]
fn a_scrape_alone_sees_redis_go() {
    let mut server = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("records.sqlite");
    let (down, scrape_down, events) = observed(|| {
        let (w, _) = open(&db, &server, "scraped");
        w.rebuild(config()).unwrap();
        assert!(w.metrics().filter.is_ok());
        // No query: the scrape alone finds Redis gone.
        server.kill();
        let down = w.metrics();
        assert!(down.filter.is_err());
        down
    });
    assert!(
        down.trusted,
        "the wrapper still trusts the filter for when Redis is back"
    );
    assert_eq!(scrape_down.of("scraped", names::TRUSTED), 0.0);
    assert_eq!(
        events
            .iter()
            .filter(|e| e.message.contains("server failed"))
            .count(),
        1,
        "{events:#?}"
    );
}
