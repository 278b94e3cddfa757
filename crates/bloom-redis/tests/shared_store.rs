//! Check-then-confirm over SQLite with the filter in a real Redis, shared by two wrappers (as
//! two processes would share it), through Redis being killed, restarted empty and flushed:
//! no committed key is ever reported absent, and a key whose bits could not be set is never
//! committed.

use std::time::Duration;

use bloom_core::{FilterConfig, FilterParams, KeyEncoding, Layout};
use bloom_redis::{SharedFilteredStore, SharedOpen};
use bloom_store::{ClaimStatus, Lookup, PrimaryStore, SqliteStore};
use bloom_testing::redis::RedisServer;
use bloom_testing::wait::wait_for;

fn config() -> FilterConfig {
    let params = FilterParams::planned(Layout::sharded(8).unwrap(), 20_000, 0.01).unwrap();
    FilterConfig::new(params)
}

fn open(
    db: &std::path::Path,
    server: &RedisServer,
) -> (SharedFilteredStore<SqliteStore>, SharedOpen) {
    SharedFilteredStore::open_with_grace(
        SqliteStore::open(db).unwrap(),
        server.target(),
        "records",
        KeyEncoding::Nfc,
        Duration::from_millis(50),
    )
    .unwrap()
}

/// Every committed key is reported present (never absent), by every wrapper.
fn assert_committed_present(wrappers: &[&SharedFilteredStore<SqliteStore>], committed: &[String]) {
    for wrapper in wrappers {
        for key in committed {
            let answer = wrapper.contains(key).unwrap();
            assert_eq!(answer, Lookup::Present, "{key}");
        }
    }
}

/// Waits for the verdict of `wrapper`'s claim watcher on writes made under it; the deadline
/// only bounds a hang.
fn wait_for_claim(wrapper: &SharedFilteredStore<SqliteStore>) {
    wait_for("the claim watcher's verdict", || {
        wrapper.claim_status() == ClaimStatus::Held
    });
}

#[test]
fn no_committed_key_is_reported_absent_through_redis_faults() {
    let mut server = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("records.sqlite");

    // No filter yet: bypassed, and inserts refuse (no bits can be set).
    let (a, outcome) = open(&db, &server);
    assert!(matches!(outcome, SharedOpen::Bypassed(_)), "{outcome:?}");
    assert!(a.insert("early").is_err());
    assert!(!a.store().contains(b"early").unwrap());
    assert_eq!(a.rebuild(config()).unwrap().keys_scanned, 0);
    assert!(a.is_trusted());

    let mut committed = Vec::new();
    for i in 0..300 {
        let key = format!("record-{i}");
        assert!(a.insert(&key).unwrap());
        committed.push(key);
    }
    // A second process: trusted at once, sees A's keys, and A sees its keys.
    let (b, outcome) = open(&db, &server);
    assert!(matches!(outcome, SharedOpen::Trusted { .. }), "{outcome:?}");
    for i in 0..100 {
        let key = format!("from-b-{i}");
        b.insert(&key).unwrap();
        committed.push(key);
    }
    assert_committed_present(&[&a, &b], &committed);
    // B's writes changed the database under A: A's claim answers once its watcher has looked
    // at them (on a busy machine, a while).
    wait_for_claim(&a);
    let avoided_before = a.lookups_avoided();
    for i in 0..1000 {
        assert_ne!(a.contains(&format!("never-{i}")).unwrap(), Lookup::Present);
    }
    assert!(a.lookups_avoided() - avoided_before > 950);

    // Redis killed: inserts fail and commit nothing; queries fall back to the store.
    server.kill();
    assert!(a.insert("during-outage").is_err());
    assert!(!a.store().contains(b"during-outage").unwrap());
    assert_committed_present(&[&a, &b], &committed);
    assert_ne!(a.contains("never-1").unwrap(), Lookup::AbsentByFilter);

    // Restarted empty: the filter is gone; nobody answers from it until it is rebuilt.
    server.restart_empty();
    assert_committed_present(&[&a, &b], &committed);
    assert!(b.insert("after-restart").is_err());
    assert!(!b.store().contains(b"after-restart").unwrap());
    let taken = a.rebuild(config()).unwrap();
    assert_eq!(taken.keys_scanned, committed.len() as u64);
    assert_committed_present(&[&a, &b], &committed);
    // B attaches to the rebuilt filter on its next insert.
    b.insert("after-rebuild").unwrap();
    committed.push("after-rebuild".to_owned());
    wait_for_claim(&b);
    assert!(b.is_trusted());
    assert_committed_present(&[&a, &b], &committed);

    // FLUSHALL under running wrappers: detected at the next query, never answered from (A's
    // queries reach Redis once its claim holds again after B's insert).
    wait_for_claim(&a);
    server.cli(&["FLUSHALL"]);
    assert_committed_present(&[&a, &b], &committed);
    assert!(!a.is_trusted());
    assert_eq!(a.contains("never-2").unwrap(), Lookup::AbsentBypassed);
    a.rebuild(config()).unwrap();
    assert_committed_present(&[&a, &b], &committed);

    // A writer behind the wrapper's back: the next open takes its key in.
    let behind = SqliteStore::open(&db).unwrap();
    behind.insert(b"behind-the-back").unwrap();
    committed.push("behind-the-back".to_owned());
    let (c, outcome) = open(&db, &server);
    assert!(
        matches!(outcome, SharedOpen::Trusted { caught_up: 1, .. }),
        "{outcome:?}"
    );
    assert_committed_present(&[&c], &committed);
}

