//! [`Capacity`]: how a filter stands against the plan it was sized for.

use bloom_format::Plan;

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
}

impl Capacity {
    pub(crate) fn new(plan: Option<Plan>, items: u64, rate: impl FnOnce() -> f64) -> Option<Self> {
        plan.map(|plan| Self {
            plan,
            items,
            estimated_false_positive_rate: rate(),
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

    /// Whether the estimated false-positive rate passed the target.
    #[must_use]
    pub fn is_over_rate(&self) -> bool {
        self.estimated_false_positive_rate > self.plan.false_positive_rate
    }

    /// Whether the filter is over capacity: over its items, or over its target rate.
    #[must_use]
    pub fn is_over(&self) -> bool {
        self.is_over_items() || self.is_over_rate()
    }
}

/// The capacity methods of a filter type that has `config()`, `items_inserted()` and
/// `estimated_false_positive_rate()`.
macro_rules! capacity_methods {
    () => {
        /// How the filter stands against its plan ([`FilterConfig::plan`]), or `None` when no
        /// plan is recorded. Counts the set bits (a pass over the filter) for the estimated
        /// rate.
        #[must_use]
        pub fn capacity(&self) -> Option<$crate::Capacity> {
            $crate::capacity::Capacity::new(self.config().plan(), self.items_inserted(), || {
                self.estimated_false_positive_rate()
            })
        }

        /// Items that still fit the plan (0 once over), or `None` when no plan is recorded.
        /// Cheap: no pass over the bits.
        #[must_use]
        pub fn remaining_capacity(&self) -> Option<u64> {
            self.config()
                .plan()
                .map(|plan| plan.capacity.saturating_sub(self.items_inserted()))
        }

        /// Whether the filter is over its plan: more items than its capacity, or an estimated
        /// false-positive rate above the target. `false` when no plan is recorded.
        #[must_use]
        pub fn is_over_capacity(&self) -> bool {
            self.capacity().is_some_and(|c| c.is_over())
        }
    };
}

pub(crate) use capacity_methods;
