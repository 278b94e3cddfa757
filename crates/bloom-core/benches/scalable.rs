//! How a scalable filter's lookups cost as it grows: chains of 1 to 12 stages holding the
//! same 2^20 keys at 1 % (growth 2, tightening 0.5, xxh3-128, UTF-8 keys), against one
//! `BloomFilter` planned for those keys at the same rate, and against growable-bloom-filter's
//! `GrowableBloom` (crates.io's scalable filter) with the same first capacity, rate, growth
//! and tightening, holding the same keys, in the same run. A key that is absent is probed in
//! every stage, so its cost grows with the stage count; a key that is there stops at the
//! first stage that holds it (newest first, where most keys are).
//!
//! Run with `cargo bench -p bloom-core --bench scalable`. Compare ratios within one run.

use std::hint::black_box;

use bloom_core::{BloomFilter, Filter, KeyEncoding, PositionRule, ScalableBloomFilter};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use growable_bloom_filter::{GrowableBloom, GrowableBloomBuilder};

const KEYS: u64 = 1 << 20;
const FPR: f64 = 0.01;
const BATCH: usize = 1_000;
const STAGES: [u32; 5] = [1, 2, 4, 8, 12];

fn keys(prefix: &str, n: u64) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i:016}")).collect()
}

/// The first capacity at which `stages` stages of growth 2 hold `KEYS` keys.
fn first_capacity(stages: u32) -> u64 {
    KEYS.div_ceil((1u64 << stages) - 1)
}

/// The peer with the same first capacity, rate, growth and tightening, holding `inserted`.
fn peer(stages: u32, inserted: &[String]) -> GrowableBloom {
    let mut peer = GrowableBloomBuilder::new()
        .estimated_insertions(first_capacity(stages) as usize)
        .desired_error_ratio(FPR)
        .growth_factor(2)
        .tightening_ratio(0.5)
        .build();
    for key in inserted {
        peer.insert(key.as_str());
    }
    peer
}

/// A chain of exactly `stages` stages holding `inserted`: its first stage is sized so that
/// `stages` stages of growth 2 hold them all.
fn chain(stages: u32, inserted: &[String]) -> ScalableBloomFilter {
    let first = first_capacity(stages);
    let mut chain = ScalableBloomFilter::builder(first)
        .false_positive_rate(FPR)
        .rule(PositionRule::Xxh3_128)
        .encoding(KeyEncoding::Utf8)
        .build()
        .unwrap();
    chain.insert_all(inserted.iter().map(String::as_str));
    assert_eq!(
        chain.stages().len() as u32,
        stages,
        "sized to {stages} stages"
    );
    chain
}

fn bench(c: &mut Criterion) {
    let inserted = keys("in", KEYS);
    let absent = keys("out", KEYS);
    let mut single = BloomFilter::builder(KEYS)
        .false_positive_rate(FPR)
        .rule(PositionRule::Xxh3_128)
        .encoding(KeyEncoding::Utf8)
        .build()
        .unwrap();
    single.insert_all(inserted.iter().map(String::as_str));
    let chains: Vec<(u32, ScalableBloomFilter)> =
        STAGES.iter().map(|&s| (s, chain(s, &inserted))).collect();
    let peers: Vec<(u32, GrowableBloom)> =
        STAGES.iter().map(|&s| (s, peer(s, &inserted))).collect();
    // What each answers for keys never inserted, and the chain's size, beside the times.
    let queries = &absent[..200_000];
    for ((stages, chain), (_, peer)) in chains.iter().zip(&peers) {
        let ours = queries
            .iter()
            .filter(|k| chain.contains(k.as_str()))
            .count();
        let theirs = queries.iter().filter(|k| peer.contains(k.as_str())).count();
        eprintln!(
            "{stages} stages: false-positive rate {:.5} (growable {:.5}), {:.2} bits per key",
            ours as f64 / queries.len() as f64,
            theirs as f64 / queries.len() as f64,
            chain.positions() as f64 / KEYS as f64,
        );
    }

    let mut offset = 0usize;
    let mut next = move || {
        let start = offset;
        offset = (offset + BATCH) % (KEYS as usize - BATCH);
        start..start + BATCH
    };
    for (name, probes) in [("contains-miss", &absent), ("contains-hit", &inserted)] {
        let mut group = c.benchmark_group(format!("scalable/{name}"));
        group.throughput(Throughput::Elements(BATCH as u64));
        group.bench_function("single-filter", |b| {
            b.iter(|| {
                for key in &probes[next()] {
                    black_box(single.contains(black_box(key.as_str())));
                }
            });
        });
        for ((stages, chain), (_, peer)) in chains.iter().zip(&peers) {
            group.bench_with_input(BenchmarkId::new("stages", stages), chain, |b, chain| {
                b.iter(|| {
                    for key in &probes[next()] {
                        black_box(chain.contains(black_box(key.as_str())));
                    }
                });
            });
            group.bench_with_input(BenchmarkId::new("growable", stages), peer, |b, peer| {
                b.iter(|| {
                    for key in &probes[next()] {
                        black_box(peer.contains(black_box(key.as_str())));
                    }
                });
            });
        }
        group.finish();
    }
    // Inserting a new key checks every stage first (a key already "maybe" takes no room).
    let mut group = c.benchmark_group("scalable/insert-new");
    group.throughput(Throughput::Elements(BATCH as u64));
    let fresh = keys("new", 64 * BATCH as u64);
    for &stages in &[1u32, 4, 12] {
        group.bench_function(BenchmarkId::new("stages", stages), |b| {
            b.iter_batched_ref(
                || chains.iter().find(|(s, _)| *s == stages).unwrap().1.clone(),
                |chain| {
                    for key in &fresh[..BATCH] {
                        black_box(chain.insert(black_box(key.as_str())));
                    }
                },
                criterion::BatchSize::LargeInput,
            );
        });
        group.bench_function(BenchmarkId::new("growable", stages), |b| {
            b.iter_batched_ref(
                || peers.iter().find(|(s, _)| *s == stages).unwrap().1.clone(),
                |peer| {
                    for key in &fresh[..BATCH] {
                        black_box(peer.insert(black_box(key.as_str())));
                    }
                },
                criterion::BatchSize::LargeInput,
            );
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30);
    targets = bench
}
criterion_main!(benches);
