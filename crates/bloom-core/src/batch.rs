//! The many-key operations of both filters, which past the caches hash a batch of keys
//! before touching any of their bits, and the one-key inserts they share with `insert` (the
//! probes and writes themselves are `probe.rs`).
//!
//! A filter sized for real data is larger than the CPU's caches, so each of a key's `k` probes
//! is a cache miss. One key at a time, the CPU overlaps the misses of the few keys its
//! window holds. Past the caches, a plain filter's `insert_all` and both filters'
//! `contains_each` work on two batches of [`BATCH_KEYS`] keys in turn: the next batch is
//! hashed and one word of each line it will probe is read (a few instructions per line, so
//! that every miss of the batch is in flight at once), then the batch before it, whose lines
//! have arrived meanwhile, is probed or set from the cache. The answers are exactly those of
//! one key at a time. A filter small enough to stay in cache has no miss to overlap; its
//! many-key calls go one key at a time.

use std::sync::atomic::AtomicU64;

use crate::encoding::{EncodedKey, KeyEncoding};
use crate::kernel::{Compiled, Insert, Kernel};
use crate::key::{self, Key, Probe, Takes};
use crate::position::{KeyHash, PositionHasher};
use crate::probe::{self, BitsProbe, BitsRef};

/// Keys hashed before any of their bits is touched.
pub(crate) const BATCH_KEYS: usize = 16;

/// Answers `contains_each` takes at a time in cache, in one loop ([`AnswerAhead`]): enough
/// that the loop's setup is a small share of each key's work.
const AHEAD_KEYS: usize = 64;

/// Bit arrays up to this size stay close enough to the CPU (its L2 and the part of its L3 a
/// filter gets) that one key at a time keeps its few misses overlapped, and batching only
/// adds bookkeeping. Many-key calls on them take the keys one at a time; the answers are the
/// same either way. Measured on an AMD EPYC (512 KiB L2, 32 MiB L3), batched against one at
/// a time, `contains_each` / `insert_all`: 5 MB 1.2-1.4x / 1.1-1.3x, 10 MB 1.04-1.2x /
/// 1.0x, 12.6 MB 0.83x / 0.77x, 19 MB 0.5-0.73x / 0.47-0.65x, 37 MB 0.45x / 0.42x.
const CACHED_BYTES: usize = 10 << 20;

/// Whether many-key calls on `words` words go one key at a time.
fn fits_in_cache(words: usize) -> bool {
    words.saturating_mul(8) <= CACHED_BYTES
}

/// How keys become hashes: the filter's hasher and encoding, and whether its Unicode tables
/// are foreign (then keys outside ASCII answer *maybe*; see `FilterConfig::has_foreign_tables`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct KeyHashing<'a> {
    pub(crate) hasher: &'a PositionHasher,
    pub(crate) encoding: KeyEncoding,
    pub(crate) foreign_tables: bool,
    /// `Takes::new(encoding, foreign_tables)`, kept by the filter.
    pub(crate) takes: Takes,
    /// A plain filter's kernel: its batches are probed and set by it, a batch per call.
    pub(crate) kernel: Option<Kernel>,
}

/// The hashes of up to [`BATCH_KEYS`] keys, in key order, and which of them this build
/// cannot answer exactly for.
#[derive(Clone, Debug, Default)]
pub(crate) struct HashBatch {
    hashes: [KeyHash; BATCH_KEYS],
    table_sensitive: [bool; BATCH_KEYS],
    len: usize,
}

impl KeyHashing<'_> {
    /// What a one-key call needs of the encoding: the [`Takes`], the encoding and whether
    /// the tables are foreign.
    #[inline(always)]
    pub(crate) fn rules(&self) -> (Takes, KeyEncoding, bool) {
        (self.takes, self.encoding, self.foreign_tables)
    }

    /// One key of a many-key call: its hash, and whether this build cannot answer for it
    /// exactly.
    #[inline(always)]
    pub(crate) fn prepare<K: Key + ?Sized>(&self, key: &K) -> Result<(KeyHash, bool), K::Error> {
        key::with_bytes(
            key,
            self.encoding,
            self.foreign_tables,
            |encoded, sensitive| {
                let hash = match self.kernel {
                    Some(kernel) => kernel.hash(self.hasher, encoded),
                    None => self.hasher.hash(&EncodedKey::from_encoded(encoded)),
                };
                (hash, sensitive)
            },
        )
    }
}

