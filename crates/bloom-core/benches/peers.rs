//! The speed of the default configuration and of each fast layout against peers, side by
//! side in one run: fastbloom 0.17, sbbf-rs-safe 0.3 (Parquet's split block with AVX2, fed
//! XXH3-64 hashes) and the bare hashes, at n = 10^5, 10^6 and 10^7 keys of 24 bytes, 1 %.
//!
//! Also the SHA-256 filters against the bare digest, and NFC against UTF-8 on ASCII keys.
//!
//! `cargo bench -p bloom-core --bench peers` (add a filter such as `-- 1e6/` for one size).
//! Each benchmark walks its keys in order, 1,000 per iteration, and reports time per key.
//! `BLOOM_PEERS_SIZES=1e5,1e6` limits the sizes.

mod common;

use std::hint::black_box;
use std::time::Duration;

use bloom_core::{BloomFilter, FilterConfig, KeyEncoding, Layout, PositionRule};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use sha2::{Digest, Sha256};

const FPR: f64 = 0.01;
const STEP: usize = 1_000;

/// `n` keys of exactly 24 bytes.
fn keys(prefix: &str, n: usize) -> Vec<String> {
    common::keys24(prefix, n)
}

fn sizes() -> Vec<(String, usize)> {
    let asked = std::env::var("BLOOM_PEERS_SIZES").unwrap_or_else(|_| "1e5,1e6,1e7".into());
    asked
        .split(',')
        .map(|s| {
            let n = match s.trim() {
                "1e5" => 100_000,
                "1e6" => 1_000_000,
                "1e7" => 10_000_000,
                other => other.parse().expect("a size: 1e5, 1e6, 1e7 or a number"),
            };
            (s.trim().to_owned(), n)
        })
        .collect()
}

fn ours(rule: PositionRule, layout: Layout, encoding: KeyEncoding, n: usize) -> BloomFilter {
    common::planned_filter(rule, layout, encoding, n, FPR)
}

fn default_filter(n: usize) -> BloomFilter {
    BloomFilter::new(FilterConfig::planned(n as u64, FPR).unwrap()).unwrap()
}

/// A walk over `keys`, `STEP` at a time, wrapping around.
struct Walk<'a> {
    keys: &'a [String],
    at: usize,
}

impl<'a> Walk<'a> {
    fn new(keys: &'a [String]) -> Self {
        Self { keys, at: 0 }
    }

    fn next(&mut self) -> &'a [String] {
        if self.at + STEP > self.keys.len() {
            self.at = 0;
        }
        let step = &self.keys[self.at..self.at + STEP];
        self.at += STEP;
        step
    }
}

