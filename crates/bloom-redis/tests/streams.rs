//! The streams of batches (`RedisFilter::lookups`, `inserts`, and a restore's): they insert
//! and answer exactly as `insert_all` and `contains_each` do, a batch's answers come back in
//! the order the batches were sent, a refused key costs only its own batch, and after a
//! failure on Redis a stream answers nothing more.

use bloom_core::{FilterConfig, FilterParams, KeyEncoding, Layout};
use bloom_redis::{ModuleUse, RedisFilter, RedisFilterError, shard_key};
use bloom_testing::redis::RedisServer;

fn config() -> FilterConfig {
    let params = FilterParams::planned(Layout::sharded(4).unwrap(), 20_000, 0.01).unwrap();
    FilterConfig::new(params).with_encoding(KeyEncoding::Nfc)
}

fn keys(range: std::ops::Range<u32>) -> Vec<String> {
    range.map(|i| format!("k-{i}")).collect()
}

/// Every answer of a lookup stream over `probes`, sent `per_batch` at a time with an empty
/// batch after the first: one answer per key, in order, and one list per batch sent.
fn looked_up(filter: &RedisFilter, probes: &[String], per_batch: usize) -> Vec<bool> {
    let mut lookups = filter.lookups();
    let (mut sent, mut lists, mut answers) = (0, 0, Vec::new());
    for (i, batch) in probes.chunks(per_batch).enumerate() {
        let mut landed = vec![lookups.send(batch).unwrap()];
        sent += 1;
        if i == 0 {
            landed.push(lookups.send(Vec::<String>::new()).unwrap());
            sent += 1;
        }
        for list in landed.into_iter().flatten() {
            lists += 1;
            answers.extend(list);
        }
    }
    while let Some(list) = lookups.next_answers().unwrap() {
        lists += 1;
        answers.extend(list);
    }
    assert_eq!(lists, sent, "one list of answers per batch sent");
    answers
}

#[test]
fn streams_insert_and_answer_as_the_calls_do() {
    let plain = RedisServer::start();
    let module = RedisServer::start_with_module(&[]);
    for (server, module_use) in [(&plain, ModuleUse::Never), (&module, ModuleUse::Required)] {
        let target = server.target().with_module(module_use);
        let streamed = RedisFilter::create(&target, "streamed", config()).unwrap();
        let called = RedisFilter::create(&target, "called", config()).unwrap();
        let added = keys(0..10_000);

        let mut inserts = streamed.inserts();
        for batch in added.chunks(3_000) {
            inserts.send(batch).unwrap();
        }
        // A key the encoding refuses costs its own batch only.
        let refused = inserts.send([&b"ok"[..], &b"\xff"[..]]);
        assert!(
            matches!(refused, Err(RedisFilterError::Key(_))),
            "{refused:?}"
        );
        inserts.send(Vec::<String>::new()).unwrap();
        let changed = inserts.finish().unwrap();
        assert_eq!(changed, called.insert_all(&added).unwrap());
        assert_eq!(
            streamed.contains("ok").unwrap(),
            called.contains("ok").unwrap(),
            "nothing of a refused batch went in"
        );

        let probes = keys(5_000..15_000);
        let answers = looked_up(&streamed, &probes, 2_500);
        assert_eq!(answers, called.contains_each(&probes).unwrap());
        assert!(answers[..5_000].iter().all(|&maybe| maybe));
        assert!(answers[5_000..].iter().any(|&maybe| !maybe));
        let mut lookups = streamed.lookups();
        let refused = lookups.send([&b"\xff"[..]]);
        assert!(
            matches!(refused, Err(RedisFilterError::Key(_))),
            "{refused:?}"
        );
        assert_eq!(lookups.send(["k-1"]).unwrap(), None);
        assert_eq!(lookups.next_answers().unwrap(), Some(vec![true]));
        assert_eq!(lookups.next_answers().unwrap(), None);

        // A restore's stream adds as the restore's calls do, and then declares the filter whole.
        let mut restore = streamed.restore();
        for batch in added.chunks(4_000) {
            restore.inserts().send(batch).unwrap();
        }
        let more = keys(10_000..10_010);
        let new = called.insert_all(&more).unwrap();
        assert_eq!(restore.add(&more).unwrap(), new);
        assert_eq!(restore.finish(None).unwrap(), new);
        assert!(
            streamed
                .contains_each(&more)
                .unwrap()
                .iter()
                .all(|&maybe| maybe)
        );
        let answers = looked_up(&streamed, &probes, 999);
        assert_eq!(answers, called.contains_each(&probes).unwrap());
    }
}

