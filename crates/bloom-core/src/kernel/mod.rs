//! A plain filter's probe and insert, one key or a batch of hashed keys, compiled once per
//! configuration.

#[cfg(target_arch = "x86_64")]
mod avx2;
mod compiled;
mod first;
mod probes;
mod xxh3_ascii;

use self::compiled::{Xxh3_64, Xxh3_128Low, Xxh64};
pub(crate) use self::first::FirstTakes;
use self::probes::DefaultProbe;
pub(crate) use self::probes::{Compiled, Insert, KernelProbe};
use crate::encoding::EncodedKey;
use crate::key::{Probe, Take};
use crate::layout::Layout;
use crate::position::{KeyHash, PositionHasher, PositionRule};
use crate::probe::BitsRef;

/// The unsalted 64-bit hash of a split-block kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SplitHashId {
    /// `xxh64`, seed 0.
    Xxh64,
    /// `xxh3-64`, seed 0: the default rule's.
    Xxh3_64,
    /// The low 64 bits of `xxh3-128`, seed 0.
    Xxh3_128Low,
}

/// The bits per key of a blocked kernel: the planner's usual k.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BlockedK {
    /// 6 bits.
    K6,
    /// 7 bits.
    K7,
    /// 8 bits.
    K8,
    /// 10 bits.
    K10,
}

/// A plain filter's probe and insert, chosen once, when the filter is made, and matched on
/// in each call: a few well-predicted branches, then straight-line code.
///
/// For an unsalted split-block filter of `xxh64`, `xxh3-64` (the default) or `xxh3-128`, and
/// for an unsalted `xxh3-128` filter with the blocked layout and one of the planner's usual
/// k, the code is compiled for that configuration: a call hashes with the seed folded in,
/// finds the block and tests or sets its bits in straight-line code, with no rule, layout or
/// k to dispatch on. The default configuration (`xxh3-64`, 512-bit split blocks) is tested
/// first: one direct call of its kernel compiled for AVX2 when the CPU has it (a function
/// built for AVX2 cannot be inlined into one that is not), its portable kernel inlined
/// elsewhere off x86-64. Its hash is this crate's XXH3 for keys up to 128 bytes
/// (`xxh3_ascii.rs`), whose loads also give the ASCII test a text key must pass to be hashed
/// as it is. The other kinds are matched out of line, the split-block ones also compiled
/// for AVX2. Every other configuration takes the general code. All place every key exactly
/// where [`PositionHasher::each_position`] does (`tests/insert_law.rs`,
/// `compiled_probes_test_and_set_exactly_the_specified_positions`).
///
/// Keys come as their bytes with what the filter does with them ([`Take`]): hashed as they
/// are, if ASCII, or encoded first (then the call answers `None` and the caller encodes the
/// key). Each operation also comes in a form that takes the key's hash
/// ([`PositionHasher::hash`]) instead, compiled alike: the stages of a scalable filter share
/// rule and salt, so a chain hashes a key once and probes each stage with its own kernel,
/// and a batch hashes its keys before it probes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Kernel {
    /// How the default configuration's kernel runs, when `kind` is it: the one case tested
    /// before the match.
    default: DefaultKernel,
    kind: Kind,
}

/// How a [`Kernel`] runs the default configuration's probe and insert. Its field is
/// private to this module, so that only `Kernel::with_simd` (for [`Kernel::new`], after
/// detecting AVX2) makes [`DefaultKernel::AVX2`], besides [`Kernel::insert_first`] when its
/// [`FirstTakes`] prove that a kernel so made exists, and only `Kernel::inlined` (within a
/// function compiled for AVX2, which only that kernel runs) makes
/// [`DefaultKernel::AVX2_INLINE`]: the `unsafe` calls rest on both.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DefaultKernel(DefaultMode);

/// The ways of [`DefaultKernel`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum DefaultMode {
    No,
    Avx2,
    #[cfg(target_arch = "x86_64")]
    Avx2Inline,
    Inline,
}

