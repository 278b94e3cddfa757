//! What the filter saves over SQLite, and what the wrapper costs on top of it.
//!
//! - `insert 10k keys`: `FilteredStore::insert_all` into `SqliteStore` (bits, change log with
//!   history digests, keys table, guards; one transaction) against raw `rusqlite` inserting
//!   the same keys into a plain `key BLOB PRIMARY KEY` table in one transaction, with the same
//!   pragmas (WAL, `synchronous = NORMAL`). Each iteration starts from a fresh database file.
//! - `look up 10k absent keys`: over a store of 100k keys, `FilteredStore::contains_each` and
//!   `contains` (the filter answers; SQLite is asked only for false positives) against SQLite
//!   point queries on the same table (the store's own lookup, through its index `bloom_keys`)
//!   and on a plain `key BLOB PRIMARY KEY` table of the same keys, prepared once.
//!
//! Run with `cargo bench -p bloom-store --bench store`; the ratios to read are within each
//! group. `--bench store_ratio` times the same pairs back to back, round by round, which
//! keeps their ratio steady on a noisy machine.

use std::hint::black_box;
use std::path::Path;
use std::time::Duration;

use bloom_store::{FilterOptions, FilteredStore, SqliteStore};
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};

const BATCH: usize = 10_000;
const STORED: usize = 100_000;

fn keys(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i:08}")).collect()
}

fn options() -> FilterOptions {
    FilterOptions::new(STORED as u64 * 2, 0.01)
}

fn filtered(path: &Path) -> FilteredStore<SqliteStore> {
    let store = SqliteStore::open(path).unwrap();
    FilteredStore::open_and_recover(store, options()).unwrap().0
}

fn raw(path: &Path) -> rusqlite::Connection {
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

fn inserts(c: &mut Criterion) {
    let batch = keys("record", BATCH);
    let mut group = c.benchmark_group(format!("insert {}k keys", BATCH / 1000));
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(10));
    group.bench_function("FilteredStore::insert_all (SQLite, one transaction)", |b| {
        b.iter_batched(
            || {
                let dir = tempfile::tempdir().unwrap();
                let store = filtered(&dir.path().join("db.sqlite"));
                (dir, store)
            },
            |(dir, store)| {
                black_box(store.insert_all(&batch).unwrap());
                (dir, store)
            },
            BatchSize::PerIteration,
        );
    });
    group.bench_function("FilteredStore::insert, one transaction per key", |b| {
        b.iter_batched(
            || {
                let dir = tempfile::tempdir().unwrap();
                let store = filtered(&dir.path().join("db.sqlite"));
                (dir, store)
            },
            |(dir, store)| {
                for key in &batch[..BATCH / 10] {
                    black_box(store.insert(key).unwrap());
                }
                (dir, store)
            },
            BatchSize::PerIteration,
        );
    });
    group.bench_function("rusqlite, one transaction", |b| {
        b.iter_batched(
            || {
                let dir = tempfile::tempdir().unwrap();
                let conn = raw(&dir.path().join("raw.sqlite"));
                (dir, conn)
            },
            |(dir, mut conn)| {
                raw_insert(&mut conn, &batch);
                (dir, conn)
            },
            BatchSize::PerIteration,
        );
    });
    group.finish();
}

fn lookups(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db.sqlite");
    let store = filtered(&path);
    let stored = keys("record", STORED);
    for chunk in stored.chunks(BATCH) {
        store.insert_all(chunk).unwrap();
    }
    let mut plain = raw(&dir.path().join("raw.sqlite"));
    raw_insert(&mut plain, &stored);
    let absent = keys("absent", BATCH);
    let conn = rusqlite::Connection::open(&path).unwrap();
    let mut group = c.benchmark_group(format!("look up {}k absent keys", BATCH / 1000));
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(5));
    group.bench_function("FilteredStore::contains_each", |b| {
        b.iter(|| black_box(store.contains_each(&absent).unwrap()));
    });
    group.bench_function("FilteredStore::contains", |b| {
        b.iter(|| {
            for key in &absent {
                black_box(store.contains(key).unwrap());
            }
        });
    });
    group.bench_function(
        "SQLite point queries on the store's table (prepared)",
        |b| {
            let mut find = conn
            .prepare_cached(
                "SELECT 1 FROM bloom_changes WHERE key = ?1 AND kind = 1 AND removed_at IS NULL",
            )
            .unwrap();
            b.iter(|| {
                for key in &absent {
                    black_box(find.exists([key.as_bytes()]).unwrap());
                }
            });
        },
    );
    group.bench_function("SQLite point queries on a plain table (prepared)", |b| {
        let mut find = plain
            .prepare_cached("SELECT 1 FROM records WHERE key = ?1")
            .unwrap();
        b.iter(|| {
            for key in &absent {
                black_box(find.exists([key.as_bytes()]).unwrap());
            }
        });
    });
    group.finish();
}

criterion_group!(benches, inserts, lookups);
criterion_main!(benches);
