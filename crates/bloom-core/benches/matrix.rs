//! Every position rule × layout, one key per call and batched, against the bare digests and
//! the peers (fastbloom, bloomfilter), at n = 10^5, 10^6 and 10^7, p = 1%.
//!
//! Each number is the median of 9 rounds (`ROUNDS=n` to change); within a round every subject runs one pass over the
//! same keys, in a rotating order, so a noisy neighbour slows every subject of that round
//! alike. Keys are 24 bytes of ASCII. A pass is up to 10^6 operations: inserts start from an
//! empty filter (cleared before each pass), hits query inserted keys, misses disjoint ones.
//!
//! `cargo bench -p bloom-core --bench matrix` (a few minutes; `-- 5` or `-- 6` for one size;
//! `ONLY=sha256,nfc` to time only the filters whose name contains one of those).
//! The report is a Markdown table of ns per operation and ratios; compare within one run.

mod common;

use std::hint::black_box;
use std::time::Instant;

use bloom_core::{BloomFilter, FilterConfig, FilterParams, KeyEncoding, Layout, PositionRule};
use sha2::{Digest, Sha256};

const FPR: f64 = 0.01;
/// Rounds per cell (the median is reported); `ROUNDS=n` in the environment overrides it.
const ROUNDS: usize = 9;
const MAX_PASS: usize = 1_000_000;

fn key(prefix: char, i: usize) -> String {
    format!("{prefix}ey-{i:020}")
}

#[derive(Clone, Copy, PartialEq)]
enum Op {
    Insert,
    Hit,
    Miss,
}

/// Something to time: one pass of `op` over `keys`, returning a checksum to keep it alive.
trait Subject {
    fn name(&self) -> String;
    fn prepare(&mut self, op: Op, inserted: &[String]);
    fn pass(&mut self, op: Op, keys: &[String]) -> u64;
}

struct Ours {
    name: String,
    filter: BloomFilter,
    batched: bool,
}

impl Ours {
    fn new(
        rule: PositionRule,
        layout: Layout,
        encoding: KeyEncoding,
        batched: bool,
        n: usize,
    ) -> Self {
        let params = FilterParams::planned_for(rule, layout, n as u64, FPR).unwrap();
        let config = FilterConfig::new(params)
            .with_encoding(encoding)
            .with_rule(rule)
            .unwrap();
        Self {
            name: format!(
                "{rule} {layout}{}{}",
                if encoding == KeyEncoding::Utf8 {
                    ""
                } else {
                    ", nfc"
                },
                if batched { ", batched" } else { "" }
            ),
            filter: BloomFilter::new(config).unwrap(),
            batched,
        }
    }
}

impl Subject for Ours {
    fn name(&self) -> String {
        self.name.clone()
    }
    fn prepare(&mut self, op: Op, inserted: &[String]) {
        self.filter.clear();
        if op != Op::Insert {
            self.filter.insert_all(inserted);
        }
    }
    fn pass(&mut self, op: Op, keys: &[String]) -> u64 {
        match (op, self.batched) {
            (Op::Insert, false) => keys.iter().map(|k| u64::from(self.filter.insert(k))).sum(),
            (Op::Insert, true) => self.filter.insert_all(keys),
            (_, false) => keys
                .iter()
                .map(|k| u64::from(self.filter.contains(k)))
                .sum(),
            (_, true) => self.filter.contains_each(keys).map(u64::from).sum(),
        }
    }
}

struct Fast(fastbloom::BloomFilter, usize);

impl Subject for Fast {
    fn name(&self) -> String {
        "fastbloom 0.17".into()
    }
    fn prepare(&mut self, op: Op, inserted: &[String]) {
        self.0 = fastbloom::BloomFilter::with_false_pos(FPR).expected_items(self.1);
        if op != Op::Insert {
            for k in inserted {
                self.0.insert(k.as_str());
            }
        }
    }
    fn pass(&mut self, op: Op, keys: &[String]) -> u64 {
        match op {
            Op::Insert => keys
                .iter()
                .map(|k| u64::from(self.0.insert(k.as_str())))
                .sum(),
            _ => keys
                .iter()
                .map(|k| u64::from(self.0.contains(k.as_str())))
                .sum(),
        }
    }
}

struct Classic(bloomfilter::Bloom<str>, usize);

impl Subject for Classic {
    fn name(&self) -> String {
        "bloomfilter 3".into()
    }
    fn prepare(&mut self, op: Op, inserted: &[String]) {
        self.0 = bloomfilter::Bloom::new_for_fp_rate(self.1, FPR).unwrap();
        if op != Op::Insert {
            for k in inserted {
                self.0.set(k.as_str());
            }
        }
    }
    fn pass(&mut self, op: Op, keys: &[String]) -> u64 {
        match op {
            Op::Insert => keys
                .iter()
                .map(|k| u64::from(!self.0.check_and_set(k.as_str())))
                .sum(),
            _ => keys
                .iter()
                .map(|k| u64::from(self.0.check(k.as_str())))
                .sum(),
        }
    }
}

/// The bare hash of each key, the floor of the rules that use it.
struct Digest256;

