//! [`ObservedRate`]: false positives a store refuted, counted, and whether they pass an
//! expected rate by more than chance allows: the check that tells an operator a filter no
//! longer answers at the rate it was planned for.

/// Below this many false positives, no count is called more than chance, whatever the rate
/// it is held against.
pub const MIN_DRIFT_COUNT: u64 = 10;

/// The natural log of the chance below which an observed count is called more than chance:
/// `e^-30`, about `10^-13`. A filter that answers at its rate is called drifted less than once
/// in ten trillion checks.
pub const DRIFT_LOG_CHANCE: f64 = -30.0;

/// The false positives observed on keys that were absent: "maybe" answers a store refuted,
/// out of every query for an absent key (those refuted, and those the filter ruled out).
///
/// ```
/// use bloom_core::ObservedRate;
///
/// // 1 % planned: 104 of 10,000 is chance, 300 of 10,000 is not.
/// assert!(!ObservedRate::new(104, 10_000).passes(0.01));
/// assert!(ObservedRate::new(300, 10_000).passes(0.01));
/// // A small count never passes, however unlikely.
/// assert!(!ObservedRate::new(3, 3).passes(0.01));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ObservedRate {
    /// "Maybe" answers the store refuted.
    pub false_positives: u64,
    /// Queries for keys that were absent: the false positives and the keys ruled out.
    pub absent: u64,
}

impl ObservedRate {
    /// `false_positives` of `absent` queries (`absent` at least `false_positives`).
    #[must_use]
    pub const fn new(false_positives: u64, absent: u64) -> Self {
        Self {
            false_positives,
            absent: if absent < false_positives {
                false_positives
            } else {
                absent
            },
        }
    }

    /// The rate of a wrapper's lookups: `false_positives` "maybe" answers the store refuted,
    /// and `lookups_avoided` keys the filter ruled out by itself.
    #[must_use]
    pub const fn of_lookups(false_positives: u64, lookups_avoided: u64) -> Self {
        Self::new(
            false_positives,
            false_positives.saturating_add(lookups_avoided),
        )
    }

    /// `false_positives / absent`, or `None` before any query for an absent key.
    #[must_use]
    pub fn rate(&self) -> Option<f64> {
        (self.absent > 0).then(|| self.false_positives as f64 / self.absent as f64)
    }

    /// Whether the count passes `expected` (a rate, such as the plan's target) by more than
    /// chance allows: at least [`MIN_DRIFT_COUNT`] false positives, and a chance below
    /// `e^`[`DRIFT_LOG_CHANCE`] of seeing this many if each query were a false positive with
    /// probability `expected`. The chance is bounded by Chernoff's bound on the binomial
    /// tail, `P(X >= k) <= exp(-n D(k/n || p))` (`D` the Kullback-Leibler divergence), which
    /// holds for every `n` and `p`: no normal approximation is trusted with a small count.
    ///
    /// The check assumes queries are for distinct keys. The same absent key asked again and
    /// again, when it is a false positive, is counted each time: the observed rate then
    /// rises above the filter's, and this says so, rightly, since each costs a store lookup.
    #[must_use]
    pub fn passes(&self, expected: f64) -> bool {
        let (k, n) = (self.false_positives, self.absent);
        if k < MIN_DRIFT_COUNT || n == 0 || !expected.is_finite() {
            return false;
        }
        let p = expected.clamp(f64::MIN_POSITIVE, 1.0);
        let q = k as f64 / n as f64;
        if q <= p {
            return false;
        }
        n as f64 * kl_divergence(q, p) > -DRIFT_LOG_CHANCE
    }
}

/// `D(q || p)`, for `0 < p < q <= 1`.
fn kl_divergence(q: f64, p: f64) -> f64 {
    let upper = q * (q / p).ln();
    let lower = if q < 1.0 {
        (1.0 - q) * ((1.0 - q) / (1.0 - p)).ln()
    } else {
        0.0
    };
    upper + lower
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edges_never_pass_wrongly() {
        assert_eq!(ObservedRate::new(0, 0).rate(), None);
        assert!(!ObservedRate::new(0, 0).passes(0.01));
        assert!(
            !ObservedRate::new(9, 9).passes(1e-9),
            "under the minimum count"
        );
        assert!(ObservedRate::new(10, 10).passes(1e-9));
        assert!(
            !ObservedRate::new(1_000, 1_000).passes(1.0),
            "a rate of 1 allows all"
        );
        assert!(!ObservedRate::new(50, 100).passes(f64::NAN));
        assert!(
            ObservedRate::new(50, 100).passes(0.0),
            "no false positive was expected"
        );
        // A count above the rate but within chance: 1 % of 100,000 is 1,000 (sd 31.5).
        assert!(!ObservedRate::new(1_120, 100_000).passes(0.01));
        assert!(ObservedRate::new(1_400, 100_000).passes(0.01));
        // `absent` below `false_positives` is taken as equal.
        assert_eq!(ObservedRate::new(5, 2).absent, 5);
    }
}
