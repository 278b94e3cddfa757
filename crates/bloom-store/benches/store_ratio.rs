//! Paired ratios for the store bench, robust to a noisy shared machine: each round runs the
//! subject and its peer back to back on the same keys (alternating which goes first) and
//! takes their ratio; the report gives the median ratio and its interquartile range.
//!
//! - `insert_all / rusqlite`: `FilteredStore::insert_all` of 10k new keys into `SqliteStore`
//!   against raw `rusqlite` inserting them into a plain `key BLOB PRIMARY KEY` table, each in
//!   one transaction on a fresh database file with WAL and `synchronous = NORMAL`.
//! - `insert_all of duplicates / rusqlite`: the same 10k keys inserted a second time (every
//!   one already in the store): `FilteredStore::insert_all` asks its filter first and reads
//!   the store for the "maybe"s instead of committing them, against raw `rusqlite`'s
//!   `INSERT OR IGNORE` of them.
//! - `SQLite point query / contains_each`: 10k absent keys looked up over 100k stored ones,
//!   as SQLite point queries on the store's table against `FilteredStore::contains_each` (how
//!   many times faster the filter answers).
//!
//! Run with `cargo bench -p bloom-store --bench store_ratio`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use bloom_store::{FilterOptions, FilteredStore, SqliteStore};
use bloom_testing::bench::report;

const BATCH: usize = 10_000;
const STORED: usize = 100_000;
const ROUNDS: usize = 41;

fn keys(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i:08}")).collect()
}

fn time(f: impl FnOnce()) -> Duration {
    let start = Instant::now();
    f();
    start.elapsed()
}

fn filtered(path: &std::path::Path) -> FilteredStore<SqliteStore> {
    let store = SqliteStore::open(path).unwrap();
    FilteredStore::open_and_recover(store, FilterOptions::new(STORED as u64 * 2, 0.01))
        .unwrap()
        .0
}

fn raw(path: &std::path::Path) -> rusqlite::Connection {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0))
        .unwrap();
    conn.execute_batch(
        "PRAGMA synchronous = NORMAL;
         CREATE TABLE records (key BLOB PRIMARY KEY NOT NULL);",
    )
    .unwrap();
    conn
}

fn raw_insert(conn: &mut rusqlite::Connection, keys: &[String]) {
    let tx = conn.transaction().unwrap();
    {
        let mut insert = tx
            .prepare_cached("INSERT OR IGNORE INTO records (key) VALUES (?1)")
            .unwrap();
        for key in keys {
            insert.execute([key.as_bytes()]).unwrap();
        }
    }
    tx.commit().unwrap();
}

/// `FilteredStore::insert_all` of 10k keys against raw rusqlite's, each on a fresh pair of
/// databases per round; with `again`, both insert the keys once first, and the timed insert
/// is all duplicates.
fn inserts(name: &str, again: bool) {
    let batch = keys("record", BATCH);
    let mut ratios = Vec::new();
    for round in 0..ROUNDS {
        let dir = tempfile::tempdir().unwrap();
        let store = filtered(&dir.path().join("db.sqlite"));
        let mut conn = raw(&dir.path().join("raw.sqlite"));
        if again {
            store.insert_all(&batch).unwrap();
            raw_insert(&mut conn, &batch);
        }
        let ours = || time(|| drop(black_box(store.insert_all(&batch).unwrap())));
        let mut theirs = || time(|| raw_insert(&mut conn, &batch));
        // Which goes first alternates, so that neither always finds the caches warm.
        let (ours, theirs) = if round % 2 == 0 {
            let ours = ours();
            (ours, theirs())
        } else {
            let theirs = theirs();
            (ours(), theirs)
        };
        ratios.push(ours.as_secs_f64() / theirs.as_secs_f64());
    }
    report(name, ratios);
}

fn lookups() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db.sqlite");
    let store = filtered(&path);
    for chunk in keys("record", STORED).chunks(BATCH) {
        store.insert_all(chunk).unwrap();
    }
    let absent = keys("absent", BATCH);
    let conn = rusqlite::Connection::open(&path).unwrap();
    let mut find = conn
        .prepare_cached(
            "SELECT 1 FROM bloom_changes WHERE key = ?1 AND kind = 1 AND removed_at IS NULL",
        )
        .unwrap();
    let mut point = || {
        for key in &absent {
            black_box(find.exists([key.as_bytes()]).unwrap());
        }
    };
    let mut each = Vec::new();
    let mut single = Vec::new();
    for _ in 0..ROUNDS {
        let sqlite = time(&mut point);
        let batched = time(|| drop(black_box(store.contains_each(&absent).unwrap())));
        let one_by_one = time(|| {
            for key in &absent {
                black_box(store.contains(key).unwrap());
            }
        });
        each.push(sqlite.as_secs_f64() / batched.as_secs_f64());
        single.push(sqlite.as_secs_f64() / one_by_one.as_secs_f64());
    }
    report("SQLite point query / contains_each", each);
    report("SQLite point query / contains", single);
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    inserts("insert_all / rusqlite (10k keys)", false);
    inserts("insert_all of duplicates / rusqlite", true);
    lookups();
}
