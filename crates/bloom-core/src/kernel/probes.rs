//! The one-key probes of a plain filter's `contains` through its [`Kernel`]: the kernel's
//! own, and the default configuration's, which a loop over many keys picks once.

#[cfg(target_arch = "x86_64")]
use super::avx2;
use super::compiled::{self, Xxh3_64};
use super::xxh3_ascii::{Hashed, xxh3_64_ascii};
use super::{DefaultKernel, Kernel};
use crate::key::{Probe, Take};
use crate::position::PositionHasher;

impl Kernel {
    /// Runs `work`, a loop over many keys through this kernel, compiled for AVX2 when this
    /// is the default configuration's AVX2 kernel, and with the kernel inlined into the loop
    /// (`work` gets the kernel to use: [`DefaultKernel::AVX2_INLINE`] there) instead of
    /// called for each key.
    #[inline(always)]
    pub(crate) fn compiled<W: Compiled>(self, work: W) -> W::Output {
        #[cfg(target_arch = "x86_64")]
        if self.default == DefaultKernel::AVX2 {
            // SAFETY: `DefaultKernel::AVX2` is made only by `Kernel::with_simd`, for the kind
            // `Kernel::new` built after detecting AVX2 (`DefaultKernel`'s field is private to
            // `kernel`).
            #[allow(unsafe_code)]
            return unsafe { avx2::run_avx2(work, self) };
        }
        work.run(self)
    }

    /// This kernel with the default configuration's kernel inlined, for code compiled for
    /// AVX2 ([`Kernel::compiled`]), which runs only with [`DefaultKernel::AVX2`].
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    pub(super) fn inlined(self) -> Self {
        debug_assert!(self.default == DefaultKernel::AVX2);
        Self {
            default: DefaultKernel::AVX2_INLINE,
            ..self
        }
    }

    /// The one-key probe of `words` ([`Probe`]), whose keys are placed with `hasher`.
    #[inline(always)]
    pub(crate) fn probe<'a, W: AsRef<[u64]> + ?Sized>(
        self,
        hasher: &'a PositionHasher,
        words: &'a W,
    ) -> KernelProbe<'a, W> {
        KernelProbe {
            kernel: self,
            hasher,
            words,
        }
    }

    /// The default configuration's kernel as a loop runs it, if this is its kernel: tested
    /// once, before the loop.
    #[inline(always)]
    pub(crate) fn default_kernel(self) -> Option<DefaultKernel> {
        (self.default != DefaultKernel::NO).then_some(self.default)
    }

    /// The probe of the default configuration, if this is its kernel: for a loop over many
    /// keys, tested once.
    #[inline(always)]
    pub(crate) fn default_probe(self, words: &[u64]) -> Option<DefaultProbe<'_, [u64]>> {
        let default = self.default_kernel()?;
        Some(DefaultProbe::new(default, words))
    }
}

/// Work that [`Kernel::compiled`] runs compiled for AVX2. A trait, not a closure:
/// `run` is inlined into the AVX2 function by its `#[inline(always)]`, where a closure was
/// left out of line (and so compiled without AVX2).
pub(crate) trait Compiled {
    /// What the work returns.
    type Output;

    /// Does the work through `kernel`.
    fn run(self, kernel: Kernel) -> Self::Output;
}

/// A plain filter's one-key insert, as `insert_all` runs it in cache: through its
/// [`Kernel`], or through the default configuration's kernel, picked once for a loop.
pub(crate) trait Insert: Copy {
    /// Sets the bits of the key of bytes `key` when `take` lets them be hashed as they are,
    /// and returns whether one was clear; `None` when they must be encoded first.
    ///
    /// The default configuration's kernel reaches `words` only once the key is hashed: a
    /// filter's word array is a pointer and a length, which loaded before the hash were kept
    /// across it on the stack (measured 4 instructions of a one-key insert's 94, and of a
    /// probe's 85).
    fn taken<W: AsMut<[u64]> + ?Sized>(
        self,
        hasher: &PositionHasher,
        words: &mut W,
        key: &[u8],
        take: Take,
    ) -> Option<bool>;

    /// Sets the bits of the key of encoded bytes `key`; returns whether one was clear.
    fn encoded(self, hasher: &PositionHasher, words: &mut [u64], key: &[u8]) -> bool;
}

impl Insert for Kernel {
    #[inline(always)]
    fn taken<W: AsMut<[u64]> + ?Sized>(
        self,
        hasher: &PositionHasher,
        words: &mut W,
        key: &[u8],
        take: Take,
    ) -> Option<bool> {
        self.insert_taken(hasher, words, key, take)
    }

    #[inline(always)]
    fn encoded(self, hasher: &PositionHasher, words: &mut [u64], key: &[u8]) -> bool {
        self.insert(hasher, words, key)
    }
}