impl DefaultKernel {
    /// Not the default configuration: the kernel's kind is matched out of line.
    const NO: Self = Self(DefaultMode::No);
    /// A call of the functions compiled for AVX2. A `Kernel` has this only when `kind` is
    /// [`Kind::DEFAULT_AVX2`], on a CPU with AVX2.
    const AVX2: Self = Self(DefaultMode::Avx2);
    /// Within a loop that [`Kernel::compiled`] compiles for AVX2: the portable probe and the
    /// AVX2 insert, inlined. A `Kernel` has this only there, on a CPU with AVX2.
    #[cfg(target_arch = "x86_64")]
    const AVX2_INLINE: Self = Self(DefaultMode::Avx2Inline);
    /// The portable code, inlined: on a CPU without AVX2 (or off x86-64).
    const INLINE: Self = Self(DefaultMode::Inline);
}

/// The configurations a [`Kernel`] is compiled for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// A split-block layout (512-bit blocks when `wide`) of an unsalted 64-bit hash. `avx2`
    /// is set only after the CPU was found to have AVX2: the `unsafe` calls rest on it.
    Split {
        hash: SplitHashId,
        wide: bool,
        avx2: bool,
    },
    /// The blocked layout of unsalted `xxh3-128`.
    Blocked(BlockedK),
    /// Any other configuration.
    General,
}

/// Runs the split-block kernel function `$f` of `$hash` and `$wide` with `$args`: the
/// AVX2 build when `$avx2`, the portable one otherwise.
macro_rules! split {
    ($hash:expr, $wide:expr, $avx2:expr, $f:ident($($arg:expr),*)) => {{
        // Off x86-64 no kernel is built for AVX2.
        #[cfg(not(target_arch = "x86_64"))]
        let _ = $avx2;
        #[cfg(target_arch = "x86_64")]
        if $avx2 {
            // SAFETY: a `Kind::Split` with `avx2` set is built only by `Kernel::with_simd`, and
            // only with the `avx2` that `Kernel::new` had from `is_x86_feature_detected!` (the
            // fields are private to this module; `Kind::DEFAULT_AVX2` is only compared with,
            // never used to build a `Kernel`). The functions are safe code with no other
            // precondition.
            #[allow(unsafe_code)]
            return unsafe {
                match ($hash, $wide) {
                    (SplitHashId::Xxh3_64, true) => avx2::$f::<Xxh3_64, true>($($arg),*),
                    (SplitHashId::Xxh3_64, false) => avx2::$f::<Xxh3_64, false>($($arg),*),
                    (SplitHashId::Xxh64, true) => avx2::$f::<Xxh64, true>($($arg),*),
                    (SplitHashId::Xxh64, false) => avx2::$f::<Xxh64, false>($($arg),*),
                    (SplitHashId::Xxh3_128Low, true) => avx2::$f::<Xxh3_128Low, true>($($arg),*),
                    (SplitHashId::Xxh3_128Low, false) => {
                        avx2::$f::<Xxh3_128Low, false>($($arg),*)
                    }
                }
            };
        }
        match ($hash, $wide) {
            (SplitHashId::Xxh3_64, true) => compiled::$f::<Xxh3_64, true>($($arg),*),
            (SplitHashId::Xxh3_64, false) => compiled::$f::<Xxh3_64, false>($($arg),*),
            (SplitHashId::Xxh64, true) => compiled::$f::<Xxh64, true>($($arg),*),
            (SplitHashId::Xxh64, false) => compiled::$f::<Xxh64, false>($($arg),*),
            (SplitHashId::Xxh3_128Low, true) => compiled::$f::<Xxh3_128Low, true>($($arg),*),
            (SplitHashId::Xxh3_128Low, false) => compiled::$f::<Xxh3_128Low, false>($($arg),*),
        }
    }};
}

/// Runs the blocked kernel function `$f` of `$k` with `$args`.
macro_rules! blocked {
    ($k:expr, $f:ident($($arg:expr),*)) => {
        match $k {
            BlockedK::K6 => compiled::$f::<6>($($arg),*),
            BlockedK::K7 => compiled::$f::<7>($($arg),*),
            BlockedK::K8 => compiled::$f::<8>($($arg),*),
            BlockedK::K10 => compiled::$f::<10>($($arg),*),
        }
    };
}

impl Kernel {
    /// The kernel of a filter placing keys with `hasher`, compiled for AVX2 when the CPU has
    /// it.
    pub(crate) fn new(hasher: &PositionHasher) -> Self {
        Self::with_simd(hasher, avx2_detected())
    }

