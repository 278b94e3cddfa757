//! Paired cost ratios against the bare SHA-256 digest, robust to a noisy shared machine.
//!
//! The criterion bench (`benches/filter.rs`) times each function in its own stretch of a few
//! seconds, so when the machine's speed drifts between stretches (other tenants, frequency),
//! the ratio of two of its numbers drifts with it. Here each round times one batch of 1,000
//! keys under the subject and the same keys under the bare digest back to back, in
//! alternating order, and the ratio is taken per round. The report gives the median ratio
//! and its interquartile range over many rounds.
//!
//! Reference rows put the filters' ratios in context: a 64 Kbit filter that stays in L1 (what
//! computing costs, without memory), and the floors: the digest plus seven independent loads
//! (or read-modify-writes, filling from empty) in an array the size of the n = 10^6 filter,
//! which is what any rule that touches k = 7 scattered words per key must pay on this
//! machine, one key at a time.
//!
//! A section pairs the batched calls (`insert_all`, `contains_each`) with one call per key
//! directly. The last ones pair `xxh3-128` + `blocked-512` with fastbloom, with its floor (the
//! same positions computed inline, no key encoding or dispatch) and NFC with UTF-8 on the same
//! ASCII keys, at n = 10^5 and 10^6.
//!
//! Run with `cargo bench -p bloom-core --bench ratio`. Same workload as `filter`: n = 10^6,
//! p = 1%, UTF-8 keys `record-<i>` and `absent-<i>`.

mod common;

use std::hint::black_box;
use std::time::{Duration, Instant};

use bloom_core::{BloomFilter, FilterConfig, FilterParams, KeyEncoding, Layout, PositionRule};
use sha2::{Digest, Sha256};

const ITEMS: usize = 1_000_000;
const FPR: f64 = 0.01;
const BATCH: usize = 1_000;
/// Rounds per subject: 3 passes over the 10^6 keys.
const ROUNDS: usize = 3 * ITEMS / BATCH;

fn keys(prefix: &str) -> Vec<String> {
    (0..ITEMS).map(|i| format!("{prefix}-{i}")).collect()
}

fn ours() -> BloomFilter {
    let params = FilterParams::for_false_positive_rate(ITEMS as u64, FPR).unwrap();
    BloomFilter::new(FilterConfig::new(params).with_encoding(KeyEncoding::Utf8)).unwrap()
}

fn digest(batch: &[String]) {
    for k in batch {
        black_box(Sha256::digest(k.as_bytes()));
    }
}

fn time(f: impl FnOnce()) -> Duration {
    let start = Instant::now();
    f();
    start.elapsed()
}

/// Runs `subject` on each batch of `keys` (told whether the walk over the keys restarts) and
/// the digest on the same batch, and prints the per-round ratio's quartiles.
fn paired(name: &str, keys: &[String], subject: impl FnMut(&[String], bool)) {
    paired_with(name, keys, subject, "digest", |batch, _| digest(batch));
}

/// Runs `subject` and `reference` on each batch of `keys`, back to back in alternating order,
/// and prints the quartiles of the per-round ratio `subject / reference`.
fn paired_with(
    name: &str,
    keys: &[String],
    mut subject: impl FnMut(&[String], bool),
    reference_name: &str,
    mut reference: impl FnMut(&[String], bool),
) {
    let mut ratios = Vec::with_capacity(ROUNDS);
    let (mut subject_total, mut reference_total) = (Duration::ZERO, Duration::ZERO);
    for round in 0..ROUNDS {
        let offset = (round * BATCH) % keys.len();
        let batch = &keys[offset..offset + BATCH];
        let restart = offset == 0;
        let (t_subject, t_reference) = if round % 2 == 0 {
            let s = time(|| subject(batch, restart));
            (s, time(|| reference(batch, restart)))
        } else {
            let r = time(|| reference(batch, restart));
            (time(|| subject(batch, restart)), r)
        };
        subject_total += t_subject;
        reference_total += t_reference;
        ratios.push(t_subject.as_secs_f64() / t_reference.as_secs_f64());
    }
    ratios.sort_by(f64::total_cmp);
    let q = |p: f64| ratios[((ratios.len() - 1) as f64 * p).round() as usize];
    let per_key = |d: Duration| d.as_secs_f64() * 1e9 / (ROUNDS * BATCH) as f64;
    println!(
        "{name:38} {:5.2}x  (IQR {:4.2}..{:4.2})  {:6.1} ns/key vs {reference_name} {:5.1} ns/key",
        q(0.5),
        q(0.25),
        q(0.75),
        per_key(subject_total),
        per_key(reference_total),
    );
}

