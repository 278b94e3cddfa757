//! SplitMix64: a small deterministic generator, so that a test, a probe or an example makes
//! the same choices in every run.

/// The generator: `SplitMix(seed)` starts it, and the same seed gives the same numbers.
pub struct SplitMix(
    /// Its state (the seed, at first).
    pub u64,
);

impl SplitMix {
    /// The next number.
    #[expect(
        clippy::should_implement_trait,
        reason = "an endless generator: as an `Iterator`, every caller would unwrap"
    )]
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}