    /// [`Kernel::new`], with AVX2 only if `avx2` (which must be false unless the CPU has it).
    fn with_simd(hasher: &PositionHasher, avx2: bool) -> Self {
        let kind = Kind::new(hasher, avx2);
        let default = match kind {
            Kind::DEFAULT_AVX2 => DefaultKernel::AVX2,
            Kind::DEFAULT_PORTABLE => DefaultKernel::INLINE,
            _ => DefaultKernel::NO,
        };
        Self { default, kind }
    }

    /// Whether every bit of the key of bytes `key` is set in `words`, when its [`Take`]
    /// lets the bytes be hashed as they are; `None` when they must be encoded first.
    ///
    /// The default configuration is one test, then [`DefaultProbe`]; the other kernels are
    /// matched out of line.
    #[inline(always)]
    pub(crate) fn contains_taken<W: AsRef<[u64]> + ?Sized>(
        self,
        hasher: &PositionHasher,
        words: &W,
        key: &[u8],
        take: Take,
    ) -> Option<bool> {
        debug_assert_whole(hasher, words.as_ref().len());
        if let Some(default) = self.first_tested() {
            return DefaultProbe::new(default, words).taken(key, take);
        }
        take.admits_bytes(key)
            .then(|| self.kind.contains(hasher, words.as_ref(), key))
    }

    /// Sets the bits of the key of bytes `key` when its [`Take`] lets the bytes be hashed as
    /// they are, and returns whether one was clear; `None` (and nothing set) when they must
    /// be encoded first. As [`Kernel::contains_taken`].
    #[inline(always)]
    pub(crate) fn insert_taken<W: AsMut<[u64]> + ?Sized>(
        self,
        hasher: &PositionHasher,
        words: &mut W,
        key: &[u8],
        take: Take,
    ) -> Option<bool> {
        debug_assert_whole(hasher, words.as_mut().len());
        if let Some(default) = self.first_tested() {
            return Insert::taken(default, hasher, words, key, take);
        }
        take.admits_bytes(key)
            .then(|| self.kind.insert(hasher, words.as_mut(), key))
    }

    /// Whether every bit of the key of encoded bytes `key` is set in `words`.
    #[inline]
    pub(crate) fn contains(self, hasher: &PositionHasher, words: &[u64], key: &[u8]) -> bool {
        // Every take admits bytes to be hashed as they are: `None` never comes.
        self.contains_taken(hasher, words, key, Take::AsIs)
            .unwrap_or(true)
    }

    /// Sets the bits of the key of encoded bytes `key`; returns whether one was clear.
    #[inline]
    pub(crate) fn insert(self, hasher: &PositionHasher, words: &mut [u64], key: &[u8]) -> bool {
        self.insert_taken(hasher, words, key, Take::AsIs)
            .unwrap_or_default()
    }

    /// Whether every bit of the key of hash `hash` is set in `words`: as
    /// [`Kernel::contains`] for the key.
    #[inline]
    pub(crate) fn contains_hash(
        self,
        hasher: &PositionHasher,
        words: &[u64],
        hash: KeyHash,
    ) -> bool {
        debug_assert_whole(hasher, words.len());
        self.kind.contains_hash(hasher, words, hash)
    }

    /// Sets the bits of the key of hash `hash`; returns whether one was clear: as
    /// [`Kernel::insert`] for the key.
    #[inline]
    pub(crate) fn insert_hash(
        self,
        hasher: &PositionHasher,
        words: &mut [u64],
        hash: KeyHash,
    ) -> bool {
        debug_assert_whole(hasher, words.len());
        self.kind.insert_hash(hasher, words, hash)
    }
}

impl Kernel {
    /// [`PositionHasher::hash`] of the key of encoded bytes `key`, with the seed folded in
    /// for the default rule.
    #[inline(always)]
    pub(crate) fn hash(self, hasher: &PositionHasher, key: &[u8]) -> KeyHash {
        match self.kind {
            Kind::Split {
                hash: SplitHashId::Xxh3_64,
                ..
            } => KeyHash::of_u64(xxh3_ascii::xxh3_64(key)),
            _ => hasher.hash(&EncodedKey::from_encoded(key)),
        }
    }