#[test]
fn a_stream_that_failed_answers_nothing_more() {
    let server = RedisServer::start();
    let filter = RedisFilter::create(&server.target(), "lost", config()).unwrap();
    filter.insert_all(keys(0..1_000)).unwrap();
    for shard in 0..4 {
        server.cli(&["DEL", &shard_key("lost", shard)]);
    }
    let mut lookups = filter.lookups();
    let mut failed = None;
    for batch in keys(0..1_000).chunks(100) {
        match lookups.send(batch) {
            Ok(None) => {}
            Ok(Some(answers)) => panic!("a lost filter answered {answers:?}"),
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
    }
    assert!(
        matches!(failed, Some(RedisFilterError::LostState { .. })),
        "{failed:?}"
    );
    assert!(lookups.send(["k-1"]).is_err());
    assert!(lookups.next_answers().is_err());
    let mut inserts = filter.inserts();
    let sent = (0..3).try_for_each(|_| inserts.send(["k-1"]));
    assert!(sent.and_then(|()| inserts.finish()).is_err());
}

/// Keys that arrive slowly between batches (a pipe, `tail -f`) do not use up the time of the
/// batches already on the wire: a batch's replies are waited for from when they are read, so
/// a pause longer than the timeout between two batches is no failure.
#[test]
fn a_pause_longer_than_the_timeout_between_batches_is_no_failure() {
    let server = RedisServer::start();
    let timeout = std::time::Duration::from_secs(1);
    let target = server.target().with_timeout(timeout);
    let paused = RedisFilter::create(&target, "paused", config()).unwrap();
    let called = RedisFilter::create(&target, "called", config()).unwrap();

    let mut inserts = paused.inserts();
    inserts.send(keys(0..1_000)).unwrap();
    // The next keys are slow to come: the first batch's replies wait on the socket.
    std::thread::sleep(timeout * 5 / 2);
    inserts.send(keys(1_000..2_000)).unwrap();
    let changed = inserts.finish().unwrap();
    assert_eq!(changed, called.insert_all(keys(0..2_000)).unwrap());

    let mut lookups = paused.lookups();
    let landed = lookups.send(keys(0..1_000)).unwrap();
    assert!(
        landed.is_none(),
        "nothing is read before the stream is full"
    );
    std::thread::sleep(timeout * 5 / 2);
    let answers = lookups.next_answers().unwrap().unwrap();
    assert_eq!(answers.len(), 1_000);
    assert!(
        answers.iter().all(|&maybe| maybe),
        "every inserted key is found"
    );
    assert!(lookups.next_answers().unwrap().is_none());
}

/// A restore stopped before it is finished (a caller that met a bad key) still counts what it
/// sent: the item count grows by the keys that changed a bit, as after `insert_all`.
#[test]
fn a_stopped_restore_counts_the_keys_it_sent() {
    let server = RedisServer::start();
    let target = server.target();
    let stopped = RedisFilter::create(&target, "stopped", config()).unwrap();
    let called = RedisFilter::create(&target, "called", config()).unwrap();
    let before = stopped.info().unwrap().header.item_count;
    let mut restore = stopped.restore();
    for batch in keys(0..5_000).chunks(2_000) {
        restore.inserts().send(batch).unwrap();
    }
    let changed = restore.stop().unwrap();
    assert_eq!(changed, called.insert_all(keys(0..5_000)).unwrap());
    assert_eq!(stopped.info().unwrap().header.item_count, before + changed);
}
