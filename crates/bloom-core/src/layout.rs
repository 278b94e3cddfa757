//! Layouts: where a key's bits may land, and which false-positive formula goes with each.
//!
//! The derivation of positions for each layout is in `position/`, the formulas themselves in
//! `rates.rs`. Which formula plans for a layout is chosen here, next to the layout's
//! definition, so that the planner and the code cannot drift apart (as in RocksDB's
//! `bloom_impl.h`).

use crate::rates::{
    bits_per_key_for, blocked_rate, partitioned_rate, poisson_mixture, split_rate_256,
    split_rate_512, standard_rate,
};
use std::fmt;
use std::str::FromStr;

use bloom_format::LayoutId;

use crate::encoding::UnknownNameError;

/// How a filter's bits are arranged, and so where a key's positions may fall.
///
/// The numeric ids are part of the snapshot format and never change or get reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Layout {
    /// One flat array of `m` bits; a key's `k` positions are anywhere in it (id 1). The
    /// fewest bits for a false-positive rate, and one cache miss per position.
    Standard,
    /// The array cut into blocks of 512 bits (64 bytes, one cache line); all of a key's
    /// positions fall in one block (id 2). One cache miss per key, for about 3% more bits at
    /// 1% (see [`Layout::false_positive_rate`]). `m` is a multiple of 512.
    Blocked512,
    /// The array cut into `shards` equal shards; all of a key's positions fall in one shard
    /// (id 3, the shard count is the snapshot's layout parameter). Superseded by
    /// [`Layout::ShardedV2`], which places positions inside a shard with a step independent of
    /// the shard: this layout's step shares its top bits with the shard choice, so with
    /// shards of fewer than about `256 * shards` bits its false-positive rate is well above
    /// [`Layout::false_positive_rate`]. Read and written as specified, for filters made with
    /// it; [`Layout::sharded_v1`] makes one.
    Sharded {
        /// The number of shards, 1 to [`MAX_SHARDS`].
        shards: u32,
    },
    /// The array cut into `shards` equal shards; all of a key's positions fall in one shard
    /// (id 5, the shard count is the snapshot's layout parameter). For filters held in
    /// separate bitmaps (one Redis key per shard), so that a key is answered by one of them.
    /// `m` is a multiple of `64 * shards`; the false-positive rate is the partitioned one of
    /// [`Layout::false_positive_rate`], the standard layout's for shards of many keys.
    /// [`Layout::sharded`] makes one.
    ShardedV2 {
        /// The number of shards, 1 to [`MAX_SHARDS`].
        shards: u32,
    },
    /// Apache Parquet's split-block Bloom filter (id 6): blocks of 256 bits, each eight
    /// 32-bit words; a key sets exactly one bit in each word of one block, so `k` is 8. The
    /// bits are byte for byte a Parquet bitset; with the [`xxh64`](crate::PositionRule::Xxh64)
    /// rule and the key encoding of the column's type, a filter answers as Parquet's. Eight
    /// independent multiply-shifts per key, which vectorize; about 10 % more bits than
    /// the standard layout at 1 % (see [`Layout::false_positive_rate`]). `m` is a multiple
    /// of 256.
    SplitBlock256,
    /// The split block widened to one 512-bit cache line of eight 64-bit words (id 7): one
    /// bit in each word of one block, `k` = 8. Fewer bits than
    /// [`Layout::SplitBlock256`] for the same rate (about 5 % over the standard layout at
    /// 1 %, 9 % at 0.1 %), as cheap to probe. `m` is a multiple of 512.
    SplitBlock512,
}

/// The most shards of [`Layout::Sharded`].
pub const MAX_SHARDS: u32 = 1 << 16;

/// Bits in a block of [`Layout::Blocked512`].
pub const BLOCK_BITS: u64 = 512;

/// Positions per key of the split-block layouts: one bit in each of a block's eight words.
pub const SPLIT_BLOCK_HASHES: u32 = 8;

impl Layout {
    /// The layouts of a filter held in one piece, in id order (the sharded layout takes a
    /// shard count; see [`Layout::sharded`]).
    pub const ALL: [Self; 4] = [
        Self::Standard,
        Self::Blocked512,
        Self::SplitBlock256,
        Self::SplitBlock512,
    ];

