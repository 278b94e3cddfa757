//! Sizing: turning (items, false-positive rate), (items, bits per key) or an explicit (m, k)
//! into validated [`FilterParams`].

use std::f64::consts::LN_2;

use crate::layout::Layout;

/// The largest bit count a filter may have: 2^43 bits, a 1 TiB bit array.
///
/// Every index computation is done in `u64` (and `u128` for the range reduction), so the
/// limit is about memory, not arithmetic. It is far above the 2^32 bits where filters that
/// compute positions in 32 bits start to give wrong answers.
pub const MAX_BITS: u64 = 1 << 43;

/// The largest number of bit positions per key.
///
/// Sixty-four positions already give a false-positive rate near 2^-64 at the optimum; a
/// larger k only costs time.
pub const MAX_HASHES: u32 = 64;

/// A validated bit count `m`, positions per key `k`, and the [`Layout`] they are planned for.
///
/// Build one with [`FilterParams::for_false_positive_rate`] (standard layout),
/// [`FilterParams::planned`] (any layout), or
/// [`FilterParams::new`] / [`FilterParams::with_layout`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FilterParams {
    bits: u64,
    hashes: u32,
    layout: Layout,
}

/// Why a set of parameters was refused.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ParamsError {
    /// The expected item count was zero.
    #[error("expected item count must be at least 1, got 0")]
    ZeroItems,
    /// The target false-positive rate was not strictly between 0 and 1.
    #[error("target false-positive rate must lie strictly between 0 and 1, got {found}")]
    InvalidFalsePositiveRate {
        /// The rate that was given.
        found: f64,
    },
    /// Bits per key was not a finite number above zero.
    #[error("bits per key must be a finite number above 0, got {found}")]
    InvalidBitsPerKey {
        /// The value that was given.
        found: f64,
    },
    /// The bit count `m` was zero.
    #[error("bit count (m) must be at least 1, got 0")]
    ZeroBits,
    /// The number of positions per key `k` was zero.
    #[error("positions per key (k) must be at least 1, got 0")]
    ZeroHashes,
    /// `k` was above [`MAX_HASHES`].
    #[error("{found} positions per key (k) exceed the maximum of {max}")]
    TooManyHashes {
        /// The requested `k`.
        found: u32,
        /// The largest `k` accepted.
        max: u32,
    },
    /// `m` is not a whole number of the layout's blocks.
    #[error(
        "{bits} bits (m) are not a multiple of {granule}, the block size of the {layout} layout"
    )]
    NotWholeBlocks {
        /// The requested `m`.
        bits: u64,
        /// The block size.
        granule: u64,
        /// The layout.
        layout: Layout,
    },
    /// The shard count of the sharded layout is not 1 to
    /// [`MAX_SHARDS`](crate::layout::MAX_SHARDS).
    #[error("the sharded layout takes 1 to 65536 shards, got {found}")]
    InvalidShards {
        /// The shard count given.
        found: u32,
    },
    /// The layout cannot reach the target rate with the positions per key allowed (a
    /// 512-bit block holds too few bits for extreme targets).
    #[error(
        "the {layout} layout cannot reach a false-positive rate of {fpr:e} with at most {max_hashes} positions per key; use the standard layout"
    )]
    Unreachable {
        /// The layout.
        layout: Layout,
        /// The target rate.
        fpr: f64,
        /// The most positions per key allowed.
        max_hashes: u32,
    },
    /// The layout takes exactly one `k` (the split-block layouts: one bit in each of a
    /// block's eight words).
    #[error(
        "the {layout} layout sets one bit in each of a block's words: k must be {required}, got {found}"
    )]
    FixedHashes {
        /// The layout.
        layout: Layout,
        /// The `k` that was given.
        found: u32,
        /// The only `k` the layout takes.
        required: u32,
    },
    /// The split-block layouts compute the block index in 32 bits: at most 2^32 blocks.
    #[error("{bits} bits (m) are more than 2^32 blocks of the {layout} layout")]
    TooManyBlocks {
        /// The requested `m`.
        bits: u64,
        /// The layout.
        layout: Layout,
    },
    /// `m` was above [`MAX_BITS`].
    #[error(
        "{found} bits (m) exceed the maximum of {max}; lower the item count or raise the false-positive rate"
    )]
    TooManyBits {
        /// The requested (or computed) `m`.
        found: u128,
        /// The largest `m` accepted.
        max: u64,
    },
}

