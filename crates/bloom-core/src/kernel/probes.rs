//! The one-key probes of a plain filter's `contains` through its [`Kernel`]: the kernel's
//! own, and the default configuration's, which a loop over many keys picks once.

use super::Kernel;
#[cfg(not(target_arch = "x86_64"))]
use super::Kind;
#[cfg(target_arch = "x86_64")]
use super::avx2;
#[cfg(not(target_arch = "x86_64"))]
use super::compiled;
use super::compiled::Xxh3_64;
use super::xxh3_ascii::{Hashed, xxh3_64_ascii};
use crate::key::{Probe, Take};
use crate::position::PositionHasher;

impl Kernel {
    /// The one-key probe of `words` ([`Probe`]), whose keys are placed with `hasher`.
    #[inline(always)]
    pub(crate) fn probe<'a>(self, hasher: &'a PositionHasher, words: &'a [u64]) -> KernelProbe<'a> {
        KernelProbe {
            kernel: self,
            hasher,
            words,
        }
    }

    /// The probe of the default configuration ([`Kind::DEFAULT_AVX2`], or its portable
    /// build off x86-64), if this is its kernel: for a loop over many keys, tested once.
    #[inline(always)]
    pub(crate) fn default_probe<'a>(
        self,
        hasher: &'a PositionHasher,
        words: &'a [u64],
    ) -> Option<DefaultProbe<'a>> {
        #[cfg(target_arch = "x86_64")]
        let default = self.default_avx2;
        #[cfg(not(target_arch = "x86_64"))]
        let default = self.kind == Kind::DEFAULT_PORTABLE;
        default.then_some(DefaultProbe { hasher, words })
    }
}

/// A plain filter's one-key probe through its kernel ([`Kernel::probe`]).
#[derive(Clone, Copy)]
pub(crate) struct KernelProbe<'a> {
    kernel: Kernel,
    hasher: &'a PositionHasher,
    words: &'a [u64],
}

impl Probe for KernelProbe<'_> {
    #[inline(always)]
    fn taken(self, bytes: &[u8], take: Take) -> Option<bool> {
        self.kernel
            .contains_taken(self.hasher, self.words, bytes, take)
    }

    #[inline(always)]
    fn encoded(self, encoded: &[u8]) -> bool {
        self.kernel.contains(self.hasher, self.words, encoded)
    }
}

/// The default configuration's one-key probe ([`Kernel::default_probe`]): the hash with its
/// ASCII test ([`xxh3_64_ascii`]), then the 512-bit split-block probe compiled for AVX2 (on
/// x86-64; the portable one elsewhere). Only `Kernel::default_probe` makes one, and on
/// x86-64 only for a kernel that found AVX2.
#[derive(Clone, Copy)]
pub(crate) struct DefaultProbe<'a> {
    hasher: &'a PositionHasher,
    words: &'a [u64],
}

impl DefaultProbe<'_> {
    /// Whether the bits of the key of default hash `hash` are all set: the kernel compiled
    /// for AVX2.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn probe_hash(self, hash: u64) -> bool {
        // SAFETY: a `DefaultProbe` is made only by `Kernel::default_probe`, and on x86-64 only
        // when `default_avx2` is set, which it is only when `kind` equals
        // `Kind::DEFAULT_AVX2`, whose `avx2` a `Kernel` has only on a CPU with AVX2 (see
        // `split!`).
        #[allow(unsafe_code)]
        unsafe {
            avx2::split_contains_hash::<Xxh3_64, true>(self.hasher, self.words, hash)
        }
    }

    /// Whether the bits of the key of default hash `hash` are all set: the portable kernel.
    #[cfg(not(target_arch = "x86_64"))]
    #[inline(always)]
    fn probe_hash(self, hash: u64) -> bool {
        compiled::split_contains_hash::<Xxh3_64, true>(self.hasher, self.words, hash)
    }
}

impl Probe for DefaultProbe<'_> {
    #[inline(always)]
    fn taken(self, bytes: &[u8], take: Take) -> Option<bool> {
        default_hash(bytes, take).map(|hash| self.probe_hash(hash))
    }

    #[inline(always)]
    fn encoded(self, encoded: &[u8]) -> bool {
        self.probe_hash(super::xxh3_ascii::xxh3_64(encoded))
    }
}

/// The default rule's hash of `key` (`xxh3-64`), unless `take` says its bytes must be
/// encoded first: the ASCII test taken from the hash's loads.
#[inline(always)]
pub(super) fn default_hash(key: &[u8], take: Take) -> Option<u64> {
    let Hashed { hash, high } = xxh3_64_ascii(key);
    take.admits(high).then_some(hash)
}
