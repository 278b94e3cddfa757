//! What a new filter gets when its layout or rule is not asked for: the fastest layout whose
//! plan costs at most 10 % more bits than the standard layout's, and the fastest rule for it.
//!
//! Measured (`benches/peers.rs`, 24-byte keys, 1 %): the split block of 512 bits with
//! `xxh3-64` answers a key in about half the time of `blocked-512` with `xxh3-128` (one
//! multiply per word, in parallel, against a chain of dependent ones), and its plan stays
//! within 10 % of the standard layout's bits from about 0.0861 % to 3.48 % (the bounds lie
//! between 0.00086 and 0.000861, and between 0.03481 and 0.03482). Outside that range
//! (and for rules the split block does not take) the default stays what it was: the blocked
//! layout where a block reaches the rate, otherwise the standard one. Existing snapshots
//! keep their own layout and rule.

use crate::layout::Layout;
use crate::params::MAX_HASHES;
use crate::position::PositionRule;

/// The most extra bits a default layout may cost over the standard layout's plan: 10 %.
pub const DEFAULT_LAYOUT_OVERHEAD: f64 = 0.10;

impl Layout {
    /// The layout of a new filter of `rule` planned for `fpr`, when none is asked for:
    /// [`Layout::SplitBlock512`] if the rule takes it and its plan needs at most
    /// [`DEFAULT_LAYOUT_OVERHEAD`] more bits than the standard layout's; otherwise
    /// [`Layout::Blocked512`] if the rule takes it and a block can reach `fpr`; otherwise
    /// [`Layout::Standard`]. The 64-bit rules take only the split-block layouts: `xxh64`,
    /// Parquet's hash, gets Parquet's [`Layout::SplitBlock256`], and `xxh3-64`
    /// [`Layout::SplitBlock512`], at any rate.
    ///
    /// ```
    /// use bloom_core::{Layout, PositionRule};
    ///
    /// assert_eq!(Layout::default_for(PositionRule::Xxh3_128, 0.01), Layout::SplitBlock512);
    /// // At 0.01 % a split block needs 23 % more bits than the standard layout.
    /// assert_eq!(Layout::default_for(PositionRule::Xxh3_128, 0.0001), Layout::Blocked512);
    /// assert_eq!(Layout::default_for(PositionRule::GuavaMitz64, 0.01), Layout::Standard);
    /// ```
    #[must_use]
    pub fn default_for(rule: PositionRule, fpr: f64) -> Self {
        match rule {
            PositionRule::Xxh64 => return Self::SplitBlock256,
            PositionRule::Xxh3_64 => return Self::SplitBlock512,
            _ => {}
        }
        if !(fpr > 0.0 && fpr < 1.0) {
            // An invalid target is refused by the planner; any layout shows that.
            return if rule.supports(Self::Blocked512) {
                Self::Blocked512
            } else {
                Self::Standard
            };
        }
        let max = rule.max_hashes().min(MAX_HASHES);
        let (standard, _) = Self::Standard.plan(fpr, max);
        let split = Self::SplitBlock512;
        if rule.supports(split) {
            let (per_key, _) = split.plan(fpr, max);
            if per_key <= standard * (1.0 + DEFAULT_LAYOUT_OVERHEAD) {
                return split;
            }
        }
        let blocked = Self::Blocked512;
        if rule.supports(blocked) && blocked.plan(fpr, max).0.is_finite() {
            return blocked;
        }
        Self::Standard
    }
}

impl PositionRule {
    /// The rule of a new filter of `layout` when none is asked for (and no salt is):
    /// `xxh3-64` for the split-block layouts, `xxh3-128` for the others.
    #[must_use]
    pub const fn fastest_for(layout: Layout) -> Self {
        if layout.split_block_bits().is_some() {
            Self::Xxh3_64
        } else {
            Self::Xxh3_128
        }
    }
}

/// The rule and layout of a new unsalted filter planned for `fpr` when neither is asked
/// for: [`Layout::default_for`] the fast rules, and [`PositionRule::fastest_for`] it.
///
/// ```
/// use bloom_core::{Layout, PositionRule};
///
/// assert_eq!(
///     bloom_core::default_rule_and_layout(0.01),
///     (PositionRule::Xxh3_64, Layout::SplitBlock512)
/// );
/// assert_eq!(
///     bloom_core::default_rule_and_layout(0.0001),
///     (PositionRule::Xxh3_128, Layout::Blocked512)
/// );
/// ```
#[must_use]
pub fn default_rule_and_layout(fpr: f64) -> (PositionRule, Layout) {
    let layout = Layout::default_for(PositionRule::Xxh3_128, fpr);
    (PositionRule::fastest_for(layout), layout)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_is_the_split_block_where_it_costs_at_most_ten_percent() {
        for fpr in [0.02, 0.01, 0.005, 0.001] {
            assert_eq!(
                default_rule_and_layout(fpr),
                (PositionRule::Xxh3_64, Layout::SplitBlock512),
                "{fpr}"
            );
            let (split, _) = Layout::SplitBlock512.plan(fpr, 64);
            let (standard, _) = Layout::Standard.plan(fpr, 64);
            assert!(split <= standard * 1.1, "{fpr}: {split} against {standard}");
        }
        for fpr in [0.1, 0.05, 0.0001, 1e-6] {
            assert_eq!(
                default_rule_and_layout(fpr),
                (PositionRule::Xxh3_128, Layout::Blocked512),
                "{fpr}"
            );
            let (split, _) = Layout::SplitBlock512.plan(fpr, 64);
            let (standard, _) = Layout::Standard.plan(fpr, 64);
            assert!(split > standard * 1.1, "{fpr}: {split} against {standard}");
        }
        // The band's edges, pinned (docs/format.md states them).
        for (fpr, split) in [
            (0.000_86, false),
            (0.000_861, true),
            (0.034_81, true),
            (0.034_82, false),
        ] {
            let layout = Layout::default_for(PositionRule::Xxh3_128, fpr);
            assert_eq!(layout == Layout::SplitBlock512, split, "{fpr}: {layout}");
        }
        // Past what a block can reach: the standard layout.
        assert_eq!(
            Layout::default_for(PositionRule::Xxh3_128, 1e-30),
            Layout::Standard
        );
        assert_eq!(
            Layout::default_for(PositionRule::Sha256Split4, 0.01),
            Layout::Standard
        );
        assert_eq!(
            Layout::default_for(PositionRule::Sha256Double, 0.01),
            Layout::SplitBlock512
        );
        assert_eq!(
            Layout::default_for(PositionRule::Xxh3_128, f64::NAN),
            Layout::Blocked512
        );
        // The 64-bit rules take only split blocks, whatever the rate.
        for fpr in [0.5, 0.01, 1e-6] {
            assert_eq!(
                Layout::default_for(PositionRule::Xxh64, fpr),
                Layout::SplitBlock256
            );
            assert_eq!(
                Layout::default_for(PositionRule::Xxh3_64, fpr),
                Layout::SplitBlock512
            );
        }
    }
}
