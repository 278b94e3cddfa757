//! `PostgresStore` against PostgreSQL used directly, in the same run on one local server
//! started here with PostgreSQL's default settings (every commit flushed to disk), as paired
//! ratios: each round runs the subject and its peer back to back, and the report gives the
//! median ratio and its interquartile range.
//!
//! - **Absent-key lookups**: `FilteredStore<PostgresStore>::contains` of keys never inserted
//!   (100,000 keys in the store) against a prepared point query on a plain table with the same
//!   keys as its primary key (target: at least 50 times faster).
//! - **Batched inserts**: `FilteredStore::insert_all` of 1,000 new keys per transaction
//!   against a raw `INSERT … SELECT unnest($1) ON CONFLICT DO NOTHING` of 1,000 keys per
//!   statement (target: within 1.5 times); and one call of 100,000 keys against one raw
//!   statement inserting the same number in one transaction.
//! - **Commits per second** with 1, 4 and 16 writers at once (each with its own store and
//!   connection), one key per commit and 100 keys per commit, beside the same raw inserts.
//!
//! Run with `cargo bench -p bloom-postgres --bench postgres_ratio` (needs Debian's
//! `postgresql`; a few minutes).

use std::time::Instant;

use bloom_postgres::PostgresStore;
use bloom_postgres::testing::TempServer;
use bloom_store::{FilterOptions, FilteredStore, PrimaryStore};
use bloom_testing::bench::report;

const STORED: usize = 100_000;
const ABSENT_FILTER: usize = 200_000;
const ABSENT_QUERIES: usize = 3_000;
const BATCH: usize = 1_000;
const BATCHES: usize = 10;
const ONE_CALL: usize = 100_000;
const ROUNDS: usize = 5;

fn seconds(f: impl FnOnce()) -> f64 {
    let start = Instant::now();
    f();
    start.elapsed().as_secs_f64()
}

fn keys(prefix: &str, n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| format!("{prefix}-{i:08}").into_bytes())
        .collect()
}

fn as_refs(batch: &[Vec<u8>]) -> Vec<&[u8]> {
    batch.iter().map(Vec::as_slice).collect()
}

/// Seconds to run `f` on `keys`, [`BATCH`] keys at a time.
fn in_batches(keys: &[Vec<u8>], mut f: impl FnMut(&[&[u8]])) -> f64 {
    seconds(|| {
        for batch in keys.chunks(BATCH) {
            f(&as_refs(batch));
        }
    })
}

fn raw_client(server: &TempServer) -> postgres::Client {
    server.client("bench").expect("a client")
}

fn raw_insert(client: &mut postgres::Client, batch: &[&[u8]]) {
    client
        .execute(
            "INSERT INTO raw_keys (key) SELECT unnest($1::bytea[]) ON CONFLICT DO NOTHING",
            &[&batch],
        )
        .expect("raw insert");
}

fn lookups(server: &TempServer, filtered: &FilteredStore<&PostgresStore>) {
    let mut raw = raw_client(server);
    let point = raw
        .prepare("SELECT EXISTS (SELECT 1 FROM raw_keys WHERE key = $1)")
        .expect("prepare");
    let mut ratios = Vec::new();
    let mut store_ratios = Vec::new();
    for round in 0..ROUNDS {
        let absent = keys(&format!("absent-{round}"), ABSENT_FILTER);
        let mut present = 0u64;
        let filter_rate = ABSENT_FILTER as f64
            / seconds(|| {
                for key in &absent {
                    // A false positive is confirmed by the store (and found absent).
                    present += u64::from(filtered.contains(key.as_slice()).unwrap().is_present());
                }
            });
        assert_eq!(present, 0);
        let query_rate = ABSENT_QUERIES as f64
            / seconds(|| {
                for key in &absent[..ABSENT_QUERIES] {
                    let found: bool = raw.query_one(&point, &[&key.as_slice()]).unwrap().get(0);
                    assert!(!found);
                }
            });
        let store_rate = ABSENT_QUERIES as f64
            / seconds(|| {
                for key in &absent[..ABSENT_QUERIES] {
                    assert!(!filtered.store().contains(key).unwrap());
                }
            });
        ratios.push(filter_rate / query_rate);
        store_ratios.push(store_rate / query_rate);
    }
    report(
        "absent lookups: filter / raw point query (x faster)",
        ratios,
    );
    report(
        "absent lookups: PostgresStore::contains / raw point query",
        store_ratios,
    );
}