impl FilterParams {
    /// Explicit parameters: `bits` (m) and `hashes` (k).
    ///
    /// # Errors
    /// [`ParamsError::ZeroBits`], [`ParamsError::ZeroHashes`], [`ParamsError::TooManyBits`]
    /// or [`ParamsError::TooManyHashes`].
    pub fn new(bits: u64, hashes: u32) -> Result<Self, ParamsError> {
        Self::with_layout(Layout::Standard, bits, hashes)
    }

    /// Explicit parameters for a layout: `bits` (m, a whole number of the layout's blocks)
    /// and `hashes` (k).
    ///
    /// # Errors
    /// As [`FilterParams::new`], and [`ParamsError::NotWholeBlocks`].
    pub fn with_layout(layout: Layout, bits: u64, hashes: u32) -> Result<Self, ParamsError> {
        if bits == 0 {
            return Err(ParamsError::ZeroBits);
        }
        if hashes == 0 {
            return Err(ParamsError::ZeroHashes);
        }
        if bits > MAX_BITS {
            return Err(ParamsError::TooManyBits {
                found: u128::from(bits),
                max: MAX_BITS,
            });
        }
        if hashes > MAX_HASHES {
            return Err(ParamsError::TooManyHashes {
                found: hashes,
                max: MAX_HASHES,
            });
        }
        if !bits.is_multiple_of(layout.granule()) {
            return Err(ParamsError::NotWholeBlocks {
                bits,
                granule: layout.granule(),
                layout,
            });
        }
        if let Some(block) = layout.split_block_bits() {
            if hashes != crate::layout::SPLIT_BLOCK_HASHES {
                return Err(ParamsError::FixedHashes {
                    layout,
                    found: hashes,
                    required: crate::layout::SPLIT_BLOCK_HASHES,
                });
            }
            if bits / block > bloom_format::MAX_SPLIT_BLOCKS {
                return Err(ParamsError::TooManyBlocks { bits, layout });
            }
        }
        Ok(Self {
            bits,
            hashes,
            layout,
        })
    }

    /// Plans for `items` keys at a target false-positive rate `fpr` in `layout`, with at
    /// most [`MAX_HASHES`] positions per key: the fewest bits (rounded up to whole blocks) for
    /// which the layout's formula ([`Layout::false_positive_rate`]) gives at most `fpr`, and
    /// the `k` that achieves it.
    ///
    /// Unlike [`FilterParams::for_false_positive_rate`] (the textbook closed form, whose
    /// whole `k` can leave the rate a little above `fpr`), the plan always meets its target:
    /// `params.predicted_false_positive_rate(items) <= fpr`.
    ///
    /// ```
    /// use bloom_core::{FilterParams, Layout};
    ///
    /// let params = FilterParams::planned(Layout::Standard, 1_000_000, 0.01)?;
    /// assert!(params.predicted_false_positive_rate(1_000_000) <= 0.01);
    /// # Ok::<(), bloom_core::ParamsError>(())
    /// ```
    ///
    /// # Errors
    /// As [`FilterParams::for_false_positive_rate`].
    pub fn planned(layout: Layout, items: u64, fpr: f64) -> Result<Self, ParamsError> {
        Self::planned_for(crate::PositionRule::Xxh3_128, layout, items, fpr)
    }

    /// [`FilterParams::planned`] with at most as many positions per key as `rule` computes
    /// (4 for `sha256-split4`): the plan for a filter of that rule.
    ///
    /// # Errors
    /// As [`FilterParams::for_false_positive_rate`].
    pub fn planned_for(
        rule: crate::PositionRule,
        layout: Layout,
        items: u64,
        fpr: f64,
    ) -> Result<Self, ParamsError> {
        Self::plan(layout, items, fpr, rule.max_hashes())
    }