    /// The names accepted by [`Layout::from_str`].
    pub const NAMES: &'static str = "standard, blocked-512, split-block-256, split-block-512, sharded-v2-S (S shards), sharded-S (the superseded sharded layout)";

    /// The sharded layout with `shards` shards: [`Layout::ShardedV2`], the one for new
    /// filters.
    ///
    /// # Errors
    /// [`ParamsError::InvalidShards`](crate::ParamsError::InvalidShards) unless `shards` is
    /// 1 to [`MAX_SHARDS`].
    pub const fn sharded(shards: u32) -> Result<Self, crate::ParamsError> {
        if shards == 0 || shards > MAX_SHARDS {
            return Err(crate::ParamsError::InvalidShards { found: shards });
        }
        Ok(Self::ShardedV2 { shards })
    }

    /// The superseded sharded layout ([`Layout::Sharded`], id 3) with `shards` shards, for
    /// filters that must stay readable by builds before [`Layout::ShardedV2`].
    ///
    /// # Errors
    /// As [`Layout::sharded`].
    pub const fn sharded_v1(shards: u32) -> Result<Self, crate::ParamsError> {
        if shards == 0 || shards > MAX_SHARDS {
            return Err(crate::ParamsError::InvalidShards { found: shards });
        }
        Ok(Self::Sharded { shards })
    }

    /// The block size in bits of a split-block layout ([`Layout::SplitBlock256`] or
    /// [`Layout::SplitBlock512`]), whose `k` is always [`SPLIT_BLOCK_HASHES`]; `None` for the
    /// others.
    #[must_use]
    pub const fn split_block_bits(self) -> Option<u64> {
        match self {
            Self::SplitBlock256 => Some(256),
            Self::SplitBlock512 => Some(512),
            _ => None,
        }
    }

    /// The bits of one part that a key's positions all fall in: a 512-bit block, a shard of
    /// `m / S` bits, or `None` for the standard layout (and a single shard).
    #[must_use]
    pub(crate) const fn part_bits(self, bits: u64) -> Option<u64> {
        match self {
            Self::Blocked512 | Self::SplitBlock512 => Some(BLOCK_BITS),
            Self::SplitBlock256 => Some(256),
            Self::Sharded { shards } | Self::ShardedV2 { shards } if shards > 1 => {
                Some(bits / shards as u64)
            }
            Self::Standard | Self::Sharded { .. } | Self::ShardedV2 { .. } => None,
        }
    }

    /// The layout parameter recorded in a snapshot: the shard count, or 0.
    #[must_use]
    pub const fn parameter(self) -> u64 {
        match self {
            Self::Sharded { shards } | Self::ShardedV2 { shards } => shards as u64,
            Self::Standard | Self::Blocked512 | Self::SplitBlock256 | Self::SplitBlock512 => 0,
        }
    }

    /// The shard count: 1 unless sharded.
    #[must_use]
    pub const fn shards(self) -> u32 {
        match self {
            Self::Sharded { shards } | Self::ShardedV2 { shards } => shards,
            Self::Standard | Self::Blocked512 | Self::SplitBlock256 | Self::SplitBlock512 => 1,
        }
    }

    /// The stable identifier written into snapshots.
    #[must_use]
    pub const fn id(self) -> LayoutId {
        match self {
            Self::Standard => LayoutId::Standard,
            Self::Blocked512 => LayoutId::Blocked512,
            Self::Sharded { .. } => LayoutId::Sharded,
            Self::ShardedV2 { .. } => LayoutId::ShardedV2,
            Self::SplitBlock256 => LayoutId::SplitBlock256,
            Self::SplitBlock512 => LayoutId::SplitBlock512,
        }
    }

    /// The layout with this identifier and layout parameter (a snapshot's), if this build
    /// implements it and the parameter is valid for it.
    #[must_use]
    pub const fn from_id(id: LayoutId, parameter: u64) -> Option<Self> {
        match (id, parameter) {
            (LayoutId::Standard, 0) => Some(Self::Standard),
            (LayoutId::Blocked512, 0) => Some(Self::Blocked512),
            (LayoutId::SplitBlock256, 0) => Some(Self::SplitBlock256),
            (LayoutId::SplitBlock512, 0) => Some(Self::SplitBlock512),
            (LayoutId::Sharded, shards @ 1..=0x1_0000) => Some(Self::Sharded {
                shards: shards as u32,
            }),
            (LayoutId::ShardedV2, shards @ 1..=0x1_0000) => Some(Self::ShardedV2 {
                shards: shards as u32,
            }),
            _ => None,
        }
    }

