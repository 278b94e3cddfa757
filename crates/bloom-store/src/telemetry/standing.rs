//! How a filter stands, as its gauges show it: [`Standing`] and, against its plan,
//! [`PlanStanding`], built from a wrapper's `metrics()`.

use crate::outcome::Metrics;

/// How a filter stands, for its gauges: what a wrapper's `metrics()` reports.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct Standing {
    /// Whether the wrapper trusts the filter (its mode), so that the trust gauge agrees
    /// with it at every `metrics()` whatever happened between.
    pub trusted: bool,
    /// The share of bits (or counters) set.
    pub fill_ratio: f64,
    /// Distinct keys estimated from the fill.
    pub estimated_items: f64,
    /// The rate predicted from the fill.
    pub predicted_false_positive_rate: f64,
    /// The rate measured on absent keys since this filter was built or installed, if any
    /// were asked (the gauge is not exported before).
    pub observed_false_positive_rate: Option<f64>,
    /// How it stands against the plan it records, if it records one (a filter in Redis
    /// created without a plan records none; its plan's gauges are then not exported).
    pub plan: Option<PlanStanding>,
}

/// How a filter stands against its plan.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct PlanStanding {
    /// The keys it was planned for.
    pub capacity: u64,
    /// Keys that still fit the plan.
    pub remaining_capacity: u64,
    /// The planned rate.
    pub target_false_positive_rate: f64,
    /// Whether the measured rate passed the target by more than chance allows.
    pub observed_over_target: bool,
    /// Whether the filter is past its plan.
    pub over_capacity: bool,
}

impl From<&Metrics> for Standing {
    fn from(m: &Metrics) -> Self {
        Self {
            trusted: m.mode.is_trusted(),
            fill_ratio: m.fill_ratio,
            estimated_items: m.estimated_items,
            predicted_false_positive_rate: m.predicted_false_positive_rate,
            observed_false_positive_rate: m.observed_false_positive_rate,
            plan: Some(PlanStanding {
                capacity: m.capacity,
                remaining_capacity: m.remaining_capacity,
                target_false_positive_rate: m.target_false_positive_rate,
                observed_over_target: m.observed_over_target,
                over_capacity: m.over_capacity,
            }),
        }
    }
}