impl HashBatch {
    /// Replaces the batch with the hashes of the next keys, at most [`BATCH_KEYS`] of them, up
    /// to the first key the encoding refuses. Returns how many keys were taken (0 once `keys`
    /// is exhausted) and the refusal that stopped the batch, if one did.
    fn fill<K: Key>(
        &mut self,
        hashing: KeyHashing<'_>,
        keys: &mut impl Iterator<Item = K>,
    ) -> (usize, Option<K::Error>) {
        self.len = 0;
        for ((slot, sensitive), key) in self
            .hashes
            .iter_mut()
            .zip(&mut self.table_sensitive)
            .zip(keys)
        {
            match hashing.prepare(&key) {
                Ok(prepared) => (*slot, *sensitive) = prepared,
                Err(refused) => return (self.len, Some(refused)),
            }
            self.len += 1;
        }
        (self.len, None)
    }

    fn hashes(&self) -> &[KeyHash] {
        self.hashes.get(..self.len).unwrap_or_default()
    }

    fn table_sensitive(&self) -> &[bool] {
        self.table_sensitive.get(..self.len).unwrap_or_default()
    }
}

/// What a many-key insert did.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Inserted {
    /// Keys that changed a bit.
    pub(crate) changed: u64,
    /// Whether a key outside ASCII went into a filter with foreign tables.
    pub(crate) table_sensitive: bool,
}

/// An [`AtomicBloomFilter`](crate::AtomicBloomFilter)'s words, inserted into through `&`
/// (a plain filter's are set by its kernel: [`insert_many`]).
pub(crate) trait BitsMut {
    /// Read access for probes.
    fn bits(&self) -> BitsRef<'_>;

    /// Sets every position of a hashed key; returns whether any of them was unset.
    fn set(&mut self, hasher: &PositionHasher, hash: KeyHash) -> bool;

    /// Inserts a hashed key; returns whether any bit changed.
    ///
    /// The bits are probed first and written only when one is missing: the probes overlap,
    /// and a key that is already present leaves its cache lines clean (for atomic words, it
    /// also skips the locked writes). The positions are computed again for the writes, which
    /// costs a multiply each, not another SHA-256.
    #[inline]
    fn insert_key(&mut self, hasher: &PositionHasher, hash: KeyHash) -> bool {
        !self.bits().contains(hasher, hash) && self.set(hasher, hash)
    }

    /// Sets every key's bits without probing them first (keys that are new gain nothing from
    /// a probe), up to the first key the encoding refuses; counts the keys that changed a bit
    /// in `inserted`.
    fn set_each<K: Key>(
        &mut self,
        hashing: KeyHashing<'_>,
        keys: impl Iterator<Item = K>,
        inserted: &mut Inserted,
    ) -> Result<(), K::Error> {
        for key in keys {
            let (hash, sensitive) = hashing.prepare(&key)?;
            inserted.table_sensitive |= sensitive;
            if self.set(hashing.hasher, hash) {
                inserted.changed += 1;
            }
        }
        Ok(())
    }
}

/// One key's insert into a plain filter's words through `kernel`, as `insert` makes it:
/// whether a bit changed, and whether the key depends on Unicode tables a filter with
/// foreign ones lacks. A key the encoding keeps as it is (`takes`) goes straight to the
/// kernel; any other is encoded first, out of line.
#[inline(always)]
fn insert_one<K: Key>(
    words: &mut [u64],
    kernel: impl Insert,
    hasher: &PositionHasher,
    (takes, encoding, foreign_tables): (Takes, KeyEncoding, bool),
    key: K,
) -> Result<(bool, bool), K::Error> {
    let (bytes, form) = key.raw();
    match kernel.taken(hasher, words, bytes, takes.of(form)) {
        Some(changed) => Ok((changed, false)),
        None => insert_encoded(words, kernel, hasher, (encoding, foreign_tables), key),
    }
}