    /// The short name used by the CLI and in dumps.
    #[must_use]
    pub const fn name(self) -> &'static str {
        self.id().name()
    }

    /// The granule `m` must be a multiple of: 1 bit, a 512-bit block, or 64 bits per shard.
    #[must_use]
    pub const fn granule(self) -> u64 {
        match self {
            Self::Standard => 1,
            Self::Blocked512 | Self::SplitBlock512 => BLOCK_BITS,
            Self::SplitBlock256 => 256,
            Self::Sharded { shards } | Self::ShardedV2 { shards } => 64 * shards as u64,
        }
    }

    /// The expected false-positive rate after `items` distinct keys in `bits` bits with
    /// `hashes` positions per key.
    ///
    /// - Standard: `(1 - e^(-k n / m))^k` (Bloom 1970, as derived in Broder and
    ///   Mitzenmacher 2004).
    /// - Blocked, with blocks of `B = 512` bits: a block receives a Poisson number of keys
    ///   with mean `λ = n B / m`, and a query hits only its own block, so
    ///   `FPR = Σ_i Pois(i; λ) · (1 − (1 − 1/B)^(k·i))^k` (Putze, Sanders and Singler, "Cache-,
    ///   Hash- and Space-Efficient Bloom Filters", 2007; RocksDB's `CacheLocalFpRate`
    ///   approximates the same sum).
    /// - Sharded, with shards of `B = m / S` bits: the same sum over shard loads, each shard
    ///   a standard filter of `B` bits. For shards of more than a few thousand keys this is
    ///   the standard rate to within a percent; with one shard it is exactly the standard one.
    /// - Split block, with blocks of `B` bits in eight words of `W = B / 8` bits: a block
    ///   receives a Poisson number of keys with mean `λ = n B / m`, each setting one bit of
    ///   every word, and a query tests one bit of each of the eight words, so
    ///   `FPR = Σ_i Pois(i; λ) · (1 − (1 − 1/W)^i)^8` (Putze, Sanders and Singler 2007, the
    ///   split variant; `hashes` is always 8 here).
    #[must_use]
    pub fn false_positive_rate(self, bits: u64, hashes: u32, items: u64) -> f64 {
        if items == 0 || bits == 0 {
            return 0.0;
        }
        let per_key = bits as f64 / items as f64;
        match self {
            Self::Standard | Self::Sharded { shards: 1 } | Self::ShardedV2 { shards: 1 } => {
                standard_rate(per_key, hashes)
            }
            Self::Blocked512 => blocked_rate(per_key, hashes),
            Self::SplitBlock256 => split_rate_256(per_key, hashes),
            Self::SplitBlock512 => split_rate_512(per_key, hashes),
            Self::Sharded { shards } | Self::ShardedV2 { shards } => {
                partitioned_rate(per_key, hashes, bits as f64 / f64::from(shards))
            }
        }
    }

    /// The standard deviation, from filter to filter, of the false-positive rate of
    /// [`Layout::false_positive_rate`]'s filters (`items` distinct keys in `bits` bits with
    /// `hashes` positions per key), as its bits measure it: how far a real filter's rate, and
    /// the estimate read from its bits, stray from the expectation by chance.
    ///
    /// - Standard: the fill `f` of `m` bits varies by about `sqrt(f (1 - f) / m)`, and the
    ///   rate `f^k` by `k f^(k-1)` times as much.
    /// - Partitioned (blocked, split block, sharded): the rate is the mean of `P` parts'
    ///   rates, and a part's rate follows its load, a Poisson number of keys, so the mean
    ///   varies by `sqrt(Var(rate(L)) / P)` over that Poisson law; the fill's own variation
    ///   inside the parts adds the standard term. Small partitioned filters, whose fullest
    ///   parts dominate the rate, vary far more than standard ones of the same size.
    #[must_use]
    pub fn false_positive_rate_deviation(self, bits: u64, hashes: u32, items: u64) -> f64 {
        if items == 0 || bits == 0 {
            return 0.0;
        }
        let per_key = bits as f64 / items as f64;
        let k = f64::from(hashes.max(1));
        let fill_term = || {
            let rate = standard_rate(per_key, hashes);
            let fill = rate.powf(1.0 / k);
            if fill <= 0.0 {
                return 0.0;
            }
            k * rate / fill * (fill * (1.0 - fill) / bits as f64).sqrt()
        };
        let part = |block: f64, rate: &dyn Fn(f64) -> f64| {
            let lambda = block / per_key;
            let mean = poisson_mixture(lambda, rate);
            let square = poisson_mixture(lambda, |i| rate(i).powi(2));
            let parts = (bits as f64 / block).max(1.0);
            ((square - mean * mean).max(0.0) / parts + fill_term().powi(2)).sqrt()
        };
        let ki = i32::try_from(hashes).unwrap_or(i32::MAX);
        match self {
            Self::Standard | Self::Sharded { shards: 1 } | Self::ShardedV2 { shards: 1 } => {
                fill_term()
            }
            Self::Blocked512 => {
                let unset = (-1.0 / BLOCK_BITS as f64).ln_1p() * k;
                part(BLOCK_BITS as f64, &|i| (-(unset * i).exp_m1()).powi(ki))
            }
            Self::SplitBlock256 | Self::SplitBlock512 => {
                let block = if self == Self::SplitBlock256 {
                    256.0
                } else {
                    512.0
                };
                let unset = (-k / block).ln_1p();
                part(block, &|i| (-(unset * i).exp_m1()).powi(ki))
            }
            Self::Sharded { shards } | Self::ShardedV2 { shards } => {
                let block = bits as f64 / f64::from(shards);
                let unset = (-1.0 / block).ln_1p() * k;
                part(block, &|i| (-(unset * i).exp_m1()).powi(ki))
            }
        }
    }

    /// The fewest bits per key, and the `k` that gives them, for which this layout's rate
    /// is at most `fpr` (with `k` at most `max_hashes`). `fpr` must lie strictly between 0
    /// and 1.
    pub(crate) fn plan(self, fpr: f64, max_hashes: u32) -> (f64, u32) {
        // The blocked plan is a numeric search; stores and tools plan the same few targets
        // over and over, so the answers are kept.
        static PLANS: std::sync::Mutex<Vec<PlanEntry>> = std::sync::Mutex::new(Vec::new());
        let key = (self, fpr.to_bits(), max_hashes);
        let cached = PLANS
            .lock()
            .ok()
            .and_then(|plans| plans.iter().find(|p| (p.0, p.1, p.2) == key).map(|p| p.3));
        if let Some(plan) = cached {
            return plan;
        }
        let plan = self.compute_plan(fpr, max_hashes);
        if let Ok(mut plans) = PLANS.lock() {
            if plans.len() >= 64 {
                plans.remove(0);
            }
            plans.push((key.0, key.1, key.2, plan));
        }
        plan
    }

    fn compute_plan(self, fpr: f64, max_hashes: u32) -> (f64, u32) {
        match self {
            // Shards are planned as standard filters: the caller rounds m to whole shards.
            Self::Standard | Self::Sharded { .. } | Self::ShardedV2 { .. } => {
                // The closed form: b = -ln p / (ln 2)^2 at k = b ln 2; a capped k needs
                // b = -k / ln(1 - p^(1/k)).
                let ln2 = std::f64::consts::LN_2;
                let per_key = -fpr.ln() / (ln2 * ln2);
                let k = (per_key * ln2).round().clamp(1.0, f64::from(max_hashes)) as u32;
                if (per_key * ln2).round() > f64::from(max_hashes) {
                    let root = fpr.powf(1.0 / f64::from(k));
                    (-f64::from(k) / (-root).ln_1p(), k)
                } else {
                    (per_key, k)
                }
            }
            Self::Blocked512 => {
                // The optimum lies near the standard layout's k (a little below it): search
                // around it rather than over every k.
                let (_, standard_k) = Self::Standard.plan(fpr, u32::MAX);
                let low = (standard_k / 2).max(1);
                let high = standard_k
                    .saturating_mul(2)
                    .saturating_add(2)
                    .min(max_hashes);
                (low.min(high)..=high)
                    .map(|k| (bits_per_key_for(fpr, k, blocked_rate), k))
                    .fold((f64::INFINITY, 1), |best, next| {
                        if next.0 < best.0 { next } else { best }
                    })
            }
            // k is fixed: one bit per word. A rule allowing fewer positions cannot plan it.
            Self::SplitBlock256 | Self::SplitBlock512 if max_hashes < SPLIT_BLOCK_HASHES => {
                (f64::INFINITY, SPLIT_BLOCK_HASHES)
            }
            Self::SplitBlock256 => (
                bits_per_key_for(fpr, SPLIT_BLOCK_HASHES, split_rate_256),
                SPLIT_BLOCK_HASHES,
            ),
            Self::SplitBlock512 => (
                bits_per_key_for(fpr, SPLIT_BLOCK_HASHES, split_rate_512),
                SPLIT_BLOCK_HASHES,
            ),
        }
    }
}

