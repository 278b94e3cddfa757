//! Paired ratios of the default configuration against sbbf-rs-safe (fed XXH3-64) and
//! fastbloom, and of NFC against UTF-8 and SHA-256 against its digest, robust to a noisy
//! shared machine: each round times one batch of 1,000 keys (24 bytes) under the subject and
//! under the reference back to back, in alternating order, and the ratio is taken per round.
//! The report gives the median and interquartile range over the rounds (`benches/peers.rs`
//! times each one alone with criterion).
//!
//! `cargo bench -p bloom-core --bench peers_ratio` (`BLOOM_PEERS_SIZES=1e5,1e6` limits the
//! sizes; `BLOOM_PEERS_ROUNDS` sets the rounds per pair, 3,000 by default).

mod common;

use std::hint::black_box;
use std::time::{Duration, Instant};

use bloom_core::{BloomFilter, Filter, FilterConfig, KeyEncoding, Layout, PositionRule};
use sha2::{Digest, Sha256};

const FPR: f64 = 0.01;
const BATCH: usize = 1_000;

fn keys(prefix: &str, n: usize) -> Vec<String> {
    common::keys24(prefix, n)
}

fn time(f: impl FnOnce()) -> Duration {
    let start = Instant::now();
    f();
    start.elapsed()
}

/// `subject / reference` per round over batches of `keys`, median and quartiles.
fn paired(
    name: &str,
    keys: &[String],
    rounds: usize,
    mut subject: impl FnMut(&[String]),
    mut reference: impl FnMut(&[String]),
) {
    let mut ratios = Vec::with_capacity(rounds);
    let (mut ts, mut tr) = (Duration::ZERO, Duration::ZERO);
    for round in 0..rounds {
        let offset = (round * BATCH) % (keys.len() - BATCH + 1);
        let batch = &keys[offset..offset + BATCH];
        let (s, r) = if round % 2 == 0 {
            let s = time(|| subject(batch));
            (s, time(|| reference(batch)))
        } else {
            let r = time(|| reference(batch));
            (time(|| subject(batch)), r)
        };
        ts += s;
        tr += r;
        ratios.push(s.as_secs_f64() / r.as_secs_f64());
    }
    ratios.sort_by(f64::total_cmp);
    let q = |p: f64| ratios[((ratios.len() - 1) as f64 * p).round() as usize];
    let per_key = |d: Duration| d.as_secs_f64() * 1e9 / (rounds * BATCH) as f64;
    println!(
        "{name:52} {:5.2}x (IQR {:4.2}..{:4.2})  {:6.1} vs {:6.1} ns/key",
        q(0.5),
        q(0.25),
        q(0.75),
        per_key(ts),
        per_key(tr)
    );
}

fn ours(rule: PositionRule, layout: Layout, encoding: KeyEncoding, n: usize) -> BloomFilter {
    common::planned_filter(rule, layout, encoding, n, FPR)
}