/// A subject that fills `filter` from empty: `clear` runs whenever the walk over the keys
/// restarts, then `insert` takes the batch.
fn filling<F>(
    filter: &mut F,
    clear: fn(&mut F),
    insert: fn(&mut F, &[String]),
) -> impl FnMut(&[String], bool) {
    move |batch, restart| {
        if restart {
            clear(filter);
        }
        insert(filter, batch);
    }
}

fn main() {
    let present = keys("record");
    let absent = keys("absent");
    println!("ratio to the bare SHA-256 digest of the same keys, median over {ROUNDS} rounds");

    let mut f = ours();
    let insert: fn(&mut BloomFilter, &[String]) =
        |f, batch| batch.iter().for_each(|k| _ = black_box(f.insert(k)));
    let insert_all: fn(&mut BloomFilter, &[String]) = |f, batch| _ = black_box(f.insert_all(batch));
    paired(
        "insert (fill from empty)",
        &present,
        filling(&mut f, BloomFilter::clear, insert),
    );
    paired(
        "insert_all (fill from empty)",
        &present,
        filling(&mut f, BloomFilter::clear, insert_all),
    );
    let mut fast = fastbloom::BloomFilter::with_false_pos(FPR).expected_items(ITEMS);
    paired(
        "fastbloom insert (fill from empty)",
        &present,
        filling(&mut fast, fastbloom::BloomFilter::clear, |f, batch| {
            batch
                .iter()
                .for_each(|k| _ = black_box(f.insert(k.as_str())));
        }),
    );
    let mut classic = bloomfilter::Bloom::<str>::new_for_fp_rate(ITEMS, FPR).unwrap();
    paired(
        "bloomfilter insert (fill from empty)",
        &present,
        filling(&mut classic, bloomfilter::Bloom::clear, |f, batch| {
            batch.iter().for_each(|k| f.set(black_box(k.as_str())));
        }),
    );

    // The floor for any rule that reads k = 7 independent words per key: the digest, then 7
    // loads from an array the size of the filter, indexed by the digest. No filter does less.
    // Written, not just zeroed: untouched zeroed pages would all read the one shared zero page.
    let mut array: Vec<u64> = (0..f.as_words().len() as u64).collect();
    let seven_words = |key: &str, len: usize| {
        let d = Sha256::digest(key.as_bytes());
        let (mut a, b) = (
            u64::from_le_bytes(d[..8].try_into().unwrap()),
            u64::from_le_bytes(d[8..16].try_into().unwrap()),
        );
        [(); 7].map(|()| {
            let i = ((u128::from(a) * len as u128) >> 64) as usize;
            a = a.wrapping_add(b);
            i
        })
    };
    paired("floor: digest + 7 loads", &absent, |batch, _| {
        for k in batch {
            let acc = seven_words(k, array.len())
                .iter()
                .fold(0, |acc, &i| acc ^ array[i]);
            black_box(acc);
        }
    });
    paired(
        "floor: digest + 7 writes (fill)",
        &present,
        |batch, restart| {
            if restart {
                array.fill(0);
            }
            for k in batch {
                for (bit, i) in seven_words(k, array.len()).into_iter().enumerate() {
                    array[i] |= 1 << bit;
                }
            }
            black_box(&array);
        },
    );

    // Full filters from here on.
    f.insert_all(&present);
    present.iter().for_each(|k| {
        fast.insert(k.as_str());
        classic.set(k.as_str());
    });
    paired("insert (already present)", &present, |batch, _| {
        batch.iter().for_each(|k| _ = black_box(f.insert(k)));
    });
    paired("insert_all (already present)", &present, |batch, _| {
        black_box(f.insert_all(batch));
    });
    // A 64 Kbit filter stays in L1: what is left is the cost of computing, not of memory.
    let mut small = BloomFilter::new(
        FilterConfig::new(FilterParams::new(1 << 16, 7).unwrap()).with_encoding(KeyEncoding::Utf8),
    )
    .unwrap();
    paired("insert (64 Kbit filter, in L1)", &present, |batch, _| {
        batch.iter().for_each(|k| _ = black_box(small.insert(k)));
    });
    paired("contains (64 Kbit filter, in L1)", &absent, |batch, _| {
        batch.iter().for_each(|k| _ = black_box(small.contains(k)));
    });
    paired(
        "contains_each (64 Kbit filter, in L1)",
        &absent,
        |batch, _| {
            small
                .contains_each(batch)
                .for_each(|hit| _ = black_box(hit));
        },
    );

    for (what, set) in [("hit", &present), ("miss", &absent)] {
        paired(&format!("contains ({what})"), set, |batch, _| {
            batch.iter().for_each(|k| _ = black_box(f.contains(k)));
        });
        paired(&format!("contains_each ({what})"), set, |batch, _| {
            f.contains_each(batch).for_each(|hit| _ = black_box(hit));
        });
        paired(&format!("fastbloom contains ({what})"), set, |batch, _| {
            batch
                .iter()
                .for_each(|k| _ = black_box(fast.contains(k.as_str())));
        });
        paired(
            &format!("bloomfilter contains ({what})"),
            set,
            |batch, _| {
                batch
                    .iter()
                    .for_each(|k| _ = black_box(classic.check(k.as_str())));
            },
        );
    }

    // Batched against one-key calls directly. The fill rows need two filters (each starts
    // empty); the others share one, so both sides read the same memory.
    println!("\nbatched calls against one key per call, same keys, median over {ROUNDS} rounds");
    let (mut a, mut b) = (ours(), ours());
    paired_with(
        "insert_all (fill from empty)",
        &present,
        filling(&mut a, BloomFilter::clear, insert_all),
        "insert",
        filling(&mut b, BloomFilter::clear, insert),
    );
    let f = std::cell::RefCell::new(f);
    paired_with(
        "insert_all (already present)",
        &present,
        |batch, _| _ = black_box(f.borrow_mut().insert_all(batch)),
        "insert",
        |batch, _| {
            let mut f = f.borrow_mut();
            batch.iter().for_each(|k| _ = black_box(f.insert(k)));
        },
    );
    let f = f.into_inner();
    for (what, set) in [("hit", &present), ("miss", &absent)] {
        paired_with(
            &format!("contains_each ({what})"),
            set,
            |batch, _| f.contains_each(batch).for_each(|hit| _ = black_box(hit)),
            "contains",
            |batch, _| batch.iter().for_each(|k| _ = black_box(f.contains(k))),
        );
    }

    // 24-byte ASCII keys, as in the table and `benches/matrix.rs`.
    let key = |prefix: char, i: usize| format!("{prefix}ey-{i:020}");
    let present: Vec<String> = (0..ITEMS).map(|i| key('k', i)).collect();
    let absent: Vec<String> = (0..ITEMS).map(|i| key('m', i)).collect();
    sha256_blocked(&present, &absent);
    fast_rule(&present, &absent);
}

