//! [`Divisor`]: a key's shard (`p / B`) and offset (`p % B`) by a multiply instead of a
//! division, which would cost a batch more than all the rest of its routing.

/// Division by a fixed `d > 0` through its reciprocal `m = ⌊(2^64 - 1) / d⌋`: for any `p`,
/// `⌊p·m / 2^64⌋` falls short of `⌊p / d⌋` by at most one (it is `p/d - p·(1 + r)/(d·2^64)`
/// rounded down, `r < d` the remainder of `2^64 - 1`, and `p < 2^64`), which one comparison
/// puts right.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Divisor {
    d: u64,
    m: u64,
}

impl Divisor {
    /// Division by `d` (by 1 for 0, which no shard's bit count is).
    pub(crate) fn new(d: u64) -> Self {
        let d = d.max(1);
        Self { d, m: u64::MAX / d }
    }

    /// `(p / d, p % d)`.
    #[inline]
    pub(crate) fn div_rem(self, p: u64) -> (u64, u64) {
        let q = ((u128::from(p) * u128::from(self.m)) >> 64) as u64;
        let r = p - q * self.d;
        if r >= self.d {
            (q + 1, r - self.d)
        } else {
            (q, r)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn divides_as_the_division_does() {
        let mut x = 0x9E37_79B9_7F4A_7C15_u64;
        // Numbers of every size: xorshift64, shifted right by a few of its own bits.
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x >> (x % 64)
        };
        let mut divisors = vec![1, 2, 3, 7, 64, 1000, 4_611_904, (1 << 32) - 64, 1 << 32];
        divisors.push(u64::MAX / 3);
        divisors.extend((0..1000).map(|_| next()));
        for d in divisors {
            let divisor = Divisor::new(d);
            let d = d.max(1);
            let mut dividends = vec![0, 1, d - 1, d, d.saturating_add(1), u64::MAX, u64::MAX - 1];
            dividends.push(u64::MAX / d * d);
            dividends.extend((0..1000).map(|_| next()));
            for p in dividends {
                assert_eq!(divisor.div_rem(p), (p / d, p % d), "{p} / {d}");
            }
        }
    }
}