/// A remembered plan: layout, target rate (its bits), most positions per key, and the
/// answer (bits per key, positions per key).
type PlanEntry = (Layout, u64, u32, (f64, u32));

/// `standard`, `blocked-512`, `sharded-v2-S` or `sharded-S` (the form [`Layout::from_str`]
/// reads).
impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Sharded { shards } | Self::ShardedV2 { shards } => {
                write!(f, "{}-{shards}", self.name())
            }
            _ => f.write_str(self.name()),
        }
    }
}

impl FromStr for Layout {
    type Err = UnknownNameError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let unknown = || UnknownNameError {
            kind: "layout",
            found: s.to_owned(),
            expected: Self::NAMES,
        };
        if let Some(count) = s.strip_prefix("sharded-v2-") {
            let shards: u32 = count.parse().map_err(|_| unknown())?;
            return Self::sharded(shards).map_err(|_| unknown());
        }
        if let Some(count) = s.strip_prefix("sharded-") {
            let shards: u32 = count.parse().map_err(|_| unknown())?;
            return Self::sharded_v1(shards).map_err(|_| unknown());
        }
        Self::ALL
            .into_iter()
            .find(|l| l.name() == s)
            .ok_or_else(unknown)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rates::{BLOCKED_BITS, NORMAL_LOADS, ln_factorial};