/// A `blocked-512` filter planned for `n` keys.
fn blocked(rule: PositionRule, n: usize, encoding: KeyEncoding) -> BloomFilter {
    let params = FilterParams::planned(Layout::Blocked512, n as u64, FPR).unwrap();
    let config = FilterConfig::new(params)
        .with_encoding(encoding)
        .with_rule(rule)
        .unwrap();
    BloomFilter::new(config).unwrap()
}

/// `sha256-double` + `blocked-512` against the bare digest, one key per call and batched, at
/// n = 10^5 and 10^6, on 24-byte keys.
fn sha256_blocked(present: &[String], absent: &[String]) {
    let insert: fn(&mut BloomFilter, &[String]) =
        |f, batch| batch.iter().for_each(|k| _ = black_box(f.insert(k)));
    let insert_all: fn(&mut BloomFilter, &[String]) = |f, batch| _ = black_box(f.insert_all(batch));
    for n in [ITEMS / 10, ITEMS] {
        println!("\nsha256-double blocked-512 (utf8), n = {n}, median over {ROUNDS} rounds");
        let (present, absent) = (&present[..n], &absent[..n]);
        let mut f = blocked(PositionRule::Sha256Double, n, KeyEncoding::Utf8);
        paired(
            "insert (fill from empty)",
            present,
            filling(&mut f, BloomFilter::clear, insert),
        );
        paired(
            "insert_all (fill from empty)",
            present,
            filling(&mut f, BloomFilter::clear, insert_all),
        );
        f.insert_all(present);
        for (what, set) in [("hit", present), ("miss", absent)] {
            paired(&format!("contains ({what})"), set, contains(&f));
            paired(&format!("contains_each ({what})"), set, |batch, _| {
                f.contains_each(batch).for_each(|hit| _ = black_box(hit));
            });
        }
    }
}

