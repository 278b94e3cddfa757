//! The plan a filter was sized for ([`Plan`]) and the stage directory of a scalable filter
//! ([`Scalable`], [`Stage`]): the fields format version 3 adds.

use crate::ids::LayoutId;

/// The capacity and false-positive rate a filter was planned for: past `capacity` items, or
/// once its estimated rate passes `false_positive_rate`, the filter is over capacity and
/// answers "maybe" more often than it was meant to.
///
/// Rates compare and hash by their bits, so that a header is `Eq` and `Hash`.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct Plan {
    /// The number of distinct items the filter was sized for, at least 1.
    pub capacity: u64,
    /// The target false-positive rate at that many items: finite, above 0 and below 1.
    pub false_positive_rate: f64,
}

impl Plan {
    /// A plan of `capacity` items at `false_positive_rate`, or `None` unless the capacity is
    /// at least 1 and the rate above 0 and below 1.
    #[must_use]
    pub fn new(capacity: u64, false_positive_rate: f64) -> Option<Self> {
        let plan = Self {
            capacity,
            false_positive_rate,
        };
        plan.is_valid().then_some(plan)
    }

    /// Whether the fields are what a header may record: `capacity >= 1`, `0 < rate < 1`.
    #[must_use]
    pub fn is_valid(&self) -> bool {
        self.capacity >= 1 && is_rate(self.false_positive_rate)
    }
}

/// A probability strictly between 0 and 1 (NaN is not).
pub(crate) fn is_rate(p: f64) -> bool {
    p > 0.0 && p < 1.0
}

impl PartialEq for Plan {
    fn eq(&self, other: &Self) -> bool {
        self.capacity == other.capacity
            && self.false_positive_rate.to_bits() == other.false_positive_rate.to_bits()
    }
}

impl Eq for Plan {}

impl std::hash::Hash for Plan {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.capacity.hash(state);
        self.false_positive_rate.to_bits().hash(state);
    }
}

/// The most stages a scalable filter can have.
pub const MAX_STAGES: usize = 64;

/// The largest growth factor of a scalable filter.
pub const MAX_GROWTH: u32 = 1024;

/// One stage of a scalable filter: a filter of its own layout, size and `k`, planned for its
/// own capacity and rate. Its bits are the next `m / 8` bytes of the payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Stage {
    /// The stage's bit count, a multiple of 64.
    pub bit_count: u64,
    /// The stage's positions per key.
    pub hash_count: u32,
    /// The stage's layout: standard, blocked-512, split-block-256 or split-block-512.
    pub layout: LayoutId,
    /// The capacity and rate the stage was planned for.
    pub plan: Plan,
    /// The items inserted into this stage.
    pub item_count: u64,
}

impl Stage {
    /// An empty stage.
    #[must_use]
    pub const fn new(bit_count: u64, hash_count: u32, layout: LayoutId, plan: Plan) -> Self {
        Self {
            bit_count,
            hash_count,
            layout,
            plan,
            item_count: 0,
        }
    }
}

/// How a scalable filter grows, and its stages: stage `i` is planned for
/// `capacity * growth^i` items at rate `p * (1 - tightening) * tightening^i`, where
/// `capacity` and `p` are the header's plan, so that the rates of all stages sum to less
/// than `p` (see `docs/format.md`, "Scalable filters").
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Scalable {
    /// Each stage's capacity over the one before it: 1 to [`MAX_GROWTH`].
    pub growth: u32,
    /// Each stage's rate over the one before it: above 0 and below 1.
    pub tightening: f64,
    /// The stages, oldest first: 1 to [`MAX_STAGES`].
    pub stages: Vec<Stage>,
}

impl Scalable {
    /// A chain with `growth`, `tightening` and `stages`.
    #[must_use]
    pub const fn new(growth: u32, tightening: f64, stages: Vec<Stage>) -> Self {
        Self {
            growth,
            tightening,
            stages,
        }
    }
}

impl PartialEq for Scalable {
    fn eq(&self, other: &Self) -> bool {
        self.growth == other.growth
            && self.tightening.to_bits() == other.tightening.to_bits()
            && self.stages == other.stages
    }
}

impl Eq for Scalable {}

impl std::hash::Hash for Scalable {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.growth.hash(state);
        self.tightening.to_bits().hash(state);
        self.stages.hash(state);
    }
}
