//! [`Capacity`]: how a filter stands against the plan it was sized for.

use bloom_format::Plan;

use crate::layout::Layout;

/// How full a filter is, measured against the capacity and false-positive rate it was
/// planned for ([`FilterConfig::plan`](crate::FilterConfig::plan)).
///
/// A Bloom filter never refuses a key: past its capacity it keeps answering, only with more
/// false positives, until every query is "maybe". This says when that starts: once more
/// items went in than it was planned for, or once the false-positive rate estimated from its
/// bits passes the target (which also catches keys inserted without being counted, such as
/// a union's).
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct Capacity {
    /// The plan.
    pub plan: Plan,
    /// The items inserted, as the filter counts them (inserts that changed a bit).
    pub items: u64,
    /// The false-positive rate estimated from the bits.
    pub estimated_false_positive_rate: f64,
    /// The estimated rate past which the filter is over its target: the target plus
    /// [`CHANCE_SIGMAS`] standard deviations of the rate of filters of its layout and size
    /// filled to the plan ([`Layout::false_positive_rate_deviation`]: the rate varies from
    /// filter to filter, much more for small blocked and split-block filters than for
    /// standard ones), so that a filter filled exactly to its plan is not called over by
    /// chance.
    pub rate_limit: f64,
}

impl Capacity {
    pub(crate) fn new(
        config: &crate::FilterConfig,
        items: u64,
        rate: impl FnOnce() -> f64,
    ) -> Option<Self> {
        config.plan().map(|plan| {
            Self::from_estimate(
                plan,
                items,
                rate(),
                config.layout(),
                config.bits(),
                config.hashes(),
            )
        })
    }

    /// How a filter of layout `layout`, `bits` bits and `hashes` positions per key, planned
    /// for `plan`, stands with `items` inserted and a false-positive rate
    /// `estimated_false_positive_rate` estimated from its bits: for readers that count the
    /// bits themselves (a streaming inspector, a filter held in Redis) and must judge as the
    /// filters do.
    ///
    /// ```
    /// use bloom_core::{Capacity, Layout, Plan};
    ///
    /// let plan = Plan::new(1_000, 0.01).unwrap();
    /// let within = Capacity::from_estimate(plan, 900, 0.008, Layout::Standard, 9_586, 7);
    /// assert!(!within.is_over() && within.remaining() == 100);
    /// assert!(Capacity::from_estimate(plan, 900, 0.05, Layout::Standard, 9_586, 7).is_over_rate());
    /// ```
    #[must_use]
    pub fn from_estimate(
        plan: Plan,
        items: u64,
        estimated_false_positive_rate: f64,
        layout: Layout,
        bits: u64,
        hashes: u32,
    ) -> Self {
        Self {
            plan,
            items,
            estimated_false_positive_rate,
            rate_limit: plan.false_positive_rate
                + CHANCE_SIGMAS * layout.false_positive_rate_deviation(bits, hashes, plan.capacity),
        }
    }

    /// How a chain of stages stands, judged as
    /// [`ScalableBloomFilter`](crate::ScalableBloomFilter) judges itself: `stages` are the
    /// stages' configurations with their item counts, oldest first, `target` the chain's
    /// rate and `estimated_false_positive_rate` the chain's rate estimated from its bits.
    ///
    /// [`Capacity::plan`] is then the newest stage's capacity at the chain's target,
    /// [`Capacity::items`] the newest stage's items (so [`Capacity::remaining`] is the room
    /// before the chain grows, and [`Capacity::is_over_items`] says the chain could not
    /// grow), and [`Capacity::rate_limit`] the target plus [`CHANCE_SIGMAS`] standard
    /// deviations of the chain's rate, its stages' variances added (a stage without a plan
    /// adds none). `None` when there is no stage, the newest stage records no plan, or
    /// `target` is not a rate in `(0, 1)`. An estimated rate that is NaN is never over.
    ///
    /// For readers that stream a chain's payload and count its bits themselves, with the
    /// configurations of `ScalableBloomFilter::stage_configs`.
    #[must_use]
    pub fn of_chain<'c>(
        target: f64,
        stages: impl IntoIterator<Item = (&'c crate::FilterConfig, u64)>,
        estimated_false_positive_rate: f64,
    ) -> Option<Self> {
        let mut variance = 0.0;
        let mut newest = None;
        for (config, items) in stages {
            if let Some(p) = config.plan() {
                let (layout, bits, hashes) = (config.layout(), config.bits(), config.hashes());
                variance += layout
                    .false_positive_rate_deviation(bits, hashes, p.capacity)
                    .powi(2);
            }
            newest = Some((config.plan(), items));
        }
        let (Some(stage), items) = newest? else {
            return None;
        };
        Some(Self {
            plan: Plan::new(stage.capacity, target)?,
            items,
            estimated_false_positive_rate,
            rate_limit: target + CHANCE_SIGMAS * f64::sqrt(variance),
        })
    }

    /// Items that still fit the plan: the capacity less the items, 0 once over.
    #[must_use]
    pub const fn remaining(&self) -> u64 {
        self.plan.capacity.saturating_sub(self.items)
    }

    /// Whether more items went in than the filter was planned for.
    #[must_use]
    pub const fn is_over_items(&self) -> bool {
        self.items > self.plan.capacity
    }

    /// Whether the estimated false-positive rate passed the target by more than the
    /// estimate's noise ([`Capacity::rate_limit`]).
    #[must_use]
    pub fn is_over_rate(&self) -> bool {
        self.estimated_false_positive_rate > self.rate_limit
    }

    /// Whether the filter is over capacity: over its items, or over its target rate.
    #[must_use]
    pub fn is_over(&self) -> bool {
        self.is_over_items() || self.is_over_rate()
    }
}

/// How many standard deviations of a filter's rate ([`Layout::false_positive_rate_deviation`])
/// chance is allowed before the rate is called over its target, and before a scalable
/// filter's stage is sized: 10. The rate of a small partitioned filter is skewed (its fullest
/// blocks dominate), so a normal tail would be wrong; ten deviations bound the chance of
/// passing by 1 % whatever the distribution (Cantelli's inequality, `1 / (1 + 10^2)`), and
/// are within a few percent of the target for filters of more than a few thousand keys.
pub const CHANCE_SIGMAS: f64 = 10.0;