/// [`insert_one`] for a key that must be encoded first. The key comes by value, so that the
/// loop calling it does not store its address for every key.
#[cold]
#[inline(never)]
fn insert_encoded<K: Key>(
    words: &mut [u64],
    kernel: impl Insert,
    hasher: &PositionHasher,
    (encoding, foreign_tables): (KeyEncoding, bool),
    key: K,
) -> Result<(bool, bool), K::Error> {
    let (encoded, sensitive) = key::prepare(&key, encoding, foreign_tables)?;
    Ok((kernel.encoded(hasher, words, encoded.as_bytes()), sensitive))
}

/// Inserts `keys` through `kernel` one at a time, as `insert` does, up to the first key the
/// encoding refuses; counts what changed in `inserted`.
#[inline(always)]
fn insert_each<I>(
    words: &mut [u64],
    kernel: impl Insert,
    hashing: KeyHashing<'_>,
    keys: I,
    inserted: &mut Inserted,
) -> Result<(), <I::Item as Key>::Error>
where
    I: Iterator,
    I::Item: Key,
{
    let (rules, hasher) = (hashing.rules(), hashing.hasher);
    // Counted in locals, written once: updated through `inserted` for every key, the
    // counts were a chain of stores and loads of the same memory.
    let (mut changed, mut table_sensitive) = (0u64, false);
    let mut outcome = Ok(());
    for key in keys {
        match insert_one(words, kernel, hasher, rules, key) {
            Ok((key_changed, sensitive)) => {
                changed += u64::from(key_changed);
                table_sensitive |= sensitive;
            }
            Err(refused) => {
                outcome = Err(refused);
                break;
            }
        }
    }
    inserted.changed += changed;
    inserted.table_sensitive |= table_sensitive;
    outcome
}

/// `insert_all` of a plain filter in cache: one key at a time as `insert` does, in a loop
/// compiled for AVX2 with the default configuration's kernel ([`Kernel::compiled`]).
struct InsertEach<'a, 'h, I> {
    words: &'a mut [u64],
    hashing: KeyHashing<'h>,
    keys: I,
    inserted: &'a mut Inserted,
}

impl<I> Compiled for InsertEach<'_, '_, I>
where
    I: Iterator,
    I::Item: Key,
{
    type Output = Result<(), <I::Item as Key>::Error>;

    #[inline(always)]
    fn run(self, kernel: Kernel) -> Self::Output {
        let Self {
            words,
            hashing,
            keys,
            inserted,
        } = self;
        // The default configuration's kernel tested once, before the loop.
        match kernel.default_kernel() {
            Some(default) => insert_each(words, default, hashing, keys, inserted),
            None => insert_each(words, kernel, hashing, keys, inserted),
        }
    }
}

/// `insert_all` of a plain filter, up to the first key the encoding refuses; counts in
/// `inserted` the keys that changed a bit, exactly as many as single inserts in the same order
/// would have, and every key before a refused one is inserted. In cache, one key at a time as
/// `insert` does; past the caches, two batches in turn, each hashed and its lines prefetched
/// while the one before it is set by the kernel in one call. A single owner sets and notes what was clear in one pass, so
/// nothing is probed first.
pub(crate) fn insert_many<K: Key>(
    words: &mut [u64],
    kernel: Kernel,
    hashing: KeyHashing<'_>,
    mut keys: impl Iterator<Item = K>,
    inserted: &mut Inserted,
) -> Result<(), K::Error> {
    if fits_in_cache(words.len()) {
        return kernel.compiled(InsertEach {
            words,
            hashing,
            keys,
            inserted,
        });
    }
    // Two batches in turn: while one batch's lines are on their way, the batch before it,
    // touched a whole batch of hashing earlier, is set from the cache.
    let (mut touched, mut next) = (HashBatch::default(), HashBatch::default());
    loop {
        let (taken, refused) = next.fill(hashing, &mut keys);
        inserted.table_sensitive |= next.table_sensitive().contains(&true);
        kernel.prefetch_hashes(hashing.hasher, words, next.hashes());
        inserted.changed += kernel.insert_hashes(hashing.hasher, words, touched.hashes());
        std::mem::swap(&mut touched, &mut next);
        if taken == 0 || refused.is_some() {
            inserted.changed += kernel.insert_hashes(hashing.hasher, words, touched.hashes());
            return refused.map_or(Ok(()), Err);
        }
    }
}

