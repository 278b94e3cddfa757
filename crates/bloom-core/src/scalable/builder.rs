//! [`ScalableBuilder`]: a chain planned and configured in one expression, the defaults it
//! starts from, and [`ScalableError`], why a chain could not be made or loaded.

use bloom_format::{LayoutId, Plan};

use crate::bits::{AllocError, BitsError};
use crate::builder::{BuildError, KeyOptions, key_option_setters};
use crate::config::{ConfigError, FilterConfig};
use crate::layout::Layout;
use crate::params::{FilterParams, ParamsError};
use crate::plain::BloomFilter;
use crate::position::PositionRule;
use crate::snapshot::SnapshotError;

use super::ScalableBloomFilter;

/// Each stage's capacity over the one before it, unless told otherwise: 2 (RedisBloom's
/// default expansion).
pub const DEFAULT_GROWTH: u32 = 2;

/// Each stage's false-positive rate over the one before it, unless told otherwise: 0.5.
pub const DEFAULT_TIGHTENING: f64 = 0.5;

/// Why a scalable filter could not be made or loaded.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ScalableError {
    /// The growth factor is outside `1..=`[`bloom_format::MAX_GROWTH`].
    #[error("growth factor must be 1 to {max}, got {found}")]
    Growth {
        /// The factor asked for.
        found: u32,
        /// [`bloom_format::MAX_GROWTH`].
        max: u32,
    },
    /// The tightening ratio is not above 0 and below 1.
    #[error("tightening ratio must be above 0 and below 1, got {found}")]
    Tightening {
        /// The ratio asked for.
        found: f64,
    },
    /// The first stage's rate, the target times `1 - tightening`, is too small for a
    /// binary64.
    #[error(
        "the first stage's rate, {target} x (1 - {tightening}), is below what a double can hold; plan a larger rate"
    )]
    FirstStageRate {
        /// The chain's target rate.
        target: f64,
        /// The tightening ratio.
        tightening: f64,
    },
    /// The first stage alone is larger than the growth limit.
    #[error("the first stage would be {bytes} bytes, over the limit of {limit}")]
    OverLimit {
        /// The first stage's payload bytes.
        bytes: u64,
        /// The growth limit.
        limit: u64,
    },
    /// The rule cannot be a stage's: Guava's rules are the standard layout's alone, as a
    /// Guava stream, which a chain is not.
    #[error("position rule {rule} cannot be used for a scalable filter")]
    Rule {
        /// The rule.
        rule: PositionRule,
    },
    /// A stage cannot be made: its plan is impossible (no items, a rate outside `(0, 1)`, too
    /// many bits), the rule, salt and stage layout do not go together, or its bit array
    /// cannot be allocated.
    #[error(transparent)]
    Build(#[from] BuildError),
    /// The snapshot cannot become a scalable filter in this build.
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
    /// The snapshot holds a filter of another layout: load it with
    /// [`BloomFilter`]'s [`Filter::from_snapshot`](crate::Filter::from_snapshot).
    #[error("snapshot holds a filter of the {layout} layout, not a scalable filter")]
    NotScalable {
        /// The snapshot's layout.
        layout: LayoutId,
    },
}

/// A stage's plan, configuration and bits fail as a plain filter's do ([`BuildError`]).
macro_rules! from_build_error {
    ($($cause:ty),*) => {
        $(impl From<$cause> for ScalableError {
            fn from(e: $cause) -> Self {
                Self::Build(e.into())
            }
        })*
    };
}
from_build_error!(ParamsError, ConfigError, AllocError);

impl From<BitsError> for ScalableError {
    fn from(e: BitsError) -> Self {
        Self::Snapshot(SnapshotError::Bits(e))
    }
}

/// A scalable filter planned and configured in one expression.
///
/// ```
/// use bloom_core::{PositionRule, ScalableBloomFilter};
///
/// let mut seen = ScalableBloomFilter::builder(1_000)
///     .false_positive_rate(0.001)
///     .growth(4)
///     .rule(PositionRule::Sha256Double)
///     .build()?;
/// for i in 0..10_000 {
///     seen.insert(&format!("record-{i}"));
/// }
/// assert_eq!(seen.stages().len(), 3); // 1,000 + 4,000 + 16,000 keys of room
/// assert!(seen.contains("record-9999"));
/// # Ok::<(), bloom_core::ScalableError>(())
/// ```
#[derive(Clone, Debug)]
#[must_use = "a builder makes nothing until `build` is called"]
pub struct ScalableBuilder {
    capacity: u64,
    growth: u32,
    tightening: f64,
    /// The rule defaults to `xxh3-128`, which takes every layout; each stage gets
    /// [`Layout::default_for`] the rule and its own rate.
    keys: KeyOptions,
    growth_limit: Option<u64>,
}

