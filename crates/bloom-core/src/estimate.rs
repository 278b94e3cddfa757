//! Estimates computed from the number of set bits `X` of an `m`-bit filter with `k` positions
//! per key: fill ratio, item count and current false-positive rate. Both filter types use
//! them; they are public for tools that count the bits of a snapshot without loading it.

/// `X / m`.
#[must_use]
pub fn fill_ratio(ones: u64, bits: u64) -> f64 {
    ones as f64 / bits as f64
}

/// Swamidass and Baldi (2007): `n* = -(m / k) ln(1 - X / m)`.
///
/// A saturated filter (`X = m`) would give infinity; it is estimated at `X = m - 1/2`
/// instead, a finite lower bound, so callers never see NaN or infinity.
#[must_use]
pub fn estimated_items(ones: u64, bits: u64, hashes: u32) -> f64 {
    let m = bits as f64;
    let x = if ones >= bits { m - 0.5 } else { ones as f64 };
    -(m / f64::from(hashes)) * (-x / m).ln_1p()
}

/// The chance that a key never inserted hits only set bits, given the current fill:
/// `(X / m)^k`.
#[must_use]
pub fn current_false_positive_rate(ones: u64, bits: u64, hashes: u32) -> f64 {
    fill_ratio(ones, bits).powf(f64::from(hashes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saturated_and_empty_filters_give_finite_estimates() {
        assert!(estimated_items(0, 1024, 4).abs() < f64::EPSILON);
        let saturated = estimated_items(1024, 1024, 4);
        assert!(saturated.is_finite() && saturated > 1000.0, "{saturated}");
        assert!(estimated_items(1, 1, 1).is_finite());
        assert!((current_false_positive_rate(1024, 1024, 4) - 1.0).abs() < f64::EPSILON);
    }

    #[test]
    fn estimate_inverts_the_expected_fill() {
        // After n items, E[X] = m (1 - e^(-kn/m)).
        let (m, k, n) = (1_000_000u64, 7u32, 50_000f64);
        let x = (m as f64 * -(-f64::from(k) * n / m as f64).exp_m1()).round() as u64;
        assert!((estimated_items(x, m, k) - n).abs() < 10.0);
    }
}
