//! Insert and lookup cost of `sha256-double` against fastbloom, bloomfilter and the bare
//! SHA-256 digest of the same keys (the floor for any SHA-256 rule), at n = 10^6, p = 1%.
//!
//! Run with `cargo bench -p bloom-core --bench filter`. Compare ratios within one run; the
//! absolute times on a shared machine are noise.

use std::hint::black_box;

use bloom_core::{BloomFilter, FilterConfig, FilterParams, KeyEncoding};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use sha2::{Digest, Sha256};

const ITEMS: usize = 1_000_000;
const FPR: f64 = 0.01;
const BATCH: usize = 1_000;

fn keys(prefix: &str) -> Vec<String> {
    (0..ITEMS).map(|i| format!("{prefix}-{i}")).collect()
}

/// Runs `op` on the next `BATCH` keys each iteration, walking the whole key set so that the
/// filter's memory is touched as in real use.
fn batches<'a>(keys: &'a [String]) -> impl FnMut() -> &'a [String] {
    let mut offset = 0;
    move || {
        let batch = &keys[offset..offset + BATCH];
        offset = (offset + BATCH) % keys.len();
        batch
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

fn bench(c: &mut Criterion) {
    let present = keys("record");
    let absent = keys("absent");

    let mut group = c.benchmark_group("insert");
    group.throughput(Throughput::Elements(BATCH as u64));
    {
        let mut f = ours();
        let mut next = batches(&present);
        group.bench_function("sha256-double", |b| {
            b.iter(|| next().iter().for_each(|k| _ = black_box(f.insert(k))));
        });
    }
    {
        let mut next = batches(&present);
        group.bench_function("sha256-digest-only", |b| {
            b.iter(|| {
                next()
                    .iter()
                    .for_each(|k| _ = black_box(Sha256::digest(k.as_bytes())))
            });
        });
    }
    {
        let mut f = fast();
        let mut next = batches(&present);
        group.bench_function("fastbloom", |b| {
            b.iter(|| {
                next()
                    .iter()
                    .for_each(|k| _ = black_box(f.insert(k.as_str())))
            });
        });
    }
    {
        let mut f = classic();
        let mut next = batches(&present);
        group.bench_function("bloomfilter", |b| {
            b.iter(|| next().iter().for_each(|k| f.set(black_box(k.as_str()))));
        });
    }
    group.finish();

    let mut f_ours = ours();
    let mut f_fast = fast();
    let mut f_classic = classic();
    for k in &present {
        f_ours.insert(k);
        f_fast.insert(k.as_str());
        f_classic.set(k.as_str());
    }

    for (name, set) in [("contains-hit", &present), ("contains-miss", &absent)] {
        let mut group = c.benchmark_group(name);
        group.throughput(Throughput::Elements(BATCH as u64));
        let mut next = batches(set);
        group.bench_function(BenchmarkId::from_parameter("sha256-double"), |b| {
            b.iter(|| {
                next()
                    .iter()
                    .for_each(|k| _ = black_box(f_ours.contains(k)))
            });
        });
        let mut next = batches(set);
        group.bench_function(BenchmarkId::from_parameter("sha256-digest-only"), |b| {
            b.iter(|| {
                next()
                    .iter()
                    .for_each(|k| _ = black_box(Sha256::digest(k.as_bytes())))
            });
        });
        let mut next = batches(set);
        group.bench_function(BenchmarkId::from_parameter("fastbloom"), |b| {
            b.iter(|| {
                next()
                    .iter()
                    .for_each(|k| _ = black_box(f_fast.contains(k.as_str())))
            });
        });
        let mut next = batches(set);
        group.bench_function(BenchmarkId::from_parameter("bloomfilter"), |b| {
            b.iter(|| {
                next()
                    .iter()
                    .for_each(|k| _ = black_box(f_classic.check(k.as_str())))
            });
        });
        group.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).measurement_time(std::time::Duration::from_secs(3));
    targets = bench
}
criterion_main!(benches);