impl Subject for Digest256 {
    fn name(&self) -> String {
        "SHA-256 digest".into()
    }
    fn prepare(&mut self, _: Op, _: &[String]) {}
    fn pass(&mut self, _: Op, keys: &[String]) -> u64 {
        keys.iter()
            .map(|k| u64::from(Sha256::digest(black_box(k.as_bytes()))[0]))
            .sum()
    }
}

struct DigestXxh3;

impl Subject for DigestXxh3 {
    fn name(&self) -> String {
        "XXH3-128 digest".into()
    }
    fn prepare(&mut self, _: Op, _: &[String]) {}
    fn pass(&mut self, _: Op, keys: &[String]) -> u64 {
        keys.iter()
            .map(|k| xxhash_rust::xxh3::xxh3_128(black_box(k.as_bytes())) as u64 & 1)
            .sum()
    }
}

/// The floor rows: a rule's positions written inline with nothing around them; lookups
/// batched as `contains_each` batches them when the flag is set.
struct Floor<H>(common::Skeleton<H>, bool);

impl<H: Fn(&[u8]) -> (u64, u64)> Subject for Floor<H> {
    fn name(&self) -> String {
        format!(
            "floor: inline {} + blocked-512 probe{}",
            self.0.name,
            if self.1 { ", batched lookups" } else { "" }
        )
    }
    fn prepare(&mut self, op: Op, inserted: &[String]) {
        self.0.clear();
        if op != Op::Insert {
            self.0.insert_each(inserted);
        }
    }
    fn pass(&mut self, op: Op, keys: &[String]) -> u64 {
        match op {
            Op::Insert => self.0.insert_each(keys),
            _ if self.1 => self.0.contains_batched(keys),
            _ => self.0.contains_each(keys),
        }
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let exponents: Vec<u32> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .filter(|e| (3..=8).contains(e))
        .collect();
    let exponents = if exponents.is_empty() {
        vec![5, 6, 7]
    } else {
        exponents
    };
    let rounds = std::env::var("ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(ROUNDS);
    println!("| n | subject | insert ns | hit ns | miss ns |");
    println!("|---|---|---|---|---|");
    for exp in exponents {
        let n = 10usize.pow(exp);
        let inserted: Vec<String> = (0..n).map(|i| key('k', i)).collect();
        let pass = n.min(MAX_PASS);
        let absent: Vec<String> = (0..pass).map(|i| key('m', i)).collect();
        let mut subjects: Vec<Box<dyn Subject>> = vec![
            Box::new(Digest256),
            Box::new(DigestXxh3),
            Box::new(Floor(
                common::Skeleton::new("xxh3-128", common::xxh3_words, n, FPR),
                false,
            )),
            Box::new(Floor(
                common::Skeleton::new("SHA-256", common::sha256_words, n, FPR),
                false,
            )),
            Box::new(Floor(
                common::Skeleton::new("SHA-256", common::sha256_words, n, FPR),
                true,
            )),
            Box::new(Fast(
                fastbloom::BloomFilter::with_false_pos(FPR).expected_items(n),
                n,
            )),
            Box::new(Classic(
                bloomfilter::Bloom::new_for_fp_rate(n, FPR).unwrap(),
                n,
            )),
        ];
        for (rule, layout) in [
            (PositionRule::Sha256Double, Layout::Standard),
            (PositionRule::Sha256Double, Layout::Blocked512),
            (PositionRule::Xxh3_128, Layout::Standard),
            (PositionRule::Xxh3_128, Layout::Blocked512),
        ] {
            for batched in [false, true] {
                subjects.push(Box::new(Ours::new(
                    rule,
                    layout,
                    KeyEncoding::Utf8,
                    batched,
                    n,
                )));
            }
        }
        subjects.push(Box::new(Ours::new(
            PositionRule::Xxh3_128,
            Layout::Blocked512,
            KeyEncoding::Nfc,
            false,
            n,
        )));
        // `ONLY=a,b` keeps the filters whose name contains one of them (and the peers, digests
        // and floors the ratios are taken against).
        if let Ok(only) = std::env::var("ONLY") {
            subjects.retain(|s| {
                let name = s.name();
                name.starts_with("floor")
                    || !name.contains(" blocked-512") && !name.contains(" standard")
                    || only.split(',').any(|o| name.contains(o))
            });
        }
        let mut times = vec![[Vec::new(), Vec::new(), Vec::new()]; subjects.len()];
        let mut sink = 0u64;
        for (o, op) in [Op::Insert, Op::Hit, Op::Miss].into_iter().enumerate() {
            let keys = match op {
                Op::Miss => &absent[..],
                _ => &inserted[..pass],
            };
            for round in 0..rounds {
                for j in 0..subjects.len() {
                    let s = (j + round) % subjects.len();
                    subjects[s].prepare(op, &inserted);
                    let start = Instant::now();
                    sink = sink.wrapping_add(subjects[s].pass(op, keys));
                    times[s][o].push(start.elapsed().as_nanos() as f64 / keys.len() as f64);
                }
            }
        }
        for (s, subject) in subjects.iter().enumerate() {
            let [a, b, c] = times[s].clone();
            println!(
                "| 10^{exp} | {} | {:.1} | {:.1} | {:.1} |",
                subject.name(),
                median(a),
                median(b),
                median(c)
            );
        }
        black_box(sink);
    }
}