impl BitsMut for &[AtomicU64] {
    fn bits(&self) -> BitsRef<'_> {
        BitsRef::Atomic(self)
    }

    #[inline]
    fn set(&mut self, hasher: &PositionHasher, hash: KeyHash) -> bool {
        probe::set_atomic(self, hasher, hash)
    }
}

/// The answers of [`BloomFilter::contains_each`](crate::BloomFilter::contains_each) and
/// [`AtomicBloomFilter::contains_each`](crate::AtomicBloomFilter::contains_each): one answer
/// per key, in order (for a filter past the CPU's caches, computed a batch of keys at a
/// time). An answer is a `bool` for text and
/// encoded keys and a `Result<bool, KeyError>` for byte keys ([`Key::Answer`]); a refused
/// byte key is answered with its error and the keys after it are answered as usual.
///
/// `false` is definite; `true` means *maybe*. Keys are taken from the underlying iterator
/// only as answers are needed, at most 64 keys ahead of the answers read, so a stream of any
/// length is answered in constant memory.
#[must_use = "iterators are lazy: no key is looked up until the answers are read"]
pub struct ContainsEach<'a, I: Iterator>
where
    I::Item: Key,
{
    bits: BitsRef<'a>,
    hashing: KeyHashing<'a>,
    keys: I,
    /// The batch whose answers are being returned.
    batch: HashBatch,
    /// The answers taken (for the keys of `batch` past the caches): `answers[..filled]`,
    /// those before `next` returned.
    answers: [bool; AHEAD_KEYS],
    next: usize,
    /// The key that stopped `batch`, answered after the batch's keys.
    refused: Option<<I::Item as Key>::Error>,
    /// The batch after `batch`: hashed, its lines touched, and the key that stopped it.
    ahead: HashBatch,
    ahead_refused: Option<<I::Item as Key>::Error>,
    /// Whether `ahead` was filled (from the first call on).
    started: bool,
    /// A filter that fits in the caches: each key hashed and probed in one step, the answers
    /// still taken [`AHEAD_KEYS`] at a time by `next` (in a loop compiled with a plain
    /// filter's kernel).
    direct: bool,
    /// How many of `answers` hold answers (those before `next` were returned).
    filled: usize,
}

impl<'a, I: Iterator> ContainsEach<'a, I>
where
    I::Item: Key,
{
    pub(crate) fn new(bits: BitsRef<'a>, hashing: KeyHashing<'a>, keys: I) -> Self {
        Self {
            direct: fits_in_cache(bits.len()),
            bits,
            hashing,
            keys,
            batch: HashBatch::default(),
            answers: [false; AHEAD_KEYS],
            next: 0,
            refused: None,
            ahead: HashBatch::default(),
            ahead_refused: None,
            started: false,
            filled: 0,
        }
    }
}

impl<I: Iterator + Clone> Clone for ContainsEach<'_, I>
where
    I::Item: Key,
    <I::Item as Key>::Error: Clone,
{
    fn clone(&self) -> Self {
        Self {
            bits: self.bits,
            hashing: self.hashing,
            keys: self.keys.clone(),
            batch: self.batch.clone(),
            answers: self.answers,
            next: self.next,
            refused: self.refused.clone(),
            ahead: self.ahead.clone(),
            ahead_refused: self.ahead_refused.clone(),
            started: self.started,
            direct: self.direct,
            filled: self.filled,
        }
    }
}

