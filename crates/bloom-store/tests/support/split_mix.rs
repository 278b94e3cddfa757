//! SplitMix64: a small deterministic generator, so that a test, a probe or an example makes
//! the same choices in every run. Shared by file (`#[path]`) with the examples and the other
//! crates' probes.

/// The generator's state.
pub(crate) struct SplitMix(pub(crate) u64);

impl SplitMix {
    /// The next number.
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}