/// One `contains` per key of the batch.
fn contains(f: &BloomFilter) -> impl FnMut(&[String], bool) + '_ {
    move |batch, _| batch.iter().for_each(|k| _ = black_box(f.contains(k)))
}

/// `xxh3-128` + `blocked-512` against fastbloom, against its floor (the same positions
/// computed inline, `benches/common`), and NFC against UTF-8 on the same ASCII keys, one key
/// per call, at n = 10^5 and 10^6.
fn fast_rule(present: &[String], absent: &[String]) {
    let xxh3_blocked = |n, encoding| blocked(PositionRule::Xxh3_128, n, encoding);
    let insert: fn(&mut BloomFilter, &[String]) =
        |f, batch| batch.iter().for_each(|k| _ = black_box(f.insert(k)));
    for n in [ITEMS / 10, ITEMS] {
        println!(
            "\nxxh3-128 blocked-512 (utf8 unless named), n = {n}, median over {ROUNDS} rounds"
        );
        let (present, absent) = (&present[..n], &absent[..n]);
        let (mut ours, mut nfc) = (
            xxh3_blocked(n, KeyEncoding::Utf8),
            xxh3_blocked(n, KeyEncoding::Nfc),
        );
        let mut fast = fastbloom::BloomFilter::with_false_pos(FPR).expected_items(n);
        let mut floor = common::Skeleton::new("xxh3-128", common::xxh3_words, n, FPR);
        let fast_insert: fn(&mut fastbloom::BloomFilter, &[String]) = |f, batch| {
            batch
                .iter()
                .for_each(|k| _ = black_box(f.insert(k.as_str())));
        };
        paired_with(
            "insert (fill from empty)",
            present,
            filling(&mut ours, BloomFilter::clear, insert),
            "fastbloom",
            filling(&mut fast, fastbloom::BloomFilter::clear, fast_insert),
        );
        paired_with(
            "insert (fill from empty)",
            present,
            filling(&mut ours, BloomFilter::clear, insert),
            "floor",
            filling(&mut floor, common::Skeleton::clear, |f, batch| {
                black_box(f.insert_each(batch));
            }),
        );
        paired_with(
            "nfc insert (fill from empty)",
            present,
            filling(&mut nfc, BloomFilter::clear, insert),
            "utf8",
            filling(&mut ours, BloomFilter::clear, insert),
        );
        for f in [&mut ours, &mut nfc] {
            f.insert_all(present);
        }
        floor.insert_each(present);
        present.iter().for_each(|k| _ = fast.insert(k.as_str()));
        for (what, set) in [("hit", present), ("miss", absent)] {
            paired_with(
                &format!("contains ({what})"),
                set,
                contains(&ours),
                "fastbloom",
                |batch, _| {
                    batch
                        .iter()
                        .for_each(|k| _ = black_box(fast.contains(k.as_str())));
                },
            );
            paired_with(
                &format!("contains ({what})"),
                set,
                contains(&ours),
                "floor",
                |batch, _| _ = black_box(floor.contains_each(batch)),
            );
            paired_with(
                &format!("nfc contains ({what})"),
                set,
                contains(&nfc),
                "utf8",
                contains(&ours),
            );
        }
    }
}