    /// The plan with at most `max_hashes` positions per key.
    pub(crate) fn plan(
        layout: Layout,
        items: u64,
        fpr: f64,
        max_hashes: u32,
    ) -> Result<Self, ParamsError> {
        check_target(items, fpr)?;
        let max_hashes = max_hashes.clamp(1, MAX_HASHES);
        let (per_key, hashes) = layout.plan(fpr, max_hashes);
        if !per_key.is_finite() {
            return Err(ParamsError::Unreachable {
                layout,
                fpr,
                // A split block has one k: the message names it.
                max_hashes: if layout.split_block_bits().is_some() {
                    max_hashes.min(crate::layout::SPLIT_BLOCK_HASHES)
                } else {
                    max_hashes
                },
            });
        }
        let granule = layout.granule() as f64;
        let bits = ((items as f64 * per_key) / granule).ceil() * granule;
        let params = Self::with_layout(layout, bits_within_limit(bits.max(granule))?, hashes)?;
        if params.predicted_false_positive_rate(items) <= fpr {
            return Ok(params);
        }
        // The closed forms miss the formula a little: a whole k off the optimum (standard),
        // or uneven loads when shards hold few keys each (shards are planned as standard
        // filters). The fewest whole granules that meet it: doubled until one does, then
        // halved back.
        let granule = layout.granule();
        let most = MAX_BITS / granule;
        let meets =
            |granules: u64| layout.false_positive_rate(granules * granule, hashes, items) <= fpr;
        let mut low = params.bits / granule;
        let mut high = low.saturating_mul(2).min(most);
        while !meets(high) {
            if high == most {
                return Err(ParamsError::TooManyBits {
                    found: u128::from(most) * u128::from(granule) + 1,
                    max: MAX_BITS,
                });
            }
            low = high;
            high = high.saturating_mul(2).min(most);
        }
        while high - low > 1 {
            let mid = low + (high - low) / 2;
            if meets(mid) {
                high = mid;
            } else {
                low = mid;
            }
        }
        Self::with_layout(layout, high * granule, hashes)
    }

    /// Plans for `items` keys at a target false-positive rate `fpr`:
    /// `m = ceil(-n ln p / (ln 2)^2)` and `k = round((m / n) ln 2)`, at least 1.
    ///
    /// ```
    /// let params = bloom_core::FilterParams::for_false_positive_rate(1_000_000, 0.01)?;
    /// assert_eq!(params.bits(), 9_585_059);
    /// assert_eq!(params.hashes(), 7);
    /// # Ok::<(), bloom_core::ParamsError>(())
    /// ```
    ///
    /// # Errors
    /// [`ParamsError::ZeroItems`], [`ParamsError::InvalidFalsePositiveRate`] (also for NaN),
    /// or [`ParamsError::TooManyBits`] when the plan needs more than [`MAX_BITS`].
    pub fn for_false_positive_rate(items: u64, fpr: f64) -> Result<Self, ParamsError> {
        check_target(items, fpr)?;
        let bits = (-(items as f64) * fpr.ln() / (LN_2 * LN_2)).ceil();
        Self::from_float_bits(items, bits)
    }

    /// Plans as Guava 31's `BloomFilter.create(funnel, items, fpr)` does, so that a filter
    /// built here has exactly the `m` and `k` of the JVM's:
    ///
    /// ```text
    /// numBits = (long) (-n ln p / (ln 2)^2)              // truncated
    /// k       = max(1, Math.round(numBits / n * ln 2))
    /// m       = 64 * ceil(numBits / 64)                  // whole 64-bit words
    /// ```
    ///
    /// (Guava 33 and later compute `k` as `round(-ln p / ln 2)`; `k` travels in the stream,
    /// so filters of either are read the same way.) Java's `Math.log` is not correctly
    /// rounded: for rare `(n, p)` its last bit differs from `ln` here, and `m` then differs by
    /// one 64-bit word from Guava's own plan (the filter is still read and answered by Guava
    /// exactly).
    ///
    /// ```
    /// let params = bloom_core::FilterParams::for_guava(1000, 0.01)?;
    /// assert_eq!((params.bits(), params.hashes()), (9600, 7)); // 150 words, as Guava
    /// # Ok::<(), bloom_core::ParamsError>(())
    /// ```
    ///
    /// # Errors
    /// [`ParamsError::ZeroItems`], [`ParamsError::InvalidFalsePositiveRate`],
    /// [`ParamsError::ZeroBits`] when the rate is so high that Guava's plan has no bits
    /// (Guava throws there too), or [`ParamsError::TooManyBits`] beyond what a Guava stream
    /// or [`MAX_BITS`] holds.
    pub fn for_guava(items: u64, fpr: f64) -> Result<Self, ParamsError> {
        check_target(items, fpr)?;
        let n = items as f64;
        // Java's (long) cast truncates and saturates, as `as` does.
        let num_bits = (-n * fpr.ln() / (LN_2 * LN_2)) as u64;
        if num_bits == 0 {
            return Err(ParamsError::ZeroBits);
        }
        let max = MAX_BITS.min(bloom_format::GUAVA_MAX_BITS);
        let bits = num_bits
            .div_ceil(64)
            .checked_mul(64)
            .filter(|&b| b <= max)
            .ok_or(ParamsError::TooManyBits {
                found: u128::from(num_bits),
                max,
            })?;
        // Math.round(x) = floor(x + 0.5); saturating to an int, then at least 1.
        let hashes = ((num_bits as f64 / n * LN_2 + 0.5).floor() as u32).max(1);
        Self::new(bits, hashes)
    }

