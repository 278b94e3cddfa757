//! The counting filter against the plain filter of the same configuration (standard layout,
//! xxh3-128, utf8 keys; the counting filter's projection), at n = 10^6, p = 1%, one key per
//! call: insert, contains hit and miss, and remove (insert then remove, so the filter stays
//! full).
//!
//! Run with `cargo bench -p bloom-core --bench counting`. Compare ratios within one run.

use std::hint::black_box;

use bloom_core::{BloomFilter, CountingBloomFilter, FilterConfig, FilterParams, KeyEncoding};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

const ITEMS: usize = 1_000_000;
const FPR: f64 = 0.01;
const BATCH: usize = 1_000;

fn keys(prefix: &str) -> Vec<String> {
    (0..ITEMS).map(|i| format!("{prefix}-{i:020}")).collect()
}

fn config() -> FilterConfig {
    let params = FilterParams::for_false_positive_rate(ITEMS as u64, FPR).unwrap();
    FilterConfig::new(params).with_encoding(KeyEncoding::Utf8)
}

fn bench(c: &mut Criterion) {
    let inserted = keys("in");
    let absent = keys("out");
    let mut counting = CountingBloomFilter::new(config()).unwrap();
    let mut plain = BloomFilter::new(config()).unwrap();
    for key in &inserted {
        counting.insert(key);
        plain.insert(key);
    }
    let mut group = c.benchmark_group("counting-vs-plain");
    group.throughput(Throughput::Elements(BATCH as u64));
    let mut offset = 0;
    let mut next = move || {
        let start = offset;
        offset = (offset + BATCH) % ITEMS;
        start..start + BATCH
    };
    group.bench_function("plain/contains-hit", |b| {
        b.iter(|| {
            for key in &inserted[next()] {
                black_box(plain.contains(black_box(key)));
            }
        });
    });
    group.bench_function("counting/contains-hit", |b| {
        b.iter(|| {
            for key in &inserted[next()] {
                black_box(counting.contains(black_box(key)));
            }
        });
    });
    group.bench_function("plain/contains-miss", |b| {
        b.iter(|| {
            for key in &absent[next()] {
                black_box(plain.contains(black_box(key)));
            }
        });
    });
    group.bench_function("counting/contains-miss", |b| {
        b.iter(|| {
            for key in &absent[next()] {
                black_box(counting.contains(black_box(key)));
            }
        });
    });
    group.bench_function("plain/insert-again", |b| {
        b.iter(|| {
            for key in &inserted[next()] {
                black_box(plain.insert(black_box(key)));
            }
        });
    });
    group.bench_function("counting/insert-then-remove", |b| {
        b.iter(|| {
            for key in &absent[next()] {
                counting.insert(black_box(key));
                black_box(counting.remove(black_box(key)).is_ok());
            }
        });
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