/// Shows how many answers are buffered; never the bits, the keys' hashes or the hasher's
/// salted state.
impl<I: Iterator> std::fmt::Debug for ContainsEach<'_, I>
where
    I::Item: Key,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ContainsEach")
            .field("in_cache", &self.direct)
            .field("buffered", &self.buffered())
            .finish_non_exhaustive()
    }
}

impl<I: Iterator> ContainsEach<'_, I>
where
    I::Item: Key,
{
    /// Answers taken from the keys but not yet returned.
    fn buffered(&self) -> usize {
        if self.direct {
            return self.filled - self.next + usize::from(self.refused.is_some());
        }
        let pending = self.batch.hashes().len() - self.next + self.ahead.hashes().len();
        pending + usize::from(self.refused.is_some()) + usize::from(self.ahead_refused.is_some())
    }

    /// Hashes the next batch of keys into `ahead` and touches their lines, so that they are
    /// on their way while the current batch is answered and returned.
    fn fill_ahead(&mut self) {
        let (_, refused) = self.ahead.fill(self.hashing, &mut self.keys);
        self.ahead_refused = refused;
        let (hasher, hashes) = (self.hashing.hasher, self.ahead.hashes());
        match (self.bits, self.hashing.kernel) {
            (BitsRef::Plain(words), Some(kernel)) => kernel.prefetch_hashes(hasher, words, hashes),
            (bits, _) => bits.touch(hasher, hashes),
        }
    }

    /// Answers the keys of `batch`, whose lines were touched a batch earlier.
    fn answer_batch(&mut self) {
        let (hasher, hashes) = (self.hashing.hasher, self.batch.hashes());
        let answers = self.answers.get_mut(..hashes.len()).unwrap_or_default();
        match (self.bits, self.hashing.kernel) {
            (BitsRef::Plain(words), Some(kernel)) => {
                kernel.contains_hashes(hasher, words, hashes, answers);
            }
            (bits, _) => {
                for (answer, &hash) in answers.iter_mut().zip(hashes) {
                    *answer = bits.contains(hasher, hash);
                }
            }
        }
        for (answer, &sensitive) in answers.iter_mut().zip(self.batch.table_sensitive()) {
            *answer |= sensitive;
        }
    }

    /// The next answer past the caches, once `answers` ran out: from the batch, answered a
    /// batch at a time while the batch after it is on its way.
    fn next_batched(&mut self) -> Option<<I::Item as Key>::Answer<bool>> {
        type Of<I> = <I as Iterator>::Item;
        if self.next == self.batch.hashes().len() {
            if let Some(refused) = self.refused.take() {
                return Some(<Of<I> as Key>::answer(Err(refused)));
            }
            if !self.started {
                self.started = true;
                self.fill_ahead();
            }
            std::mem::swap(&mut self.batch, &mut self.ahead);
            self.refused = self.ahead_refused.take();
            (self.next, self.filled) = (0, 0);
            if self.batch.hashes().is_empty() {
                // The keys ran out, or the batch stopped at its first key: the next call
                // starts over from the keys after it. `ahead` now holds the batch just
                // returned: emptied, it is never answered again.
                self.ahead.len = 0;
                self.started = false;
                return self
                    .refused
                    .take()
                    .map(|refused| <Of<I> as Key>::answer(Err(refused)));
            }
            self.fill_ahead();
            self.answer_batch();
        }
        self.filled = self.batch.hashes().len();
        let answer = self.answers.get(self.next..self.filled)?.first().copied()?;
        self.next += 1;
        Some(<Of<I> as Key>::answer(Ok(answer)))
    }
}