    /// Plans for `items` keys with `bits_per_key` bits each: `m = ceil(n * bits_per_key)`,
    /// `k = round((m / n) ln 2)`, at least 1.
    ///
    /// # Errors
    /// [`ParamsError::ZeroItems`], [`ParamsError::InvalidBitsPerKey`] or
    /// [`ParamsError::TooManyBits`].
    #[cfg(test)]
    fn for_bits_per_key(items: u64, bits_per_key: f64) -> Result<Self, ParamsError> {
        if items == 0 {
            return Err(ParamsError::ZeroItems);
        }
        if !(bits_per_key.is_finite() && bits_per_key > 0.0) {
            return Err(ParamsError::InvalidBitsPerKey {
                found: bits_per_key,
            });
        }
        Self::from_float_bits(items, (items as f64 * bits_per_key).ceil())
    }

    fn from_float_bits(items: u64, bits: f64) -> Result<Self, ParamsError> {
        let bits = bits_within_limit(bits.max(1.0))?;
        Self::new(bits, optimal_hashes(bits, items))
    }

    /// The bit count `m`.
    #[must_use]
    pub const fn bits(&self) -> u64 {
        self.bits
    }

    /// The number of positions per key `k`.
    #[must_use]
    pub const fn hashes(&self) -> u32 {
        self.hashes
    }

    /// The layout the parameters are for.
    #[must_use]
    pub const fn layout(&self) -> Layout {
        self.layout
    }

    /// The size of the bit array in bytes, `ceil(m / 8)`.
    #[must_use]
    pub const fn byte_len(&self) -> u64 {
        self.bits.div_ceil(8)
    }

    /// Bits per key when `items` keys are stored.
    #[must_use]
    pub fn bits_per_key(&self, items: u64) -> f64 {
        self.bits as f64 / items.max(1) as f64
    }

    /// The predicted false-positive rate after `items` distinct keys, by the layout's
    /// formula ([`Layout::false_positive_rate`]): for the standard layout the approximation
    /// `(1 - e^(-k n / m))^k` (Bloom 1970, as derived in Broder and Mitzenmacher 2004). It
    /// assumes independent, uniform positions; for the filter sizes this crate is built for,
    /// the exact expression (Bose et al. 2008) differs from it by far less than the sampling
    /// error of any measurement.
    #[must_use]
    pub fn predicted_false_positive_rate(&self, items: u64) -> f64 {
        self.layout
            .false_positive_rate(self.bits, self.hashes, items)
    }
}

/// A plan's target: at least one key, a rate strictly between 0 and 1 (NaN refused).
fn check_target(items: u64, fpr: f64) -> Result<(), ParamsError> {
    if items == 0 {
        return Err(ParamsError::ZeroItems);
    }
    if !(fpr > 0.0 && fpr < 1.0) {
        return Err(ParamsError::InvalidFalsePositiveRate { found: fpr });
    }
    Ok(())
}