    #[test]
    fn the_formulas_block_is_the_layouts() {
        assert_eq!(BLOCK_BITS as f64, BLOCKED_BITS);
    }

    #[test]
    fn ids_are_pinned() {
        let ids: Vec<(u16, &str)> = Layout::ALL
            .iter()
            .map(|l| (l.id().value(), l.name()))
            .collect();
        assert_eq!(
            ids,
            [
                (1, "standard"),
                (2, "blocked-512"),
                (6, "split-block-256"),
                (7, "split-block-512")
            ]
        );
        let sharded = Layout::sharded(16).unwrap();
        assert_eq!((sharded.id().value(), sharded.name()), (5, "sharded-v2"));
        let v1 = Layout::sharded_v1(16).unwrap();
        assert_eq!((v1.id().value(), v1.name()), (3, "sharded"));
        assert_eq!("sharded-16".parse::<Layout>(), Ok(v1));
        assert_eq!("sharded-v2-16".parse::<Layout>(), Ok(sharded));
        for &id in LayoutId::ALL {
            let parameter = u64::from(matches!(id, LayoutId::Sharded | LayoutId::ShardedV2));
            // The counting layout places counters, not bits: `CountingBloomFilter` reads it;
            // the scalable layout is a chain of stages: `ScalableBloomFilter` reads it.
            let expected = (!matches!(id, LayoutId::Counting4 | LayoutId::Scalable)).then_some(id);
            assert_eq!(Layout::from_id(id, parameter).map(Layout::id), expected);
        }
        assert_eq!(Layout::from_id(LayoutId::Sharded, 0), None);
        assert_eq!(
            Layout::from_id(LayoutId::Sharded, 1 << 16),
            Layout::sharded_v1(1 << 16).ok()
        );
        assert_eq!(
            Layout::from_id(LayoutId::ShardedV2, 1 << 16),
            Layout::sharded(1 << 16).ok()
        );
        assert_eq!(Layout::from_id(LayoutId::ShardedV2, 0), None);
        assert_eq!(Layout::from_id(LayoutId::Sharded, (1 << 16) + 1), None);
        assert_eq!(Layout::from_id(LayoutId::Standard, 1), None);
        for l in Layout::ALL.into_iter().chain([sharded, v1]) {
            assert_eq!(l.to_string().parse::<Layout>(), Ok(l));
        }
        assert!("sharded-0".parse::<Layout>().is_err());
        assert!("sharded-65537".parse::<Layout>().is_err());
        assert!("sharded".parse::<Layout>().is_err());
    }

