//! Insert and lookup cost of `sha256-double` against fastbloom, bloomfilter and the bare
//! SHA-256 digest of the same keys (the floor for any SHA-256 rule), at n = 10^6, p = 1%.
//!
//! `sha256-double` is measured one key per call (`insert`, `contains`) and a batch per call
//! (`insert_all`, `contains_each`); the peers have no batch API.
//!
//! - `insert` fills every filter from empty to its 10^6 keys, over and over: each filter is
//!   cleared when the key list wraps around, so almost every insert sets new bits, as when a
//!   filter is built.
//! - `insert-again` inserts keys that are already present, as when a snapshot is caught up.
//! - `contains-hit` and `contains-miss` query a full filter with its own keys and with
//!   disjoint ones.
//!
//! Run with `cargo bench -p bloom-core --bench filter`. Compare ratios within one run; the
//! absolute times on a shared machine are noise.

use std::hint::black_box;

use bloom_core::{BloomFilter, FilterConfig, FilterParams, KeyEncoding};
use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, Throughput, criterion_group, criterion_main};
use sha2::{Digest, Sha256};

const ITEMS: usize = 1_000_000;
const FPR: f64 = 0.01;
const BATCH: usize = 1_000;

fn keys(prefix: &str) -> Vec<String> {
    (0..ITEMS).map(|i| format!("{prefix}-{i}")).collect()
}

/// Hands out the next `BATCH` keys on each call, walking the whole key set so that the
/// filter's memory is touched as in real use. The flag is true when the walk starts over.
fn batches<'a>(keys: &'a [String]) -> impl FnMut() -> (&'a [String], bool) {
    let mut offset = 0;
    move || {
        let batch = &keys[offset..offset + BATCH];
        let restart = offset == 0;
        offset = (offset + BATCH) % keys.len();
        (batch, restart)
    }
}

fn ours() -> BloomFilter {
    let params = FilterParams::for_false_positive_rate(ITEMS as u64, FPR).unwrap();
    // Utf8 keeps the comparison about hashing and bits; NFC adds a quick-check pass.
    BloomFilter::new(FilterConfig::new(params).with_encoding(KeyEncoding::Utf8)).unwrap()
}

fn fast() -> fastbloom::BloomFilter {
    fastbloom::BloomFilter::with_false_pos(FPR).expected_items(ITEMS)
}

fn classic() -> bloomfilter::Bloom<str> {
    bloomfilter::Bloom::new_for_fp_rate(ITEMS, FPR).unwrap()
}

/// The three filters, each holding every key of `keys`.
fn full(keys: &[String]) -> (BloomFilter, fastbloom::BloomFilter, bloomfilter::Bloom<str>) {
    let (mut ours, mut fast, mut classic) = (ours(), fast(), classic());
    ours.insert_all(keys);
    for k in keys {
        fast.insert(k.as_str());
        classic.set(k.as_str());
    }
    (ours, fast, classic)
}

/// Times `run` on each batch of `keys`, told whether the walk over the keys restarts.
fn timed(
    group: &mut BenchmarkGroup<'_, WallTime>,
    id: &str,
    keys: &[String],
    mut run: impl FnMut(&[String], bool),
) {
    let mut next = batches(keys);
    group.bench_function(id, |b| {
        b.iter(|| {
            let (batch, restart) = next();
            run(batch, restart);
        });
    });
}

/// The bare SHA-256 digest of each key: the floor for any SHA-256 rule.
fn digest(group: &mut BenchmarkGroup<'_, WallTime>, keys: &[String]) {
    timed(group, "sha256-digest-only", keys, |batch, _| {
        batch
            .iter()
            .for_each(|k| _ = black_box(Sha256::digest(k.as_bytes())));
    });
}

/// Times `insert` on each batch of `keys`; with `fresh`, the filter is cleared first whenever
/// the walk over the keys restarts.
fn timed_insert<F>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    id: &str,
    keys: &[String],
    fresh: bool,
    filter: &mut F,
    clear: fn(&mut F),
    insert: fn(&mut F, &[String]),
) {
    timed(group, id, keys, |batch, restart| {
        if restart && fresh {
            clear(filter);
        }
        insert(filter, batch);
    });
}

/// Inserts into filters that are cleared whenever the key walk restarts (`fresh`), or into
/// filters that already hold every key.
fn inserts(c: &mut Criterion, name: &str, keys: &[String], fresh: bool) {
    let (mut ours, mut fast, mut classic) = if fresh {
        (ours(), fast(), classic())
    } else {
        full(keys)
    };
    let mut group = c.benchmark_group(name);
    group.throughput(Throughput::Elements(BATCH as u64));
    timed_insert(
        &mut group,
        "sha256-double",
        keys,
        fresh,
        &mut ours,
        BloomFilter::clear,
        |f, batch| {
            batch.iter().for_each(|k| _ = black_box(f.insert(k)));
        },
    );
    timed_insert(
        &mut group,
        "sha256-double-insert_all",
        keys,
        fresh,
        &mut ours,
        BloomFilter::clear,
        |f, batch| {
            black_box(f.insert_all(batch));
        },
    );
    timed_insert(
        &mut group,
        "fastbloom",
        keys,
        fresh,
        &mut fast,
        fastbloom::BloomFilter::clear,
        |f, batch| {
            batch
                .iter()
                .for_each(|k| _ = black_box(f.insert(k.as_str())));
        },
    );
    timed_insert(
        &mut group,
        "bloomfilter",
        keys,
        fresh,
        &mut classic,
        bloomfilter::Bloom::clear,
        |f, batch| {
            batch.iter().for_each(|k| f.set(black_box(k.as_str())));
        },
    );
    digest(&mut group, keys);
    group.finish();
}

fn lookups(
    c: &mut Criterion,
    name: &str,
    keys: &[String],
    full: &(BloomFilter, fastbloom::BloomFilter, bloomfilter::Bloom<str>),
) {
    let (ours, fast, classic) = full;
    let mut group = c.benchmark_group(name);
    group.throughput(Throughput::Elements(BATCH as u64));
    timed(&mut group, "sha256-double", keys, |batch, _| {
        batch.iter().for_each(|k| _ = black_box(ours.contains(k)));
    });
    timed(
        &mut group,
        "sha256-double-contains_each",
        keys,
        |batch, _| {
            ours.contains_each(batch).for_each(|hit| _ = black_box(hit));
        },
    );
    timed(&mut group, "fastbloom", keys, |batch, _| {
        batch
            .iter()
            .for_each(|k| _ = black_box(fast.contains(k.as_str())));
    });
    timed(&mut group, "bloomfilter", keys, |batch, _| {
        batch
            .iter()
            .for_each(|k| _ = black_box(classic.check(k.as_str())));
    });
    digest(&mut group, keys);
    group.finish();
}

fn bench(c: &mut Criterion) {
    let present = keys("record");
    let absent = keys("absent");
    inserts(c, "insert", &present, true);
    inserts(c, "insert-again", &present, false);
    let filters = full(&present);
    lookups(c, "contains-hit", &present, &filters);
    lookups(c, "contains-miss", &absent, &filters);
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).measurement_time(std::time::Duration::from_secs(3));
    targets = bench
}
criterion_main!(benches);