    /// Asks for the lines a batch of hashed keys will probe or set, so that they are on
    /// their way while other work runs: a prefetch of each key's block with the split-block
    /// kernels on AVX2, a read of one word of each line otherwise.
    #[inline]
    pub(crate) fn prefetch_hashes(
        self,
        hasher: &PositionHasher,
        words: &[u64],
        hashes: &[KeyHash],
    ) {
        debug_assert_whole(hasher, words.len());
        match self.kind {
            Kind::Split { hash, wide, avx2 } => {
                split!(hash, wide, avx2, split_prefetch_hashes(words, hashes))
            }
            _ => BitsRef::Plain(words).touch(hasher, hashes),
        }
    }

    /// [`Kernel::contains_hash`] of each of a batch of hashed keys, answered in order into
    /// `answers`: one dispatch for the batch.
    #[inline]
    pub(crate) fn contains_hashes(
        self,
        hasher: &PositionHasher,
        words: &[u64],
        hashes: &[KeyHash],
        answers: &mut [bool],
    ) {
        debug_assert_whole(hasher, words.len());
        match self.kind {
            Kind::Split { hash, wide, avx2 } => {
                split!(
                    hash,
                    wide,
                    avx2,
                    split_contains_hashes(words, hashes, answers)
                )
            }
            kind => {
                for (answer, &hash) in answers.iter_mut().zip(hashes) {
                    *answer = kind.contains_hash(hasher, words, hash);
                }
            }
        }
    }

    /// [`Kernel::insert_hash`] of each of a batch of hashed keys, in order: one dispatch for
    /// the batch. Returns how many changed a bit.
    #[inline]
    pub(crate) fn insert_hashes(
        self,
        hasher: &PositionHasher,
        words: &mut [u64],
        hashes: &[KeyHash],
    ) -> u64 {
        debug_assert_whole(hasher, words.len());
        match self.kind {
            Kind::Split { hash, wide, avx2 } => {
                split!(hash, wide, avx2, split_insert_hashes(words, hashes))
            }
            kind => hashes
                .iter()
                .map(|&hash| u64::from(kind.insert_hash(hasher, words, hash)))
                .sum(),
        }
    }
}

impl Kind {
    /// The default configuration's kernel (`xxh3-64`, 512-bit split blocks) compiled for
    /// AVX2.
    const DEFAULT_AVX2: Self = Self::Split {
        hash: SplitHashId::Xxh3_64,
        wide: true,
        avx2: true,
    };

    /// [`Kind::DEFAULT_AVX2`] for the baseline CPU.
    const DEFAULT_PORTABLE: Self = Self::Split {
        hash: SplitHashId::Xxh3_64,
        wide: true,
        avx2: false,
    };

    fn new(hasher: &PositionHasher, avx2: bool) -> Self {
        if let Some((rule, layout)) = hasher.unsalted_split() {
            let hash = match rule {
                PositionRule::Xxh64 => SplitHashId::Xxh64,
                PositionRule::Xxh3_64 => SplitHashId::Xxh3_64,
                _ => SplitHashId::Xxh3_128Low,
            };
            let wide = layout != Layout::SplitBlock256;
            return Self::Split { hash, wide, avx2 };
        }
        match hasher.unsalted_xxh3_blocked_k() {
            Some(6) => Self::Blocked(BlockedK::K6),
            Some(7) => Self::Blocked(BlockedK::K7),
            Some(8) => Self::Blocked(BlockedK::K8),
            Some(10) => Self::Blocked(BlockedK::K10),
            _ => Self::General,
        }
    }

    /// [`Kernel::contains`] of every kind.
    #[inline(never)]
    fn contains(self, hasher: &PositionHasher, words: &[u64], key: &[u8]) -> bool {
        match self {
            Self::Split { hash, wide, avx2 } => {
                split!(hash, wide, avx2, split_contains(words, key))
            }
            Self::Blocked(k) => blocked!(k, blocked_contains(hasher, words, key)),
            Self::General => compiled::general_contains(hasher, words, key),
        }
    }

    /// [`Kernel::insert`] of every kind.
    #[inline(never)]
    fn insert(self, hasher: &PositionHasher, words: &mut [u64], key: &[u8]) -> bool {
        match self {
            Self::Split { hash, wide, avx2 } => {
                split!(hash, wide, avx2, split_insert(words, key))
            }
            Self::Blocked(k) => blocked!(k, blocked_insert(hasher, words, key)),
            Self::General => compiled::general_insert(hasher, words, key),
        }
    }