fn peers(c: &mut Criterion) {
    for (label, n) in sizes() {
        let inserted = keys("record-", n);
        let absent = keys("absent-", n);
        let mut group = c.benchmark_group(label.clone());
        group.throughput(Throughput::Elements(STEP as u64));
        group.sample_size(20);
        group.warm_up_time(Duration::from_millis(500));
        group.measurement_time(Duration::from_secs(2));

        // Ours: the default configuration and each fast layout, one key per call.
        let subjects: Vec<(&str, BloomFilter)> = vec![
            ("default", default_filter(n)),
            (
                "xxh3-64 split-block-256 nfc",
                ours(
                    PositionRule::Xxh3_64,
                    Layout::SplitBlock256,
                    KeyEncoding::Nfc,
                    n,
                ),
            ),
            (
                "xxh3-64 split-block-512 nfc",
                ours(
                    PositionRule::Xxh3_64,
                    Layout::SplitBlock512,
                    KeyEncoding::Nfc,
                    n,
                ),
            ),
            (
                "xxh3-64 split-block-256 utf8",
                ours(
                    PositionRule::Xxh3_64,
                    Layout::SplitBlock256,
                    KeyEncoding::Utf8,
                    n,
                ),
            ),
            (
                "xxh64 split-block-256 utf8 (parquet)",
                ours(
                    PositionRule::Xxh64,
                    Layout::SplitBlock256,
                    KeyEncoding::Utf8,
                    n,
                ),
            ),
            (
                "xxh3-128 blocked-512 nfc (0.2 default)",
                ours(
                    PositionRule::Xxh3_128,
                    Layout::Blocked512,
                    KeyEncoding::Nfc,
                    n,
                ),
            ),
        ];
        for (name, mut filter) in subjects {
            let mut walk = Walk::new(&inserted);
            group.bench_function(BenchmarkId::new("insert", name), |b| {
                b.iter(|| {
                    for k in walk.next() {
                        black_box(filter.insert(k.as_str()));
                    }
                });
            });
            for k in &inserted {
                filter.insert(k.as_str());
            }
            for (op, keys) in [("hit", &inserted), ("miss", &absent)] {
                let mut walk = Walk::new(keys);
                group.bench_function(BenchmarkId::new(op, name), |b| {
                    b.iter(|| {
                        for k in walk.next() {
                            black_box(filter.contains(k.as_str()));
                        }
                    });
                });
            }
            if n >= 10_000_000 && name == "default" {
                // Batched: the many-key calls, whose cache misses overlap.
                let mut walk = Walk::new(&inserted);
                group.bench_function(BenchmarkId::new("insert batched", name), |b| {
                    b.iter(|| black_box(filter.insert_all(walk.next().iter().map(String::as_str))));
                });
                for (op, keys) in [("hit batched", &inserted), ("miss batched", &absent)] {
                    let mut walk = Walk::new(keys);
                    group.bench_function(BenchmarkId::new(op, name), |b| {
                        b.iter(|| {
                            black_box(
                                filter
                                    .contains_each(walk.next().iter().map(String::as_str))
                                    .filter(|&m| m)
                                    .count(),
                            )
                        });
                    });
                }
            }
        }

        // sbbf-rs-safe, 11 bits per key (its plan for 1 % with Parquet's rounding), fed
        // XXH3-64 of the same keys.
        let mut sbbf = sbbf_rs_safe::Filter::new(11, n);
        let hash = |k: &String| xxhash_rust::xxh3::xxh3_64(k.as_bytes());
        let mut walk = Walk::new(&inserted);
        group.bench_function(BenchmarkId::new("insert", "sbbf-rs-safe + xxh3-64"), |b| {
            b.iter(|| {
                for k in walk.next() {
                    black_box(sbbf.insert_hash(hash(k)));
                }
            });
        });
        for k in &inserted {
            sbbf.insert_hash(hash(k));
        }
        for (op, keys) in [("hit", &inserted), ("miss", &absent)] {
            let mut walk = Walk::new(keys);
            group.bench_function(BenchmarkId::new(op, "sbbf-rs-safe + xxh3-64"), |b| {
                b.iter(|| {
                    for k in walk.next() {
                        black_box(sbbf.contains_hash(hash(k)));
                    }
                });
            });
        }
        drop(sbbf);

        // fastbloom, planned for the same rate.
        let mut fast = fastbloom::BloomFilter::with_false_pos(FPR).expected_items(n);
        let mut walk = Walk::new(&inserted);
        group.bench_function(BenchmarkId::new("insert", "fastbloom"), |b| {
            b.iter(|| {
                for k in walk.next() {
                    black_box(fast.insert(k.as_str()));
                }
            });
        });
        for k in &inserted {
            fast.insert(k.as_str());
        }
        for (op, keys) in [("hit", &inserted), ("miss", &absent)] {
            let mut walk = Walk::new(keys);
            group.bench_function(BenchmarkId::new(op, "fastbloom"), |b| {
                b.iter(|| {
                    for k in walk.next() {
                        black_box(fast.contains(k.as_str()));
                    }
                });
            });
        }
        drop(fast);

        // The bare hashes: what no filter over them can go below.
        for (name, f) in [
            (
                "xxh3-64",
                (|k: &[u8]| xxhash_rust::xxh3::xxh3_64(k)) as fn(&[u8]) -> u64,
            ),
            ("xxh3-128", |k: &[u8]| xxhash_rust::xxh3::xxh3_128(k) as u64),
            ("xxh64", |k: &[u8]| xxhash_rust::xxh64::xxh64(k, 0)),
        ] {
            let mut walk = Walk::new(&inserted);
            group.bench_function(BenchmarkId::new("bare hash", name), |b| {
                b.iter(|| {
                    for k in walk.next() {
                        black_box(f(black_box(k.as_bytes())));
                    }
                });
            });
        }

        if n <= 1_000_000 {
            // SHA-256: the filters the store plans for keys an adversary picks, against the
            // bare digest.
            for (name, layout) in [
                ("sha256-double blocked-512", Layout::Blocked512),
                ("sha256-double split-block-512", Layout::SplitBlock512),
            ] {
                let mut filter = ours(PositionRule::Sha256Double, layout, KeyEncoding::Utf8, n);
                for k in &inserted {
                    filter.insert(k.as_str());
                }
                let mut walk = Walk::new(&absent);
                group.bench_function(BenchmarkId::new("miss", name), |b| {
                    b.iter(|| {
                        for k in walk.next() {
                            black_box(filter.contains(k.as_str()));
                        }
                    });
                });
            }
            let mut walk = Walk::new(&absent);
            group.bench_function(BenchmarkId::new("bare hash", "sha256"), |b| {
                b.iter(|| {
                    for k in walk.next() {
                        black_box(Sha256::digest(black_box(k.as_bytes())));
                    }
                });
            });
        }
        group.finish();
    }
}

criterion_group!(benches, peers);
criterion_main!(benches);