impl<I: Iterator> ContainsEach<'_, I>
where
    I::Item: Key,
{
    /// The next answer once `answers` ran out (out of line, so that `next` stays small enough
    /// to inline): past the caches, [`ContainsEach::next_batched`]; in cache, the refused key
    /// that stopped the answers, or the next [`AHEAD_KEYS`] keys' answers, each key hashed
    /// and probed in one step, in one loop (compiled with a plain filter's kernel,
    /// [`Kernel::compiled`], as `fold` does for all of them).
    #[inline(never)]
    fn refill(&mut self) -> Option<<I::Item as Key>::Answer<bool>> {
        if !self.direct {
            return self.next_batched();
        }
        if let Some(refused) = self.refused.take() {
            return Some(<I::Item as Key>::answer(Err(refused)));
        }
        let (rules, hasher) = (self.hashing.rules(), self.hashing.hasher);
        let (keys, answers) = (&mut self.keys, &mut self.answers);
        let (filled, refused) = match (self.bits, self.hashing.kernel) {
            (BitsRef::Plain(words), Some(kernel)) => kernel.compiled(AnswerAhead {
                keys,
                answers,
                rules,
                hasher,
                words,
            }),
            (bits, _) => answer_ahead(keys, answers, rules, BitsProbe::new(bits, hasher)),
        };
        (self.filled, self.next, self.refused) = (filled, 0, refused);
        if filled == 0 {
            return self
                .refused
                .take()
                .map(|refused| <I::Item as Key>::answer(Err(refused)));
        }
        self.next = 1;
        self.answers
            .first()
            .map(|&answer| <I::Item as Key>::answer(Ok(answer)))
    }
}

/// Up to [`AHEAD_KEYS`] keys' answers into `answers`, up to the first key the encoding
/// refuses, as work for [`Kernel::compiled`]: how many were answered, and the refusal.
struct AnswerAhead<'a, 'k, I: Iterator>
where
    I::Item: Key,
{
    keys: &'k mut I,
    answers: &'k mut [bool; AHEAD_KEYS],
    rules: (Takes, KeyEncoding, bool),
    hasher: &'a PositionHasher,
    words: &'a [u64],
}

impl<I: Iterator> Compiled for AnswerAhead<'_, '_, I>
where
    I::Item: Key,
{
    type Output = (usize, Option<<I::Item as Key>::Error>);

    #[inline(always)]
    fn run(self, kernel: Kernel) -> Self::Output {
        let Self {
            keys,
            answers,
            rules,
            hasher,
            words,
        } = self;
        match kernel.default_probe(hasher, words) {
            Some(probe) => answer_ahead(keys, answers, rules, probe),
            None => answer_ahead(keys, answers, rules, kernel.probe(hasher, words)),
        }
    }
}

/// [`AnswerAhead`] through `probe`.
#[inline(always)]
fn answer_ahead<I: Iterator>(
    keys: &mut I,
    answers: &mut [bool; AHEAD_KEYS],
    rules: (Takes, KeyEncoding, bool),
    probe: impl Probe,
) -> (usize, Option<<I::Item as Key>::Error>)
where
    I::Item: Key,
{
    for (filled, slot) in answers.iter_mut().enumerate() {
        let Some(key) = keys.next() else {
            return (filled, None);
        };
        match probe_key(key, rules, &probe) {
            Ok(answer) => *slot = answer,
            Err(refused) => return (filled, Some(refused)),
        }
    }
    (AHEAD_KEYS, None)
}

/// One key's answer from `probe`, as `contains` gives it. The probe comes by reference so
/// that a loop does not copy it for every key.
#[inline(always)]
fn answer<K: Key>(
    key: K,
    rules: (Takes, KeyEncoding, bool),
    probe: &impl Probe,
) -> K::Answer<bool> {
    K::answer(probe_key(key, rules, probe))
}

/// [`answer`] as a `Result`: the key's refusal as the error.
#[inline(always)]
fn probe_key<K: Key>(
    key: K,
    (takes, encoding, foreign_tables): (Takes, KeyEncoding, bool),
    probe: &impl Probe,
) -> Result<bool, K::Error> {
    match key::probe_as_is(&key, takes, *probe) {
        Some(answer) => Ok(answer),
        None => probe_encoded(key, (encoding, foreign_tables), probe),
    }
}

/// [`probe_key`] for a key that must be encoded first. The key comes by value and the probe
/// by reference, so that a loop calling it stores neither for every key (the address of a
/// key it only borrowed, or a copy of the probe, was written to the stack each time).
#[cold]
#[inline(never)]
fn probe_encoded<K: Key>(
    key: K,
    rules: (KeyEncoding, bool),
    probe: &impl Probe,
) -> Result<bool, K::Error> {
    key::probe_encoded(&key, rules, *probe)
}

