//! The false-positive formulas behind [`Layout`](crate::Layout): the standard rate, the
//! Poisson mixture over part loads that the blocked, split-block and sharded layouts' rates
//! are, and the bisection that plans bits per key from a rate.

/// The blocked layout's block, in bits ([`crate::BLOCK_BITS`], pinned equal by a test of
/// `layout.rs`; kept here so that the formulas depend on nothing).
pub(crate) const BLOCKED_BITS: f64 = 512.0;

/// `(1 - e^(-k / b))^k` for `b` bits per key.
pub(crate) fn standard_rate(per_key: f64, hashes: u32) -> f64 {
    let k = f64::from(hashes);
    (-(-k / per_key).exp_m1()).powf(k)
}

/// The blocked formula for `b` bits per key.
pub(crate) fn blocked_rate(per_key: f64, hashes: u32) -> f64 {
    partitioned_rate(per_key, hashes, BLOCKED_BITS)
}

/// The split-block formula for blocks of 256 bits (32-bit words), `b` bits per key.
pub(crate) fn split_rate_256(per_key: f64, hashes: u32) -> f64 {
    split_rate(per_key, hashes, 256.0)
}

/// The split-block formula for blocks of 512 bits (64-bit words), `b` bits per key.
pub(crate) fn split_rate_512(per_key: f64, hashes: u32) -> f64 {
    split_rate(per_key, hashes, 512.0)
}

/// A split block of `block` bits in `k` words: each of `i` keys in the block sets one bit
/// of each word, so a bit of a word is set with probability `1 - (1 - 1/W)^i`.
pub(crate) fn split_rate(per_key: f64, hashes: u32, block: f64) -> f64 {
    let word = block / f64::from(hashes);
    let k = i32::try_from(hashes).unwrap_or(i32::MAX);
    let unset_per_key = (-1.0 / word).ln_1p();
    poisson_mixture(block / per_key, |i| (-(unset_per_key * i).exp_m1()).powi(k))
}

/// The rate of a filter cut into parts of `block` bits, each key in one part, for `b` bits
/// per key: the Poisson mixture over part loads.
pub(crate) fn partitioned_rate(per_key: f64, hashes: u32, block: f64) -> f64 {
    let k = i32::try_from(hashes).unwrap_or(i32::MAX);
    // (1 - 1/B)^k: a bit stays unset by one key's k positions; to the power i for i keys.
    let unset_per_key = (-1.0 / block).ln_1p() * f64::from(hashes);
    poisson_mixture(block / per_key, |i| (-(unset_per_key * i).exp_m1()).powi(k))
}

/// `Σ_i Pois(i; λ) · rate(i)`: the rate of a part holding a Poisson number of keys.
pub(crate) fn poisson_mixture(lambda: f64, rate: impl Fn(f64) -> f64) -> f64 {
    let term = |i: f64, pmf: f64| pmf * rate(i);
    if lambda > NORMAL_LOADS {
        // Past a million keys per part the recurrence below would take millions of steps
        // (and stops advancing at 2^53, where i + 1 = i). The load is then normal to far
        // better than the formula's own accuracy: a fixed quadrature over ±9 standard
        // deviations, normalised by its weights.
        let deviation = lambda.sqrt();
        let (mut sum, mut weights) = (0.0, 0.0);
        for j in 0..=QUADRATURE_STEPS {
            let z = -9.0 + 18.0 * f64::from(j) / f64::from(QUADRATURE_STEPS);
            let weight = (-0.5 * z * z).exp();
            sum += term((lambda + z * deviation).max(0.0), weight);
            weights += weight;
        }
        return (sum / weights).min(1.0);
    }
    // The Poisson weights by their recurrence, outward from the mode: pmf(i + 1) = pmf(i) λ
    // / (i + 1). Below the mode, until they are below 1e-16 of the largest (the rates only
    // fall with the load there).
    let mode = lambda.floor();
    let mode_pmf = (mode * lambda.ln() - lambda - ln_factorial(mode)).exp();
    let mut sum = term(mode, mode_pmf);
    let (mut i, mut pmf) = (mode, mode_pmf);
    while i > 0.0 && pmf > mode_pmf * 1e-16 {
        pmf *= i / lambda;
        i -= 1.0;
        sum += term(i, pmf);
    }
    // Above it, the rates grow with the load, by many orders of magnitude at tiny rates
    // (the terms can peak far past where the weights look negligible): go on until the
    // weight of the whole tail, which bounds what it adds (every rate is at most 1), is
    // below 1e-16 of the sum. Past the mode the weights fall faster than a geometric
    // series of ratio q = λ / (i + 1) < 1, whose tail is pmf q / (1 - q).
    let tail = |i: f64, pmf: f64| {
        let q = lambda / (i + 1.0);
        pmf * q / (1.0 - q)
    };
    let (mut i, mut pmf) = (mode, mode_pmf);
    while pmf > 0.0 && (pmf > mode_pmf * 1e-16 || tail(i, pmf) > sum * 1e-16) {
        pmf *= lambda / (i + 1.0);
        i += 1.0;
        sum += term(i, pmf);
    }
    sum.min(1.0)
}