fn inserts(server: &TempServer, filtered: &FilteredStore<&PostgresStore>) {
    let mut raw = raw_client(server);
    let mut ratios = Vec::new();
    let mut store_ratios = Vec::new();
    for round in 0..ROUNDS {
        let ours = keys(&format!("ours-{round}"), BATCH * BATCHES);
        let plain = keys(&format!("plain-{round}"), BATCH * BATCHES);
        let bare = keys(&format!("bare-{round}"), BATCH * BATCHES);
        let subject = in_batches(&ours, |batch| drop(filtered.insert_all(batch).unwrap()));
        let peer = in_batches(&plain, |batch| raw_insert(&mut raw, batch));
        let store_only = in_batches(&bare, |batch| {
            drop(filtered.store().insert_all(batch).unwrap());
        });
        ratios.push(subject / peer);
        store_ratios.push(store_only / peer);
    }
    report(
        "batched inserts: FilteredStore::insert_all / raw (x time)",
        ratios,
    );
    report(
        "batched inserts: PostgresStore::insert_all / raw (x time)",
        store_ratios,
    );
    // One call, one transaction, [`ONE_CALL`] keys.
    let mut ratios = Vec::new();
    for round in 0..ROUNDS {
        let ours = keys(&format!("one-ours-{round}"), ONE_CALL);
        let plain = keys(&format!("one-plain-{round}"), ONE_CALL);
        let subject = seconds(|| drop(filtered.insert_all(&as_refs(&ours)).unwrap()));
        let peer = seconds(|| raw_insert(&mut raw, &as_refs(&plain)));
        ratios.push(subject / peer);
    }
    report(
        "one call of 100,000 keys: FilteredStore::insert_all / raw",
        ratios,
    );
}

/// Commits per second with `writers` threads, each committing `commits` transactions of
/// `per_commit` new keys.
fn commits_per_second(
    server: &TempServer,
    writers: usize,
    commits: usize,
    per_commit: usize,
    raw: bool,
) -> f64 {
    let params = server.params("bench");
    let tag = format!("c{writers}-{per_commit}-{raw}-{}", rand_tag());
    let ready = std::sync::Barrier::new(writers + 1);
    let elapsed = std::thread::scope(|s| {
        let handles: Vec<_> = (0..writers)
            .map(|w| {
                let (params, tag, ready) = (&params, &tag, &ready);
                s.spawn(move || {
                    let store = (!raw).then(|| PostgresStore::connect(params).unwrap());
                    let mut client = raw.then(|| server.client("bench").unwrap());
                    let all = keys(&format!("{tag}-{w}"), commits * per_commit);
                    ready.wait();
                    for batch in all.chunks(per_commit) {
                        let refs = as_refs(batch);
                        if let Some(store) = &store {
                            store.insert_all(&refs).unwrap();
                        } else if let Some(client) = client.as_mut() {
                            raw_insert(client, &refs);
                        }
                    }
                })
            })
            .collect();
        ready.wait();
        let start = Instant::now();
        for h in handles {
            h.join().unwrap();
        }
        start.elapsed().as_secs_f64()
    });
    (writers * commits) as f64 / elapsed
}

fn rand_tag() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

fn main() {
    let server = TempServer::start().expect("PostgreSQL (Debian's postgresql package)");
    server.create_database("bench").unwrap();
    raw_client(&server)
        .batch_execute("CREATE TABLE raw_keys (key bytea PRIMARY KEY)")
        .unwrap();
    let store = PostgresStore::connect(&server.params("bench")).unwrap();
    // Lookups at the planned rate: the filter is full (1% of absent keys are "maybe" and
    // cost a query).
    let (filtered, _) =
        FilteredStore::open_and_recover(&store, FilterOptions::new(STORED as u64, 0.01)).unwrap();
    let mut raw = raw_client(&server);
    for batch in keys("stored", STORED).chunks(BATCH) {
        let refs = as_refs(batch);
        filtered.insert_all(&refs).unwrap();
        raw_insert(&mut raw, &refs);
    }
    lookups(&server, &filtered);
    drop(filtered);
    // Inserts with room for them (no growth rebuild inside a timed round).
    let (filtered, _) =
        FilteredStore::open_and_recover(&store, FilterOptions::new(1_000_000, 0.01)).unwrap();
    inserts(&server, &filtered);
    drop(filtered);
    for (per_commit, commits) in [(1, 150), (100, 40)] {
        for writers in [1, 4, 16] {
            let ours = commits_per_second(&server, writers, commits, per_commit, false);
            let raw = commits_per_second(&server, writers, commits, per_commit, true);
            println!(
                "commits/s, {writers:>2} writers, {per_commit:>3} keys per commit: PostgresStore {ours:>8.0}  raw INSERT {raw:>8.0}  (ratio {:.2}; keys/s {:.0})",
                ours / raw,
                ours * per_commit as f64
            );
        }
    }
}