impl ScalableBuilder {
    /// A builder whose first stage holds `capacity` keys.
    pub(crate) fn new(capacity: u64) -> Self {
        Self {
            capacity,
            growth: DEFAULT_GROWTH,
            tightening: DEFAULT_TIGHTENING,
            keys: KeyOptions::default(),
            growth_limit: None,
        }
    }

    key_option_setters!();

    /// Each stage's capacity over the one before it (default [`DEFAULT_GROWTH`]).
    pub fn growth(mut self, growth: u32) -> Self {
        self.growth = growth;
        self
    }

    /// Each stage's false-positive rate over the one before it (default
    /// [`DEFAULT_TIGHTENING`]). Closer to 1 makes the first stages cheaper and the later
    /// ones dearer.
    pub fn tightening(mut self, tightening: f64) -> Self {
        self.tightening = tightening;
        self
    }

    /// The most payload bytes the chain may grow to (see
    /// [`ScalableBloomFilter::set_growth_limit`]); default none.
    pub fn growth_limit(mut self, max_payload_bytes: u64) -> Self {
        self.growth_limit = Some(max_payload_bytes);
        self
    }

    /// An empty chain of one stage.
    ///
    /// # Errors
    /// [`ScalableError::Growth`], [`ScalableError::Tightening`], [`ScalableError::Rule`],
    /// [`ScalableError::Build`] for an impossible plan, [`ScalableError::FirstStageRate`],
    /// [`ScalableError::Build`] for a salt the rule does not take,
    /// [`ScalableError::OverLimit`] for a first stage past the growth limit (checked before
    /// anything is allocated), or [`ScalableError::Build`] when the stage cannot be allocated.
    pub fn build(&self) -> Result<ScalableBloomFilter, ScalableError> {
        check_growth(self.growth, self.tightening)?;
        let fpr = self.keys.fpr;
        let rule = self.keys.rule_or_salted().unwrap_or(PositionRule::Xxh3_128);
        if rule.is_guava() {
            return Err(ScalableError::Rule { rule });
        }
        let plan = Plan::new(self.capacity, fpr).ok_or(if self.capacity == 0 {
            ParamsError::ZeroItems
        } else {
            ParamsError::InvalidFalsePositiveRate { found: fpr }
        })?;
        let template = FilterConfig::new(FilterParams::with_layout(Layout::Standard, 64, 1)?)
            .with_encoding(self.keys.encoding)
            .with_salt(self.keys.salt.clone())?;
        let first = ScalableBloomFilter::first_stage_plan(plan, self.tightening).ok_or(
            ScalableError::FirstStageRate {
                target: fpr,
                tightening: self.tightening,
            },
        )?;
        let first = ScalableBloomFilter::stage_config(first, &template, rule)?;
        // Checked before the stage is allocated.
        if let Some(limit) = self.growth_limit.filter(|&l| first.bits() / 8 > l) {
            return Err(ScalableError::OverLimit {
                bytes: first.bits() / 8,
                limit,
            });
        }
        Ok(ScalableBloomFilter {
            plan,
            growth: self.growth,
            tightening: self.tightening,
            stages: vec![BloomFilter::new(first)?],
            growth_limit: self.growth_limit,
            next_stage: std::sync::OnceLock::new(),
        })
    }
}

pub(super) fn check_growth(growth: u32, tightening: f64) -> Result<(), ScalableError> {
    if !(1..=bloom_format::MAX_GROWTH).contains(&growth) {
        return Err(ScalableError::Growth {
            found: growth,
            max: bloom_format::MAX_GROWTH,
        });
    }
    if !(tightening > 0.0 && tightening < 1.0) {
        return Err(ScalableError::Tightening { found: tightening });
    }
    Ok(())
}