#[test]
fn a_filter_of_another_store_or_history_is_not_trusted() {
    let server = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let (a, _) = open(&dir.path().join("a.sqlite"), &server);
    a.rebuild(config()).unwrap();
    a.insert("only-in-a").unwrap();
    // Another database, same Redis filter name: another identity.
    let (b, outcome) = open(&dir.path().join("b.sqlite"), &server);
    match outcome {
        SharedOpen::Bypassed(why) => assert!(why.contains("another store"), "{why}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(b.contains("only-in-a").unwrap(), Lookup::AbsentBypassed);
    b.insert("only-in-b").unwrap();
    assert_eq!(b.contains("only-in-b").unwrap(), Lookup::Present);
}

#[test]
fn a_rebuild_never_destroys_a_healthy_filter_and_refuses_a_bad_config() {
    let server = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("records.sqlite");
    // P opens before the filter exists: its slot is empty.
    let (p, outcome) = open(&db, &server);
    assert!(matches!(outcome, SharedOpen::Bypassed(_)));
    let (q, _) = open(&db, &server);
    q.rebuild(config()).unwrap();
    q.insert("kept").unwrap();
    let meta = bloom_redis::meta_key("records");
    let creation = server.cli(&["HGET", &meta, "creation"]);
    // P's rebuild finds the healthy filter and adds to it; Q keeps trusting it.
    p.rebuild(config()).unwrap();
    assert_eq!(server.cli(&["HGET", &meta, "creation"]), creation);
    assert!(q.is_trusted());
    assert_eq!(q.contains("kept").unwrap(), Lookup::Present);
    // A config that cannot be a Redis filter is refused before anything is touched.
    let flat = FilterConfig::new(FilterParams::new(8192, 4).unwrap());
    assert!(matches!(
        p.rebuild(flat),
        Err(bloom_redis::SharedError::Rebuild(_))
    ));
    let other_encoding = config().with_encoding(KeyEncoding::Utf8);
    assert!(p.rebuild(other_encoding).is_err());
    assert_eq!(server.cli(&["HGET", &meta, "creation"]), creation);
    q.insert("still-works").unwrap();
}

/// A store whose commit runs a hook first: the shared filter is lost and rebuilt by another
/// process between a writer's bits and its commit.
struct Hooked {
    inner: SqliteStore,
    hook: std::sync::Mutex<Option<Box<dyn FnOnce() + Send>>>,
}

impl PrimaryStore for Hooked {
    type Error = <SqliteStore as PrimaryStore>::Error;
    fn identity(&self) -> Result<bloom_store::StoreIdentity, Self::Error> {
        self.inner.identity()
    }
    fn contains(&self, key: &[u8]) -> Result<bool, Self::Error> {
        self.inner.contains(key)
    }
    fn head(&self) -> Result<bloom_store::HistoryPoint, Self::Error> {
        self.inner.head()
    }
    fn history_at(
        &self,
        generation: bloom_store::DatasetGeneration,
    ) -> Result<Option<bloom_store::HistoryDigest>, Self::Error> {
        self.inner.history_at(generation)
    }
    fn keys_since(
        &self,
        after: bloom_store::DatasetGeneration,
        visit: &mut dyn FnMut(&[u8]),
    ) -> Result<bloom_store::DatasetGeneration, Self::Error> {
        self.inner.keys_since(after, visit)
    }
    fn changes_since(
        &self,
        after: bloom_store::DatasetGeneration,
        visit: &mut dyn FnMut(bloom_store::Change<'_>),
    ) -> Result<bloom_store::DatasetGeneration, Self::Error> {
        self.inner.changes_since(after, visit)
    }
    fn insert(&self, key: &[u8]) -> Result<Option<bloom_store::DatasetGeneration>, Self::Error> {
        if let Some(hook) = self.hook.lock().unwrap().take() {
            hook();
        }
        self.inner.insert(key)
    }
    fn remove(&self, key: &[u8]) -> Result<Option<bloom_store::Removal>, Self::Error> {
        self.inner.remove(key)
    }
    fn claim_key_encoding(&self, proposed: &str) -> Result<String, Self::Error> {
        self.inner.claim_key_encoding(proposed)
    }
}

#[test]
fn a_filter_lost_between_a_writers_bits_and_its_commit_gets_the_bits_again() {
    let server = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("records.sqlite");
    let (b, _) = open(&db, &server);
    b.rebuild(config()).unwrap();
    let b = std::sync::Arc::new(b);
    let hooked = Hooked {
        inner: SqliteStore::open(&db).unwrap(),
        hook: std::sync::Mutex::new(None),
    };
    let (a, _) = SharedFilteredStore::open_with_grace(
        hooked,
        server.target(),
        "records",
        KeyEncoding::Nfc,
        Duration::from_millis(50),
    )
    .unwrap();
    assert!(a.is_trusted());
    // Between A's bits and A's commit: Redis loses everything and B rebuilds (its scan
    // cannot see A's key, which is not committed yet).
    let url = server.url();
    let rebuilder = std::sync::Arc::clone(&b);
    *a.store().hook.lock().unwrap() = Some(Box::new(move || {
        let client = redis::Client::open(url).unwrap();
        let mut conn = client.get_connection().unwrap();
        let _: () = redis::cmd("FLUSHALL").query(&mut conn).unwrap();
        rebuilder.rebuild(config()).unwrap();
    }));
    let result = a.insert("slow-writer");
    assert!(result.is_ok(), "{result:?}");
    // The committed key is in the rebuilt filter: B, which trusts it, reports it present.
    // (A's commit, on a connection of its own, is judged by B's claim first: B asks the
    // store until then.)
    wait_for_claim(&b);
    assert!(b.is_trusted());
    assert_eq!(b.contains("slow-writer").unwrap(), Lookup::Present);
    let (c, _) = open(&db, &server);
    assert_eq!(c.contains("slow-writer").unwrap(), Lookup::Present);
}

/// Redis restarted from a save older than the last inserts, under running wrappers: the
/// committed keys the save lacks are never answered absent (the filter's nodes restarted,
/// so it is distrusted), and the filter is repaired from the store at the next attach, from
/// the point its shards' records cover.
#[test]
fn a_restart_from_an_older_save_is_repaired_from_the_store() {
    let mut server = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("records.sqlite");
    let (a, _) = open(&db, &server);
    // Queries never reattach on their own here, however slow the machine: only the insert
    // below repairs the filter.
    let a = a.with_reattach_every(Duration::from_secs(3600));
    a.rebuild(config()).unwrap();
    let mut committed = Vec::new();
    for i in 0..500 {
        let key = format!("saved-{i}");
        a.insert(&key).unwrap();
        committed.push(key);
    }
    // The filter records its coverage (a fresh wrapper's attach), then Redis saves.
    let (b, _) = open(&db, &server);
    assert!(b.is_trusted());
    assert_eq!(server.cli(&["SAVE"]).trim(), "OK");
    for i in 0..500 {
        let key = format!("after-save-{i}");
        a.insert(&key).unwrap();
        committed.push(key);
    }
    server.restart();
    // Both wrappers: every committed key present, none from a filter that lost them.
    assert_committed_present(&[&a, &b], &committed);
    assert!(!a.is_trusted());
    // The next insert attaches again: the filter is repaired and trusted.
    a.insert("after-restart").unwrap();
    committed.push("after-restart".to_owned());
    wait_for_claim(&a);
    assert!(a.is_trusted());
    assert_committed_present(&[&a], &committed);
    let avoided = a.lookups_avoided();
    for i in 0..200 {
        assert_ne!(a.contains(&format!("never-{i}")).unwrap(), Lookup::Present);
    }
    assert!(
        a.lookups_avoided() > avoided + 150,
        "the filter answers again"
    );
    // A new process trusts it at once.
    let (c, outcome) = open(&db, &server);
    assert!(matches!(outcome, SharedOpen::Trusted { .. }), "{outcome:?}");
    assert_committed_present(&[&c], &committed);
}

/// The shards and metadata put back together from an older copy on a live server (DUMP,
/// more inserts, RESTORE): Redis cannot see it, but the copy records the point of the store
/// it covered, and a wrapper that attaches catches up from there.
#[test]
fn a_filter_put_back_from_an_older_copy_is_caught_up_from_what_it_records() {
    let server = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("records.sqlite");
    let (a, _) = open(&db, &server);
    a.rebuild(config()).unwrap();
    for i in 0..300 {
        a.insert(&format!("early-{i}")).unwrap();
    }
    drop(a);
    // A wrapper's attach records the coverage; then every key of the filter is copied.
    let (b, _) = open(&db, &server);
    drop(b);
    let keys: Vec<String> = server
        .cli(&["KEYS", "bloom:*"])
        .lines()
        .map(str::to_owned)
        .filter(|k| !k.is_empty())
        .collect();
    assert!(keys.len() > 8, "{keys:?}");
    let dumps: Vec<(String, Vec<u8>)> = {
        let mut conn = redis::Client::open(server.url())
            .unwrap()
            .get_connection()
            .unwrap();
        keys.iter()
            .map(|k| {
                let dump: Vec<u8> = redis::cmd("DUMP").arg(k).query(&mut conn).unwrap();
                (k.clone(), dump)
            })
            .collect()
    };
    let (c, _) = open(&db, &server);
    let mut committed: Vec<String> = (0..300).map(|i| format!("early-{i}")).collect();
    for i in 0..300 {
        let key = format!("late-{i}");
        c.insert(&key).unwrap();
        committed.push(key);
    }
    drop(c);
    {
        let mut conn = redis::Client::open(server.url())
            .unwrap()
            .get_connection()
            .unwrap();
        for (key, dump) in &dumps {
            let _: () = redis::cmd("RESTORE")
                .arg(key)
                .arg(0)
                .arg(dump.as_slice())
                .arg("REPLACE")
                .query(&mut conn)
                .unwrap();
        }
    }
    let (d, outcome) = open(&db, &server);
    assert!(
        matches!(outcome, SharedOpen::Trusted { caught_up, .. } if caught_up >= 300),
        "{outcome:?}"
    );
    assert_committed_present(&[&d], &committed);
}

/// A filter just created (bound to no store yet) is trusted at the first open: the store's
/// keys are taken in from the start (after the grace period, for writers of a filter it may
/// replace) and the filter is bound to the store, with no rebuild. A second open finds it
/// bound to this store's history, and waits no grace.
#[test]
fn a_new_filter_is_trusted_at_the_first_open() {
    let server = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("records.sqlite");
    let before = SqliteStore::open(&db).unwrap();
    before.insert(b"already-there").unwrap();
    drop(before);
    let filter = bloom_redis::RedisFilter::open_or_create(
        &server.target(),
        "records",
        config(),
        bloom_redis::Durability::None,
    )
    .unwrap();
    // Opened again with the same configuration: the same filter; another one is refused.
    let again = bloom_redis::RedisFilter::open_or_create(
        &server.target(),
        "records",
        config(),
        bloom_redis::Durability::None,
    )
    .unwrap();
    assert_eq!(again.config(), filter.config());
    let other = FilterConfig::new(
        FilterParams::planned(Layout::sharded(8).unwrap(), 40_000, 0.01).unwrap(),
    );
    assert!(matches!(
        bloom_redis::RedisFilter::open_or_create(
            &server.target(),
            "records",
            other,
            bloom_redis::Durability::None
        ),
        Err(bloom_redis::RedisFilterError::Incompatible { .. })
    ));
    let (a, outcome) = SharedFilteredStore::open_with_grace(
        SqliteStore::open(&db).unwrap(),
        server.target(),
        "records",
        KeyEncoding::Nfc,
        Duration::from_millis(50),
    )
    .unwrap();
    assert!(
        matches!(outcome, SharedOpen::Trusted { caught_up: 1, .. }),
        "{outcome:?}"
    );
    assert_eq!(a.contains("already-there").unwrap(), Lookup::Present);
    assert_eq!(
        a.insert_all(["x", "y", "x"]).unwrap(),
        [true, true, false],
        "a batch of text keys, one commit"
    );
    let answers = a.contains_each(["x", "y", "never"]).unwrap();
    assert_eq!(answers[..2], [Lookup::Present, Lookup::Present]);
    assert!(!answers[2].is_present());
    drop(a);
    let (b, outcome) = SharedFilteredStore::open(
        SqliteStore::open(&db).unwrap(),
        server.target(),
        "records",
        KeyEncoding::Nfc,
    )
    .unwrap();
    // Bound at the first open's point (generation 1); the writes since are taken in again.
    assert!(
        matches!(outcome, SharedOpen::Trusted { from, .. } if from == bloom_core::DatasetGeneration::new(1)),
        "{outcome:?}"
    );
    assert_eq!(b.contains("x").unwrap(), Lookup::Present);
}

#[test]
fn metrics_count_this_process_and_judge_the_shared_filter_against_its_plan() {
    let server = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("records.sqlite");
    let (a, _) = open(&db, &server);
    // Before a filter exists: counts, and the reason the filter cannot be read.
    let m = a.metrics();
    assert!(
        !m.trusted && m.filter.is_err() && !m.over_capacity(),
        "{m:?}"
    );
    // Planned for 1,000 keys at 1 %, recorded in the metadata.
    let params = FilterParams::planned(Layout::sharded(4).unwrap(), 1_000, 0.01).unwrap();
    let planned = FilterConfig::new(params).with_plan(bloom_core::Plan::new(1_000, 0.01));
    a.rebuild(planned).unwrap();
    let keys: Vec<String> = (0..800).map(|i| format!("record-{i}")).collect();
    assert_eq!(
        a.insert_all(&keys).unwrap().iter().filter(|n| **n).count(),
        800
    );
    let strangers: Vec<String> = (0..2_000).map(|i| format!("stranger-{i}")).collect();
    let answers = a.contains_each(&strangers).unwrap();
    let m = a.metrics();
    assert_eq!((m.queries, m.inserts), (2_000, 800));
    assert_eq!(m.lookups_avoided + m.store_lookups, 2_000);
    let refuted = answers
        .iter()
        .filter(|l| **l == Lookup::FalsePositive)
        .count() as u64;
    assert_eq!(m.false_positives, refuted);
    assert_eq!(
        m.store_lookups, refuted,
        "every stranger the filter passed was refuted"
    );
    let info = m.filter.as_ref().unwrap();
    let capacity = info.capacity.expect("the plan is recorded");
    assert_eq!((capacity.plan.capacity, capacity.items), (1_000, 800));
    assert_eq!(capacity.remaining(), 200);
    assert!(!m.over_capacity(), "{m:?}");
    assert!(!m.observed_over_target(), "{m:?}");
    // What this process measured went into the filter's record, for every process to read.
    let a_measured = bloom_core::ObservedRate::of_lookups(m.false_positives, m.lookups_avoided);
    assert_eq!(info.observed, a_measured);
    assert!(!info.observed_over_target());
    assert_eq!(
        a.metrics().filter.unwrap().observed,
        a_measured,
        "added once"
    );
    // A second process's measurements add to it.
    let (b, _) = open(&db, &server);
    let others: Vec<String> = (0..500).map(|i| format!("other-{i}")).collect();
    b.contains_each(&others).unwrap();
    let fleet = b.metrics().filter.unwrap().observed;
    assert_eq!(fleet.absent, a_measured.absent + 500);
    // A record damaged by hand is no measurement, never an error; the next one starts afresh.
    for damage in ["abc", "-5", "99999999999999999999999"] {
        server.cli(&[
            "HSET",
            "bloom:{records}:meta",
            "observed_false_positives",
            damage,
        ]);
        let info = a.metrics().filter.unwrap();
        assert_eq!(
            info.observed,
            bloom_core::ObservedRate::default(),
            "{damage}"
        );
        let more: Vec<String> = (0..100).map(|i| format!("{damage}-{i}")).collect();
        a.contains_each(&more).unwrap();
        assert_eq!(a.metrics().filter.unwrap().observed.absent, 100, "{damage}");
    }
    // The same filter is past its plan once more keys went in.
    let more: Vec<String> = (800..3_000).map(|i| format!("record-{i}")).collect();
    b.insert_all(&more).unwrap();
    let m = a.metrics();
    assert!(m.over_capacity(), "{m:?}");
    let capacity = m.filter.as_ref().unwrap().capacity.unwrap();
    assert!(
        capacity.is_over_items() && capacity.is_over_rate(),
        "{capacity:?}"
    );
    // Over its plan, no committed key is reported absent.
    let all: Vec<String> = keys.into_iter().chain(more).collect();
    assert_committed_present(&[&a, &b], &all);
    // A filter created without a plan reports none.
    let (c, _) = SharedFilteredStore::open_with_grace(
        SqliteStore::open(dir.path().join("other.sqlite")).unwrap(),
        server.target(),
        "unplanned",
        KeyEncoding::Nfc,
        Duration::from_millis(50),
    )
    .unwrap();
    c.rebuild(config()).unwrap();
    let m = c.metrics();
    assert!(m.filter.as_ref().unwrap().capacity.is_none() && !m.over_capacity());
}