    #[test]
    fn huge_loads_are_predicted_at_once_and_agree_with_the_sum_at_the_switch() {
        // 2^60 keys in one 512-bit part or 256 shards: the sum stopped advancing at 2^53
        // keys per part. Every answer is a rate, full for loads that fill the bits.
        let blocked = Layout::Blocked512;
        let sharded = Layout::sharded(256).unwrap();
        for (layout, bits, items) in [
            (blocked, 512, 1u64 << 60),
            (blocked, 512, u64::MAX),
            (sharded, 256 * 64, 1 << 60),
            (sharded, 256 << 40, 256 << 40),
        ] {
            let rate = layout.false_positive_rate(bits, 1, items);
            assert!((0.0..=1.0).contains(&rate), "{layout} {items}: {rate}");
        }
        // 2^40 bits per shard, one bit per key at k = 1: the standard rate, 1 - e^-1.
        let rate = sharded.false_positive_rate(256 << 40, 1, 256 << 40);
        assert!((rate - (1.0 - (-1.0f64).exp())).abs() < 1e-9, "{rate}");
        // Either side of the switch to the normal quadrature, the two ways agree.
        for (per_key, k) in [(4.0, 3), (9.6, 7), (20.0, 14)] {
            let block = NORMAL_LOADS * per_key;
            let below = partitioned_rate(per_key * (1.0 + 1e-9), k, block);
            let above = partitioned_rate(per_key * (1.0 - 1e-9), k, block);
            assert!((below / above - 1.0).abs() < 1e-6, "{below} {above}");
        }
    }

    #[test]
    fn ln_factorial_is_continuous_at_the_switch() {
        let exact: f64 = (2..=25u32).map(|j| f64::from(j).ln()).sum();
        assert!((ln_factorial(25.0) - exact).abs() < 1e-9);
        let exact: f64 = (2..=19u32).map(|j| f64::from(j).ln()).sum();
        assert!((ln_factorial(19.0) - exact).abs() < 1e-12);
    }

    #[test]
    fn the_blocked_plan_costs_about_three_percent_at_one_percent() {
        let (standard, k_std) = Layout::Standard.plan(0.01, 64);
        let (blocked, k_blk) = Layout::Blocked512.plan(0.01, 64);
        assert!((standard - 9.585).abs() < 0.01, "{standard}");
        assert_eq!(k_std, 7);
        let overhead = blocked / standard - 1.0;
        assert!(
            (0.02..0.05).contains(&overhead),
            "{blocked} bits per key, k = {k_blk}"
        );
        assert!((blocked_rate(blocked, k_blk) - 0.01).abs() < 1e-6);
    }

    #[test]
    fn the_blocked_rate_is_the_poisson_sum_and_never_below_the_standard_rate() {
        // The sum written out naively, with exact factorials, for a moderate load.
        let naive = |per_key: f64, k: u32| {
            let lambda = 512.0 / per_key;
            let mut pmf = (-lambda).exp();
            let mut sum = 0.0;
            for i in 0..400u32 {
                if i > 0 {
                    pmf *= lambda / f64::from(i);
                }
                let one_bit = 1.0 - (1.0 - 1.0 / 512.0f64).powf(f64::from(k * i));
                sum += pmf * one_bit.powi(k as i32);
            }
            sum
        };
        for (per_key, k) in [(8.0, 5), (10.0, 6), (16.0, 10), (40.0, 3)] {
            let (ours, reference) = (blocked_rate(per_key, k), naive(per_key, k));
            assert!(
                (ours / reference - 1.0).abs() < 1e-6,
                "{per_key} {k}: {ours} vs {reference}"
            );
            // Uneven loads only hurt (the rate is convex in the load).
            assert!(ours >= standard_rate(per_key, k));
        }
    }
}