fn main() {
    let rounds: usize = std::env::var("BLOOM_PEERS_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(3_000);
    let sizes = std::env::var("BLOOM_PEERS_SIZES").unwrap_or_else(|_| "1e5,1e6,1e7".into());
    let hash = |k: &String| xxhash_rust::xxh3::xxh3_64(k.as_bytes());
    for size in sizes.split(',') {
        let n: usize = match size.trim() {
            "1e5" => 100_000,
            "1e6" => 1_000_000,
            "1e7" => 10_000_000,
            other => other.parse().expect("a size"),
        };
        println!("== n = {size}: 24-byte keys, 1 %, median of {rounds} paired rounds");
        let present = keys("record-", n);
        let absent = keys("absent-", n);
        let mut default = BloomFilter::new(FilterConfig::planned(n as u64, FPR).unwrap()).unwrap();
        let mut sbbf = sbbf_rs_safe::Filter::new(11, n);
        let mut fast = fastbloom::BloomFilter::with_false_pos(FPR).expected_items(n);
        println!(
            "default: {} {} {}",
            default.config().rule(),
            default.config().layout(),
            default.config().encoding()
        );
        // Inserts into filters being filled: every walk inserts the same keys into both.
        paired(
            "insert: default / sbbf-rs-safe",
            &present,
            rounds,
            |b| {
                b.iter()
                    .for_each(|k| _ = black_box(default.insert(k.as_str())))
            },
            |b| {
                b.iter()
                    .for_each(|k| _ = black_box(sbbf.insert_hash(hash(k))))
            },
        );
        paired(
            "insert: default / fastbloom",
            &present,
            rounds,
            |b| {
                b.iter()
                    .for_each(|k| _ = black_box(default.insert(k.as_str())))
            },
            |b| {
                b.iter()
                    .for_each(|k| _ = black_box(fast.insert(k.as_str())))
            },
        );
        for k in &present {
            default.insert(k.as_str());
            sbbf.insert_hash(hash(k));
            fast.insert(k.as_str());
        }
        for (op, keys) in [("hit", &present), ("miss", &absent)] {
            paired(
                &format!("{op}: default / sbbf-rs-safe"),
                keys,
                rounds,
                |b| {
                    b.iter()
                        .for_each(|k| _ = black_box(default.contains(k.as_str())))
                },
                |b| {
                    b.iter()
                        .for_each(|k| _ = black_box(sbbf.contains_hash(hash(k))))
                },
            );
            paired(
                &format!("{op}: default / fastbloom"),
                keys,
                rounds,
                |b| {
                    b.iter()
                        .for_each(|k| _ = black_box(default.contains(k.as_str())))
                },
                |b| {
                    b.iter()
                        .for_each(|k| _ = black_box(fast.contains(k.as_str())))
                },
            );
            // A copy answers one at a time: the pair's second run would find the first's
            // lines in cache.
            let single = default.clone();
            paired(
                &format!("{op}: default batched / default one at a time"),
                keys,
                rounds,
                |b| {
                    _ = black_box(
                        default
                            .contains_each(b.iter().map(String::as_str))
                            .filter(|&m| m)
                            .count(),
                    )
                },
                |b| {
                    b.iter()
                        .for_each(|k| _ = black_box(single.contains(k.as_str())))
                },
            );
            // Collected into a Vec: the iterator's `next`, which `for` loops and `collect`
            // run, against one call a key collected alike.
            paired(
                &format!("{op}: default batched, collected / one at a time"),
                keys,
                rounds,
                |b| {
                    let answers: Vec<bool> = default
                        .contains_each(b.iter().map(String::as_str))
                        .collect();
                    _ = black_box(answers);
                },
                |b| {
                    let answers: Vec<bool> =
                        b.iter().map(|k| single.contains(k.as_str())).collect();
                    _ = black_box(answers);
                },
            );
            drop(single);
            if n >= 10_000_000 {
                paired(
                    &format!("{op}: default batched / sbbf-rs-safe one at a time"),
                    keys,
                    rounds,
                    |b| {
                        _ = black_box(
                            default
                                .contains_each(b.iter().map(String::as_str))
                                .filter(|&m| m)
                                .count(),
                        )
                    },
                    |b| {
                        b.iter()
                            .for_each(|k| _ = black_box(sbbf.contains_hash(hash(k))))
                    },
                );
            }
        }
        let mut single = default.clone();
        paired(
            "insert: default batched / default one at a time",
            &present,
            rounds,
            |b| _ = black_box(default.insert_all(b.iter().map(String::as_str))),
            |b| {
                b.iter()
                    .for_each(|k| _ = black_box(single.insert(k.as_str())))
            },
        );
        drop(single);
        if n >= 10_000_000 {
            paired(
                "insert: default batched / sbbf-rs-safe one at a time",
                &present,
                rounds,
                |b| _ = black_box(default.insert_all(b.iter().map(String::as_str))),
                |b| {
                    b.iter()
                        .for_each(|k| _ = black_box(sbbf.insert_hash(hash(k))))
                },
            );
        }
        drop((sbbf, fast));
        // NFC against UTF-8 on the same ASCII keys, the default layout and rule.
        let (rule, layout) = bloom_core::default_rule_and_layout(FPR);
        let mut utf8 = ours(rule, layout, KeyEncoding::Utf8, n);
        for k in &present {
            utf8.insert(k.as_str());
        }
        paired(
            "miss: default (nfc) / the same with utf8",
            &absent,
            rounds,
            |b| {
                b.iter()
                    .for_each(|k| _ = black_box(default.contains(k.as_str())))
            },
            |b| {
                b.iter()
                    .for_each(|k| _ = black_box(utf8.contains(k.as_str())))
            },
        );
        // Against the default before the split-block layouts: xxh3-128, blocked-512, NFC.
        let mut before = ours(
            PositionRule::Xxh3_128,
            Layout::Blocked512,
            KeyEncoding::Nfc,
            n,
        );
        for k in &present {
            before.insert(k.as_str());
        }
        for (op, keys) in [("hit", &present), ("miss", &absent)] {
            paired(
                &format!("{op}: default / xxh3-128 blocked-512 nfc"),
                keys,
                rounds,
                |b| {
                    b.iter()
                        .for_each(|k| _ = black_box(default.contains(k.as_str())))
                },
                |b| {
                    b.iter()
                        .for_each(|k| _ = black_box(before.contains(k.as_str())))
                },
            );
        }
        drop((default, utf8, before));
        if n <= 1_000_000 {
            for layout in [Layout::Blocked512, Layout::SplitBlock512] {
                let mut sha = ours(PositionRule::Sha256Double, layout, KeyEncoding::Utf8, n);
                for k in &present {
                    sha.insert(k.as_str());
                }
                paired(
                    &format!("miss: sha256-double {layout} / the bare digest"),
                    &absent,
                    rounds.min(1_000),
                    |b| {
                        b.iter()
                            .for_each(|k| _ = black_box(sha.contains(k.as_str())))
                    },
                    |b| {
                        b.iter()
                            .for_each(|k| _ = black_box(Sha256::digest(k.as_bytes())))
                    },
                );
            }
        }
    }
}