    /// [`Kernel::contains_hash`] of every kind.
    #[inline(never)]
    fn contains_hash(self, hasher: &PositionHasher, words: &[u64], hash: KeyHash) -> bool {
        match self {
            Self::Split {
                hash: id,
                wide,
                avx2,
            } => {
                split!(id, wide, avx2, split_contains_hash(words, hash.first()))
            }
            Self::Blocked(k) => blocked!(k, blocked_contains_hash(hasher, words, hash)),
            Self::General => compiled::general_contains_hash(hasher, words, hash),
        }
    }

    /// [`Kernel::insert_hash`] of every kind.
    #[inline(never)]
    fn insert_hash(self, hasher: &PositionHasher, words: &mut [u64], hash: KeyHash) -> bool {
        match self {
            Self::Split {
                hash: id,
                wide,
                avx2,
            } => {
                split!(id, wide, avx2, split_insert_hash(words, hash.first()))
            }
            Self::Blocked(k) => blocked!(k, blocked_insert_hash(hasher, words, hash)),
            Self::General => compiled::general_insert_hash(hasher, words, hash),
        }
    }
}

/// Checks (in debug builds) that a kernel is given all of a filter's words: the split-block
/// kernels find a key's block among the blocks of the words they are given
/// (`split::contains_hash`), which are the filter's only when they are all of them.
#[inline(always)]
fn debug_assert_whole(hasher: &PositionHasher, words: usize) {
    debug_assert_eq!(
        words as u64,
        hasher.bits().div_ceil(64),
        "a kernel is given all of a filter's words"
    );
}

