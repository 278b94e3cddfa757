//! The kernel a one-key call tests first, and the takes through which an insert learns
//! that it runs without testing it.

use super::xxh3_ascii::{Hashed, xxh3_64_ascii};
use super::{DefaultKernel, Kernel, debug_assert_whole};
use crate::key::{KeyForm, Take, Takes};
use crate::position::PositionHasher;

/// The default configuration's kernel that a one-key call tests first: the AVX2 build on
/// x86-64 (a CPU without AVX2 takes the portable one out of line, with the other kinds), the
/// portable one elsewhere. Named here alone: [`Kernel::first_tested`] and
/// [`Kernel::insert_first`] must agree on it.
#[cfg(target_arch = "x86_64")]
const FIRST: DefaultKernel = DefaultKernel::AVX2;
#[cfg(not(target_arch = "x86_64"))]
const FIRST: DefaultKernel = DefaultKernel::INLINE;

/// The [`Take`] of each key form for the kernel a one-key call tests first (see
/// [`Kernel::first_tested`]): a filter's takes when its kernel is that one, [`Take::Encode`]
/// for every form otherwise. A one-key insert reads the take it needs anyway and thereby
/// learns, with no test of the kernel, whether the first kernel runs: the test of the kernel
/// it replaces cost 2 instructions of 85, and 0.02 of the ratio to sbbf-rs-safe at 10^6 keys.
///
/// Its field is private to this module and set only by [`Kernel::first_takes`], so a take
/// other than [`Take::Encode`] in it proves the first kernel was detected: the `unsafe`
/// calls of [`Kernel::insert_first`] rest on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FirstTakes(Takes);

impl Kernel {
    /// The default configuration's kernel, if this is it and it is the one a one-key call
    /// tests before anything else: the AVX2 build on x86-64 (a CPU without AVX2 takes the
    /// portable one out of line, with the other kinds), the portable one elsewhere. Only one
    /// is inlined into a caller's loop: both made its code larger and slower.
    #[inline(always)]
    pub(super) fn first_tested(self) -> Option<DefaultKernel> {
        (self.default == FIRST).then_some(FIRST)
    }

    /// The takes of [`FirstTakes`] for this kernel, given the filter's `takes`.
    pub(crate) fn first_takes(self, takes: Takes) -> FirstTakes {
        FirstTakes(if self.runs_first() {
            takes
        } else {
            Takes::ENCODE
        })
    }

    /// Whether this is the kernel a one-key call tests first ([`Kernel::insert_first`]).
    pub(crate) fn runs_first(self) -> bool {
        self.first_tested().is_some()
    }

    /// Sets the bits of the key of bytes `key` and form `form` through the kernel a one-key
    /// call tests first, when `first` says it is the filter's kernel and the key's take lets
    /// its bytes be hashed as they are; returns whether one was clear, or `None` (and
    /// nothing set) otherwise, when the caller goes through [`Kernel::insert_taken`] or
    /// encodes the key.
    #[inline(always)]
    pub(crate) fn insert_first<W: AsMut<[u64]> + ?Sized>(
        first: FirstTakes,
        hasher: &PositionHasher,
        words: &mut W,
        key: &[u8],
        form: KeyForm,
    ) -> Option<bool> {
        let take = first.0.of(form);
        if take == Take::Encode {
            return None;
        }
        // A take other than `Encode` is in a `FirstTakes` only when `first_takes` found the
        // kernel to be the first tested, whose `DefaultKernel` is `FIRST` (on x86-64 the
        // AVX2 one, made only after `is_x86_feature_detected!`): the `unsafe` call of the
        // AVX2 insert in `insert_hash` rests on that.
        #[cfg(target_arch = "x86_64")]
        debug_assert!(
            super::avx2_detected(),
            "FirstTakes of a kernel without AVX2"
        );
        debug_assert_whole(hasher, words.as_mut().len());
        let Hashed { hash, high } = xxh3_64_ascii(key);
        // `take` is `AsIs` (no bits) or `IfAscii` (the bits of the ASCII test): this is
        // `Take::admits` without the bit that stands for `Encode`, one instruction fewer.
        if high & take as u64 != 0 {
            return None;
        }
        Some(FIRST.insert_hash(words.as_mut(), hash))
    }
}