/// A planned bit count as a `u64` within [`MAX_BITS`]: `as` saturates for floats, so an
/// infinite or huge plan becomes `u128::MAX` and is refused.
fn bits_within_limit(bits: f64) -> Result<u64, ParamsError> {
    let requested = if bits.is_nan() {
        u128::MAX
    } else {
        bits as u128
    };
    u64::try_from(requested)
        .ok()
        .filter(|&b| b <= MAX_BITS)
        .ok_or(ParamsError::TooManyBits {
            found: requested,
            max: MAX_BITS,
        })
}

/// `k = round((m / n) ln 2)`, clamped to `1..=MAX_HASHES`.
fn optimal_hashes(bits: u64, items: u64) -> u32 {
    let k = (bits as f64 / items as f64 * LN_2).round();
    // Clamped first, so the cast is exact.
    k.clamp(1.0, f64::from(MAX_HASHES)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn planning_follows_the_textbook_formulas() {
        let p = FilterParams::for_false_positive_rate(1_000_000, 0.01).unwrap();
        assert_eq!(p.bits(), 9_585_059);
        assert_eq!(p.hashes(), 7);
        let p = FilterParams::for_false_positive_rate(80, 0.001).unwrap();
        // -80 ln(0.001) / ln(2)^2 = 1150.2...
        assert_eq!(p.bits(), 1151);
        assert_eq!(p.hashes(), 10);
    }

    proptest::proptest! {
        /// Every plan meets its target by its layout's formula, whatever the keys per shard
        /// or block, and is the fewest whole granules that do.
        #[test]
        fn every_plan_meets_its_own_target(
            items in 1u64..5_000_000,
            exponent in 0.05f64..12.0,
            layout in proptest::sample::select(vec![
                Layout::Standard,
                Layout::Blocked512,
                Layout::sharded(2).unwrap(),
                Layout::sharded(16).unwrap(),
                Layout::sharded(256).unwrap(),
                Layout::sharded(4096).unwrap(),
            ]),
            max_hashes in 1u32..=64,
        ) {
            let fpr = 10f64.powf(-exponent);
            let Ok(plan) = FilterParams::plan(layout, items, fpr, max_hashes) else {
                // Only a plan past MAX_BITS or an unreachable k is refused.
                return Ok(());
            };
            let rate = plan.predicted_false_positive_rate(items);
            proptest::prop_assert!(rate <= fpr, "{layout} n={items} p={fpr}: {rate}");
            if plan.bits() > layout.granule() && layout != Layout::Blocked512 {
                let fewer = layout.false_positive_rate(
                    plan.bits() - layout.granule(),
                    plan.hashes(),
                    items,
                );
                proptest::prop_assert!(fewer > fpr * 0.999, "{layout} n={items} p={fpr}");
            }
        }
    }

    #[test]
    fn a_sharded_plan_with_few_keys_per_shard_meets_its_target() {
        // The fuzzer's case: 256 shards, about 4 keys each, planned as a standard filter
        // predicted 4.7e-3 for a target of 1e-3.
        let layout = Layout::sharded(256).unwrap();
        let plan = FilterParams::planned(layout, 1000, 1e-3).unwrap();
        let rate = plan.predicted_false_positive_rate(1000);
        assert!(rate <= 1e-3, "{rate}");
        let standard = FilterParams::planned(Layout::Standard, 1_000_000, 0.01).unwrap();
        assert!(standard.predicted_false_positive_rate(1_000_000) <= 0.01);
    }

    #[test]
    fn tiny_plans_keep_at_least_one_bit_and_one_hash() {
        let p = FilterParams::for_false_positive_rate(1, 0.999_999).unwrap();
        assert_eq!(p.bits(), 1);
        assert_eq!(p.hashes(), 1);
    }

    #[test]
    fn invalid_inputs_are_typed_errors() {
        assert_eq!(
            FilterParams::for_false_positive_rate(0, 0.01),
            Err(ParamsError::ZeroItems)
        );
        for p in [0.0, 1.0, -0.5, 1.5, f64::INFINITY] {
            assert_eq!(
                FilterParams::for_false_positive_rate(10, p),
                Err(ParamsError::InvalidFalsePositiveRate { found: p })
            );
        }
        assert!(matches!(
            FilterParams::for_false_positive_rate(10, f64::NAN),
            Err(ParamsError::InvalidFalsePositiveRate { found }) if found.is_nan()
        ));
        assert_eq!(FilterParams::new(0, 3), Err(ParamsError::ZeroBits));
        assert_eq!(FilterParams::new(8, 0), Err(ParamsError::ZeroHashes));
        assert_eq!(
            FilterParams::new(8, MAX_HASHES + 1),
            Err(ParamsError::TooManyHashes {
                found: MAX_HASHES + 1,
                max: MAX_HASHES
            })
        );
        assert_eq!(
            FilterParams::new(MAX_BITS + 1, 1),
            Err(ParamsError::TooManyBits {
                found: u128::from(MAX_BITS) + 1,
                max: MAX_BITS
            })
        );
        assert!(matches!(
            FilterParams::for_false_positive_rate(u64::MAX, 1e-300),
            Err(ParamsError::TooManyBits { .. })
        ));
        assert!(matches!(
            FilterParams::for_bits_per_key(10, f64::NAN),
            Err(ParamsError::InvalidBitsPerKey { .. })
        ));
        assert!(matches!(
            FilterParams::for_bits_per_key(10, 0.0),
            Err(ParamsError::InvalidBitsPerKey { .. })
        ));
    }

    #[test]
    fn bits_per_key_planning() {
        let p = FilterParams::for_bits_per_key(1000, 9.6).unwrap();
        assert_eq!(p.bits(), 9600);
        assert_eq!(p.hashes(), 7);
    }

    #[test]
    fn parameters_past_two_to_the_forty_bits_are_accepted() {
        let p = FilterParams::new(1 << 41, 7).unwrap();
        assert_eq!(p.byte_len(), 1 << 38);
        let planned = FilterParams::for_false_positive_rate(100_000_000_000, 0.01).unwrap();
        assert!(planned.bits() > 1 << 39, "{}", planned.bits());
    }

    #[test]
    fn predicted_rate_matches_closed_form() {
        let p = FilterParams::new(1024, 4).unwrap();
        let expected = (1.0 - (-4.0_f64 * 81.0 / 1024.0).exp()).powi(4);
        assert!((p.predicted_false_positive_rate(81) - expected).abs() < 1e-15);
        assert!(p.predicted_false_positive_rate(0).abs() < f64::EPSILON);
    }

    #[test]
    fn blocked_plans_are_whole_blocks_that_meet_the_target() {
        for (items, fpr) in [(1_000_000u64, 0.01), (100_000, 0.001), (10, 0.5), (1, 1e-9)] {
            let p = FilterParams::planned(Layout::Blocked512, items, fpr).unwrap();
            assert_eq!(p.layout(), Layout::Blocked512);
            assert_eq!(p.bits() % 512, 0);
            assert!(
                p.predicted_false_positive_rate(items) <= fpr * 1.0001,
                "{items} {fpr} {p:?}"
            );
        }
        let standard = FilterParams::planned(Layout::Standard, 1_000_000, 0.01).unwrap();
        // The closed form's whole k = 7 leaves its rate at 1.004e-2: the plan takes the few
        // bits more that meet 1e-2.
        let closed = FilterParams::for_false_positive_rate(1_000_000, 0.01).unwrap();
        assert!(closed.predicted_false_positive_rate(1_000_000) > 0.01);
        assert_eq!(standard.hashes(), closed.hashes());
        assert!(standard.bits() > closed.bits() && standard.bits() < closed.bits() + 10_000);
        assert!(standard.predicted_false_positive_rate(1_000_000) <= 0.01);
        // A capped k plans the bits the cap needs.
        let capped = FilterParams::planned_for(
            crate::PositionRule::Sha256Split4,
            Layout::Standard,
            10_000,
            1e-6,
        )
        .unwrap();
        assert_eq!(capped.hashes(), 4);
        assert!(capped.predicted_false_positive_rate(10_000) <= 1.0001e-6);
        assert_eq!(
            FilterParams::with_layout(Layout::Blocked512, 1000, 3),
            Err(ParamsError::NotWholeBlocks {
                bits: 1000,
                granule: 512,
                layout: Layout::Blocked512
            })
        );
    }
}