/// Whether this CPU has AVX2 (detected once by the standard library, then a load).
fn avx2_detected() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::is_x86_feature_detected!("avx2")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{FilterParams, Salt};

    /// The hasher of a filter of `blocks` 512-bit blocks with `rule`, `layout`, `k` and
    /// `salt`, and how many words its bits take.
    fn planned(
        rule: PositionRule,
        layout: Layout,
        k: u32,
        blocks: u64,
        salt: &Salt,
    ) -> (PositionHasher, usize) {
        let params = FilterParams::with_layout(layout, 512 * blocks, k).unwrap();
        let hasher = PositionHasher::new(rule, layout, params.bits(), k, salt);
        (hasher, (params.bits() / 64) as usize)
    }

    #[test]
    fn the_hash_forms_place_keys_as_the_key_forms_do() {
        let configs = [
            (PositionRule::Xxh3_128, Layout::Blocked512, 7),
            (PositionRule::Xxh3_128, Layout::Blocked512, 9),
            (PositionRule::Xxh3_128, Layout::Standard, 7),
            (PositionRule::Xxh3_128, Layout::SplitBlock512, 8),
            (PositionRule::Xxh3_128, Layout::SplitBlock256, 8),
            (PositionRule::Xxh3_64, Layout::SplitBlock512, 8),
            (PositionRule::Xxh64, Layout::SplitBlock256, 8),
            (PositionRule::Sha256Double, Layout::Blocked512, 6),
            (PositionRule::Sha256Split4, Layout::Standard, 4),
        ];
        for (rule, layout, k) in configs {
            for salt in [Salt::default(), Salt::new(b"s").unwrap()] {
                if !salt.is_empty()
                    && !matches!(rule, PositionRule::Xxh3_128 | PositionRule::Sha256Double)
                {
                    continue;
                }
                let (hasher, words) = planned(rule, layout, k, 13, &salt);
                let kernel = Kernel::new(&hasher);
                let (mut by_key, mut by_hash) = (vec![0u64; words], vec![0u64; words]);
                for i in 0..3000u32 {
                    let key = i.to_le_bytes();
                    let hash = hasher.hash(&EncodedKey::from_encoded(&key));
                    assert!(kernel.hash(&hasher, &key) == hash);
                    assert_eq!(
                        kernel.contains_taken(&hasher, &by_key, &key, Take::AsIs),
                        Some(kernel.contains_hash(&hasher, &by_hash, hash)),
                        "{rule} {layout} k {k}"
                    );
                    assert_eq!(
                        kernel.insert(&hasher, &mut by_key, &key),
                        kernel.insert_hash(&hasher, &mut by_hash, hash)
                    );
                    assert_eq!(by_key, by_hash, "{rule} {layout} k {k}, key {i}");
                }
            }
        }
    }

    #[test]
    fn both_split_kernels_place_keys_alike() {
        for layout in [Layout::SplitBlock256, Layout::SplitBlock512] {
            let (hasher, words) = planned(PositionRule::Xxh3_64, layout, 8, 61, &Salt::default());
            let portable = Kernel::with_simd(&hasher, false);
            let selected = Kernel::new(&hasher);
            assert!(matches!(
                portable.kind,
                Kind::Split {
                    hash: SplitHashId::Xxh3_64,
                    avx2: false,
                    ..
                }
            ));
            assert!(portable.default != DefaultKernel::AVX2);
            let (mut a, mut b) = (vec![0u64; words], vec![0u64; words]);
            // Keys of every length the hash branches on, ASCII and not, under every take.
            let takes = [Take::AsIs, Take::IfAscii, Take::Encode];
            for i in 0..6000u32 {
                let mut key = format!("{i:0>width$}", width = (i % 200) as usize).into_bytes();
                if i % 3 == 0
                    && let Some(byte) = key.get_mut((i / 3) as usize % 200)
                {
                    *byte |= 0x80;
                }
                let take = takes[(i / 7) as usize % 3];
                let admitted = take.admits_bytes(&key);
                let high = if key.is_ascii() { 0 } else { 0x80 };
                assert_eq!(admitted, take.admits(high));
                let probed = portable.contains_taken(&hasher, &a, &key, take);
                assert_eq!(probed.is_some(), admitted, "{layout}, key {i}");
                assert_eq!(probed, selected.contains_taken(&hasher, &b, &key, take));
                let set = portable.insert_taken(&hasher, &mut a, &key, take);
                assert_eq!(set.is_some(), admitted, "{layout}, key {i}");
                assert_eq!(set, selected.insert_taken(&hasher, &mut b, &key, take));
                assert_eq!(a, b, "{layout}, key {i}");
            }
            assert!(a.iter().any(|&w| w != 0));
            #[cfg(target_arch = "x86_64")]
            println!("{layout}: AVX2 {}", std::is_x86_feature_detected!("avx2"));
        }
    }

    /// The batch forms (prefetch, then probe or set a batch of hashes) of both split-block
    /// kernels answer and set exactly as one key at a time, for every configuration kind.
    #[test]
    fn batch_forms_answer_and_set_as_one_key_at_a_time() {
        let configs = [
            (PositionRule::Xxh3_64, Layout::SplitBlock512, 8),
            (PositionRule::Xxh3_64, Layout::SplitBlock256, 8),
            (PositionRule::Xxh64, Layout::SplitBlock256, 8),
            (PositionRule::Xxh3_128, Layout::SplitBlock512, 8),
            (PositionRule::Xxh3_128, Layout::Blocked512, 7),
            (PositionRule::Sha256Double, Layout::Standard, 5),
        ];
        for (rule, layout, k) in configs {
            let (hasher, words) = planned(rule, layout, k, 37, &Salt::default());
            for kernel in [Kernel::with_simd(&hasher, false), Kernel::new(&hasher)] {
                let (mut one, mut batched) = (vec![0u64; words], vec![0u64; words]);
                let hashes: Vec<KeyHash> = (0..600u32)
                    .map(|i| hasher.hash(&EncodedKey::from_encoded(&i.to_le_bytes())))
                    .collect();
                let (inserted, queried) = hashes.split_at(300);
                let mut changed = 0;
                for &hash in inserted {
                    changed += u64::from(kernel.insert_hash(&hasher, &mut one, hash));
                }
                let mut batch_changed = 0;
                for batch in inserted.chunks(16) {
                    kernel.prefetch_hashes(&hasher, &batched, batch);
                    batch_changed += kernel.insert_hashes(&hasher, &mut batched, batch);
                }
                assert_eq!(one, batched, "{rule} {layout}");
                assert_eq!(changed, batch_changed, "{rule} {layout}");
                for batch in hashes.chunks(16) {
                    let mut answers = [false; 16];
                    kernel.prefetch_hashes(&hasher, &batched, batch);
                    kernel.contains_hashes(&hasher, &batched, batch, &mut answers);
                    for (&hash, &answer) in batch.iter().zip(&answers) {
                        assert_eq!(answer, kernel.contains_hash(&hasher, &one, hash));
                    }
                }
                assert!(
                    queried
                        .iter()
                        .any(|&h| !kernel.contains_hash(&hasher, &one, h)),
                    "{rule} {layout}: some keys never inserted read absent"
                );
            }
        }
    }
}