/// The in-cache loop of [`ContainsEach::fold`] over a plain filter's words, as work for
/// [`Kernel::compiled`]: [`fold_answers`] with the default configuration's probe, tested
/// once, or the kernel's.
struct FoldAnswers<'a, I, B, F> {
    keys: I,
    init: B,
    f: F,
    rules: (Takes, KeyEncoding, bool),
    hasher: &'a PositionHasher,
    words: &'a [u64],
}

impl<I, B, F> Compiled for FoldAnswers<'_, I, B, F>
where
    I: Iterator,
    I::Item: Key,
    F: FnMut(B, <I::Item as Key>::Answer<bool>) -> B,
{
    type Output = B;

    #[inline(always)]
    fn run(self, kernel: Kernel) -> B {
        let Self {
            keys,
            init,
            f,
            rules,
            hasher,
            words,
        } = self;
        match kernel.default_probe(hasher, words) {
            Some(probe) => fold_answers(keys, init, f, rules, probe),
            None => fold_answers(keys, init, f, rules, kernel.probe(hasher, words)),
        }
    }
}

/// Folds the answers of `probe` for `keys` into `init` with `f`: the loop of
/// [`ContainsEach::fold`] in cache, compiled for each kind of probe.
#[inline(always)]
fn fold_answers<I, B, F>(
    keys: I,
    init: B,
    mut f: F,
    rules: (Takes, KeyEncoding, bool),
    probe: impl Probe,
) -> B
where
    I: Iterator,
    I::Item: Key,
    F: FnMut(B, <I::Item as Key>::Answer<bool>) -> B,
{
    // A loop of `next`, not the keys' own `fold`: the loop must be in this function, which
    // the default probe compiles for AVX2 with its probe inlined (the keys' `fold` was left
    // out of line, compiled without AVX2, calling the probe for each key).
    let mut acc = init;
    for key in keys {
        acc = f(acc, answer(key, rules, &probe));
    }
    acc
}

impl<I: Iterator> Iterator for ContainsEach<'_, I>
where
    I::Item: Key,
{
    type Item = <I::Item as Key>::Answer<bool>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        // The answers already taken: a few instructions, inlined into the caller's loop.
        if let Some(&answer) = self.answers.get(self.next..self.filled)?.first() {
            self.next += 1;
            return Some(<I::Item as Key>::answer(Ok(answer)));
        }
        self.refill()
    }

    /// In cache, the keys answered one at a time in a loop of their own (what `count`,
    /// `for_each` and the other consuming adapters run), with nothing kept in the iterator.
    fn fold<B, F>(mut self, init: B, mut f: F) -> B
    where
        F: FnMut(B, Self::Item) -> B,
    {
        if self.direct {
            let (bits, hashing) = (self.bits, self.hashing);
            let (rules, hasher) = (hashing.rules(), hashing.hasher);
            // The filter's kind matched once, outside the loop; the default configuration's
            // kernel too, so that its loop tests nothing per key.
            return match (bits, hashing.kernel) {
                (BitsRef::Plain(words), Some(kernel)) => kernel.compiled(FoldAnswers {
                    keys: self.keys,
                    init,
                    f,
                    rules,
                    hasher,
                    words,
                }),
                (bits, _) => fold_answers(self.keys, init, f, rules, BitsProbe::new(bits, hasher)),
            };
        }
        let mut acc = init;
        // `next`, never this `fold` again.
        for answer in self.by_ref() {
            acc = f(acc, answer);
        }
        acc
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let buffered = self.buffered();
        let (low, high) = self.keys.size_hint();
        (
            low.saturating_add(buffered),
            high.and_then(|h| h.checked_add(buffered)),
        )
    }
}

impl<I: std::iter::FusedIterator> std::iter::FusedIterator for ContainsEach<'_, I> where I::Item: Key
{}