/// Keys per part above which the part loads are taken as normal (see [`partitioned_rate`]).
pub(crate) const NORMAL_LOADS: f64 = 1e6;

/// Intervals of the normal quadrature in [`partitioned_rate`].
const QUADRATURE_STEPS: u32 = 2048;

/// `ln(i!)` by Stirling's series (exact enough for the Poisson weights above), exactly for
/// small `i`.
pub(crate) fn ln_factorial(i: f64) -> f64 {
    if i < 20.0 {
        return (2..=i as u32).map(|j| f64::from(j).ln()).sum();
    }
    let n = i + 1.0;
    (n - 0.5) * n.ln() - n + 0.5 * (2.0 * std::f64::consts::PI).ln() + 1.0 / (12.0 * n)
        - 1.0 / (360.0 * n * n * n)
}

/// The bits per key at which `rate(·, k)` falls to `fpr` (bisection: the rate falls as the
/// bits per key grow).
pub(crate) fn bits_per_key_for(fpr: f64, hashes: u32, rate: fn(f64, u32) -> f64) -> f64 {
    let (mut low, mut high) = (0.01, 4096.0);
    if rate(high, hashes) > fpr {
        return f64::INFINITY;
    }
    // 40 halvings of [0.01, 4096]: within 4e-9 bits per key.
    for _ in 0..40 {
        let mid = 0.5 * (low + high);
        if rate(mid, hashes) > fpr {
            low = mid;
        } else {
            high = mid;
        }
    }
    high
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Poisson mixture summed term by term over every load that can matter, each weight
    /// from its own logarithm (no recurrence, no cut).
    fn direct(lambda: f64, rate: impl Fn(f64) -> f64) -> f64 {
        (0..400)
            .map(|i| {
                let i = f64::from(i);
                (i * lambda.ln() - lambda - ln_factorial(i)).exp() * rate(i)
            })
            .sum()
    }

    #[test]
    fn the_mixture_keeps_summing_while_growing_rates_outweigh_falling_weights() {
        // A blocked-512 stage of 3,072 bits for one key at k = 45 (a scalable chain's 49th
        // stage at 1 %): lambda = 1/6, and the square of a block's rate climbs from 1e-98 at
        // one key to 1e-18 at a dozen, so the terms peak at L = 12, where the weights were
        // already below 1e-16 of the mode's and the sum used to stop (2.8x too small).
        let (lambda, k) = (1.0 / 6.0, 45);
        let g = |l: f64| (-((1.0f64 - 1.0 / 512.0).ln() * f64::from(k) * l).exp_m1()).powi(k);
        for rate in [&|l: f64| g(l), &|l: f64| g(l).powi(2)] as [&dyn Fn(f64) -> f64; 2] {
            let (summed, exact) = (poisson_mixture(lambda, rate), direct(lambda, rate));
            assert!(
                (summed - exact).abs() <= exact * 1e-12,
                "{summed:e} against {exact:e}"
            );
        }
        // Ordinary loads are unchanged: the rate of a blocked filter at 10 bits per key.
        let usual = |l: f64| (-((1.0f64 - 1.0 / 512.0).ln() * 7.0 * l).exp_m1()).powi(7);
        let (summed, exact) = (poisson_mixture(51.2, usual), direct(51.2, usual));
        assert!((summed - exact).abs() <= exact * 1e-12);
    }
}
