//! Older data put back on a live Redis is never answered "absent" for: an older save loaded
//! under running wrappers (`DEBUG RELOAD NOSAVE`), an older copy of a shard restored
//! (`RESTORE … REPLACE`). Every shard's write counter moves with its bits; a process that
//! saw a newer count, or a record newer than the shard, takes the shard for unverified and
//! flags it for every other process; a shared wrapper then asks the store, repairs the
//! filter from the store and trusts it again. Plain commands, or the module's under
//! `BLOOM_REDIS_TEST_PATH=module`.

use std::sync::Arc;
use std::time::Duration;

use bloom_core::{FilterConfig, FilterParams, KeyEncoding, Layout};
use bloom_redis::{RedisFilter, RedisFilterError, RedisTarget, SharedFilteredStore, SharedOpen};
use bloom_store::{Lookup, MemoryStore};
use bloom_testing::redis::RedisServer;

const NAME: &str = "seen";

fn config() -> FilterConfig {
    let params = FilterParams::planned(Layout::sharded(8).unwrap(), 20_000, 0.01).unwrap();
    FilterConfig::new(params)
}

fn keys(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

type Wrapper = SharedFilteredStore<Arc<MemoryStore>>;

/// A shared wrapper over `store`, on the filter (created by the first one), trusted.
fn wrapper(store: &Arc<MemoryStore>, target: &RedisTarget) -> Wrapper {
    let (w, outcome) = SharedFilteredStore::open_with_grace(
        Arc::clone(store),
        target.clone(),
        NAME,
        KeyEncoding::Nfc,
        Duration::ZERO,
    )
    .unwrap();
    if !w.is_trusted() {
        assert!(matches!(outcome, SharedOpen::Bypassed(_)));
        w.rebuild(config()).unwrap();
    }
    assert!(w.is_trusted());
    w
}

/// Every one of `keys`, committed, is answered present: never absent, whatever the filter
/// says of it.
fn all_present(w: &Wrapper, keys: &[String]) {
    for key in keys {
        assert_eq!(w.contains(key).unwrap(), Lookup::Present, "{key}");
    }
    assert!(
        w.contains_each(keys)
            .unwrap()
            .iter()
            .all(|a| *a == Lookup::Present)
    );
}

/// The filter's own answers for `keys` (committed, their bits lost with the state put
/// back): an error, never "absent".
fn never_absent_from_the_filter(target: &RedisTarget, keys: &[String]) {
    let filter = RedisFilter::open(target, NAME).unwrap();
    match filter.contains_each(keys) {
        Ok(answers) => assert!(answers.iter().all(|&maybe| maybe), "a key answered absent"),
        Err(e) => assert!(e.is_unverified(), "{e}"),
    }
}

#[test]
fn an_older_save_reloaded_under_running_wrappers_is_never_answered_absent() {
    let server = RedisServer::start_with(&["--enable-debug-command", "yes"]);
    let target = server.target();
    let store = Arc::new(MemoryStore::new());
    let first = wrapper(&store, &target);
    let second = wrapper(&store, &target);
    let before = keys("before", 500);
    first.insert_all(&before).unwrap();
    assert_eq!(server.cli(&["SAVE"]).trim(), "OK");
    // Acknowledged after the save: their bits are in no save.
    let after = keys("after", 500);
    first.insert_all(&after).unwrap();
    second.insert_all(keys("second", 100)).unwrap();
    assert_eq!(server.cli(&["DEBUG", "RELOAD", "NOSAVE"]).trim(), "OK");

    // Both running wrappers (and a handle opened now) never answer "absent" for them.
    all_present(&first, &after);
    all_present(&second, &after);
    never_absent_from_the_filter(&target, &after);
    // The first process to see it flagged the shards: a process that knew nothing of the
    // newer counts is told too.
    drop((first, second));
    never_absent_from_the_filter(&target, &after);

    // A writer repairs the filter from the store (every key since the coverage the save
    // holds) and trusts it again: nothing lost, and the filter answers alone again.
    let again = wrapper(&store, &target);
    again.insert("later").unwrap();
    assert!(again.is_trusted());
    all_present(&again, &after);
    all_present(&again, &before);
    let filter = RedisFilter::open(&target, NAME).unwrap();
    assert!(filter.contains_each(&after).unwrap().iter().all(|&m| m));
    let avoided = again.lookups_avoided();
    for key in keys("never", 200) {
        assert_ne!(again.contains(&key).unwrap(), Lookup::Present);
    }
    assert!(again.lookups_avoided() > avoided + 150);
}

/// `DUMP` of a key now, for a `RESTORE … REPLACE` later.
fn dump(url: &str, key: &str) -> Vec<u8> {
    let mut conn = redis::Client::open(url).unwrap().get_connection().unwrap();
    redis::cmd("DUMP").arg(key).query(&mut conn).unwrap()
}

fn restore(url: &str, key: &str, payload: &[u8]) {
    let mut conn = redis::Client::open(url).unwrap().get_connection().unwrap();
    let ok: String = redis::cmd("RESTORE")
        .arg(key)
        .arg(0)
        .arg(payload)
        .arg("REPLACE")
        .query(&mut conn)
        .unwrap();
    assert_eq!(ok, "OK");
}

#[test]
fn an_older_copy_of_every_shard_restored_is_never_answered_absent() {
    let server = RedisServer::start();
    let target = server.target();
    let store = Arc::new(MemoryStore::new());
    let first = wrapper(&store, &target);
    first.insert_all(keys("before", 500)).unwrap();
    let shards: Vec<String> = (0..8).map(|s| format!("bloom:{{{NAME}:{s}}}")).collect();
    let copies: Vec<Vec<u8>> = shards.iter().map(|k| dump(&server.url(), k)).collect();
    let after = keys("after", 500);
    first.insert_all(&after).unwrap();
    // Another wrapper attaches: it records the coverage, and the counts with it.
    let recorder = wrapper(&store, &target);
    drop(recorder);
    for (key, copy) in shards.iter().zip(&copies) {
        restore(&server.url(), key, copy);
    }
    // The writer that saw newer counts.
    all_present(&first, &after);
    drop(first);
    // A process that never saw them: the epoch records were written at newer counts than
    // the shards now hold.
    never_absent_from_the_filter(&target, &after);
    // Repaired from the store, from its start (the records' coverage is not what the
    // shards hold).
    let again = wrapper(&store, &target);
    again.insert("later").unwrap();
    assert!(again.is_trusted());
    all_present(&again, &after);
    let filter = RedisFilter::open(&target, NAME).unwrap();
    assert!(filter.contains_each(&after).unwrap().iter().all(|&m| m));
}

#[test]
fn a_filter_handle_sees_its_own_shard_go_back() {
    let server = RedisServer::start();
    let target = server.target();
    let filter = RedisFilter::create(&target, NAME, config()).unwrap();
    filter.insert_all(keys("before", 300)).unwrap();
    let key = format!("bloom:{{{NAME}:3}}");
    let copy = dump(&server.url(), &key);
    let after = keys("after", 300);
    filter.insert_all(&after).unwrap();
    restore(&server.url(), &key, &copy);
    // The handle saw shard 3 at a newer count: its answers and its inserts stop.
    assert!(matches!(
        filter.contains_each(&after),
        Err(RedisFilterError::Unverified { shard: 3, .. })
    ));
    assert!(matches!(
        filter.insert_all(keys("more", 300)),
        Err(RedisFilterError::Unverified { .. })
    ));
    // Every key added again declares it whole: it answers again, the keys' bits back.
    let all: Vec<String> = keys("before", 300)
        .into_iter()
        .chain(after.clone())
        .collect();
    filter.restore_whole(&all, None).unwrap();
    assert!(filter.contains_each(&after).unwrap().iter().all(|&m| m));
    filter.insert("next").unwrap();
}

#[test]
fn a_shard_put_back_and_overtaken_by_other_writers_is_still_caught() {
    let server = RedisServer::start();
    let target = server.target();
    let filter = RedisFilter::create(&target, NAME, config()).unwrap();
    filter.insert_all(keys("before", 300)).unwrap();
    let key = format!("bloom:{{{NAME}:3}}");
    let copy = dump(&server.url(), &key);
    let after = keys("after", 300);
    filter.insert_all(&after).unwrap();
    restore(&server.url(), &key, &copy);
    // Other processes write to the shard after it was put back, past the count this one
    // saw: the count alone no longer tells. (Their increments, without bits: what another
    // writer's `BITFIELD … INCRBY` does to the counter.)
    let len: usize = server.cli(&["STRLEN", &key]).trim().parse().unwrap();
    let counter = ((len - 8) * 8).to_string();
    server.cli(&["BITFIELD", &key, "INCRBY", "i64", &counter, "1000"]);
    // The key this process wrote last to the shard has a bit clear again: caught.
    assert!(matches!(
        filter.contains_each(&after),
        Err(RedisFilterError::Unverified { shard: 3, .. })
    ));
    // Flagged for every process: a handle that saw nothing is told too.
    never_absent_from_the_filter(&target, &after);
    // Made whole again (every key added): it answers again.
    let all: Vec<String> = keys("before", 300)
        .into_iter()
        .chain(after.clone())
        .collect();
    filter.restore_whole(&all, None).unwrap();
    assert!(filter.contains_each(&after).unwrap().iter().all(|&m| m));
    filter.insert("next").unwrap();
}