// The default configuration places a key by its hash and the blocks of the words alone: the
// hasher is not read.
impl Insert for DefaultKernel {
    #[inline(always)]
    fn taken<W: AsMut<[u64]> + ?Sized>(
        self,
        _: &PositionHasher,
        words: &mut W,
        key: &[u8],
        take: Take,
    ) -> Option<bool> {
        // `?`, not `Option::map`: a closure holding the kernel was left out of line.
        let hash = default_hash(key, take)?;
        Some(self.insert_hash(words.as_mut(), hash))
    }

    #[inline(always)]
    fn encoded(self, _: &PositionHasher, words: &mut [u64], key: &[u8]) -> bool {
        self.insert_hash(words, super::xxh3_ascii::xxh3_64(key))
    }
}

/// A plain filter's one-key probe through its kernel ([`Kernel::probe`]), of the words
/// `W` holds: a slice, or a filter's word array, which the default configuration's kernel
/// reaches only once the key is hashed (see [`Insert::taken`]).
pub(crate) struct KernelProbe<'a, W: ?Sized> {
    kernel: Kernel,
    hasher: &'a PositionHasher,
    words: &'a W,
}

// Not derived: the derive would ask `W: Clone + Copy`, which a slice is not, and `W` is only
// behind a reference.
impl<W: ?Sized> Clone for KernelProbe<'_, W> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<W: ?Sized> Copy for KernelProbe<'_, W> {}

impl<W: AsRef<[u64]> + ?Sized> Probe for KernelProbe<'_, W> {
    #[inline(always)]
    fn taken(self, bytes: &[u8], take: Take) -> Option<bool> {
        self.kernel
            .contains_taken(self.hasher, self.words, bytes, take)
    }

    #[inline(always)]
    fn encoded(self, encoded: &[u8]) -> bool {
        self.kernel
            .contains(self.hasher, self.words.as_ref(), encoded)
    }
}

/// The default configuration's one-key probe ([`Kernel::default_probe`]): the hash with its
/// ASCII test ([`xxh3_64_ascii`]), then the 512-bit split-block probe as `default` runs it,
/// of the words `W` holds (reached once the key is hashed, as [`KernelProbe`]'s).
pub(crate) struct DefaultProbe<'a, W: ?Sized> {
    /// Never [`DefaultKernel::NO`].
    default: DefaultKernel,
    words: &'a W,
}

// Not derived, as `KernelProbe`'s.
impl<W: ?Sized> Clone for DefaultProbe<'_, W> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<W: ?Sized> Copy for DefaultProbe<'_, W> {}

impl<'a, W: AsRef<[u64]> + ?Sized> DefaultProbe<'a, W> {
    /// The probe of `words` as `default` runs it, which must not be
    /// [`DefaultKernel::NO`].
    #[inline(always)]
    pub(super) fn new(default: DefaultKernel, words: &'a W) -> Self {
        Self { default, words }
    }

    /// Whether the bits of the key of default hash `hash` are all set.
    #[inline(always)]
    fn probe_hash(self, hash: u64) -> bool {
        self.default.contains_hash(self.words.as_ref(), hash)
    }
}

impl DefaultKernel {
    /// The default configuration's probe of the key of hash `hash`, as this runs it.
    #[inline(always)]
    pub(super) fn contains_hash(self, words: &[u64], hash: u64) -> bool {
        #[cfg(target_arch = "x86_64")]
        if self == Self::AVX2 {
            // SAFETY: as in `Kernel::compiled`: `DefaultKernel::AVX2` exists only on a CPU with
            // AVX2.
            #[allow(unsafe_code)]
            return unsafe { avx2::split_contains_hash::<Xxh3_64, true>(words, hash) };
        }
        compiled::split_contains_hash::<Xxh3_64, true>(words, hash)
    }

    /// The default configuration's insert of the key of hash `hash`, as this runs it: the
    /// AVX2 insert, which stores a block only if a bit was clear, called, or inlined into a
    /// loop compiled for AVX2.
    #[inline(always)]
    pub(super) fn insert_hash(self, words: &mut [u64], hash: u64) -> bool {
        #[cfg(target_arch = "x86_64")]
        if self == Self::AVX2 || self == Self::AVX2_INLINE {
            // SAFETY: as in `contains_hash` (`Kernel::insert_first` names
            // `DefaultKernel::AVX2` only when its `FirstTakes` prove a kernel made with it
            // exists); `DefaultKernel::AVX2_INLINE` exists only within `avx2::run_avx2`,
            // which only a `DefaultKernel::AVX2` kernel runs.
            #[allow(unsafe_code)]
            return unsafe { avx2::split_insert_hash::<Xxh3_64, true>(words, hash) };
        }
        compiled::split_insert_hash::<Xxh3_64, true>(words, hash)
    }
}

impl<W: AsRef<[u64]> + ?Sized> Probe for DefaultProbe<'_, W> {
    #[inline(always)]
    fn taken(self, bytes: &[u8], take: Take) -> Option<bool> {
        // `?`, not `Option::map`: a closure holding the kernel was left out of line.
        let hash = default_hash(bytes, take)?;
        Some(self.probe_hash(hash))
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
