//! [`ContainsEach`]: the answers of `contains_each`, one per key in order, taken a batch of
//! hashed keys at a time past the caches (the keys after them hashed and their lines
//! requested meanwhile) and, in cache, a plain filter's [`AHEAD_KEYS`] at a time in one loop
//! compiled with its kernel.

use super::{AHEAD_KEYS, BATCH_KEYS, COLLECT_KEYS, HashBatch, KeyHashing, fits_in_cache};
use crate::encoding::KeyEncoding;
use crate::kernel::{Compiled, Kernel};
use crate::key::{self, Key, Probe, Takes};
use crate::position::PositionHasher;
use crate::probe::{BitsProbe, BitsRef};

/// The answers of [`BloomFilter::contains_each`](crate::BloomFilter::contains_each) and
/// [`AtomicBloomFilter::contains_each`](crate::AtomicBloomFilter::contains_each): one answer
/// per key, in order (computed a batch of keys at a time for a filter past the CPU's
/// caches, and 256 at a time for a plain filter in them; an atomic filter in them answers
/// each key when it is asked for). An answer is a `bool` for text and
/// encoded keys and a `Result<bool, KeyError>` for byte keys ([`Key::Answer`]); a refused
/// byte key is answered with its error and the keys after it are answered as usual.
///
/// `false` is definite; `true` means *maybe*. Keys are taken from the underlying iterator
/// only as answers are needed, at most 256 keys ahead of the answers read, so a stream of any
/// length is answered in constant memory. The exception is `collect` in cache, on keys whose
/// `size_hint` gives an upper bound: it takes every key's answer, up to the first refused
/// key or the keys' first end, before it hands them to the collection, one byte each (a
/// `Vec` of answers is then that very buffer). So a collection that stops early has still
/// had every key read, and keys that end and then resume are collected up to their first
/// end, as the standard collections stop there anyway.
#[must_use = "iterators are lazy: no key is looked up until the answers are read"]
pub struct ContainsEach<'a, I: Iterator>
where
    I::Item: Key,
{
    bits: BitsRef<'a>,
    hashing: KeyHashing<'a>,
    /// The keys not yet taken. `None` only while the in-cache loop holds them (it takes them
    /// by value, so that they live in registers there rather than in `self`), and, should
    /// the keys' own iterator panic in that loop, from then on.
    keys: Option<I>,
    /// Past the caches, the batch whose answers are being returned and the one after it
    /// (none in cache, so that the iterator there is small to make and to move). `None`
    /// past the caches only once the keys' own iterator panicked while a batch was being
    /// filled: the answers then end.
    batches: Option<Box<Batches>>,
    /// The answers taken (for the keys of `batch` past the caches): `answers[..filled]`,
    /// those before `next` returned.
    answers: [bool; AHEAD_KEYS],
    next: usize,
    /// The key that stopped `answers[..filled]` (past the caches, `batch`), answered after
    /// them.
    refused: Option<<I::Item as Key>::Error>,
    /// The key that stopped the batch after `batch` (in `batches`), or whether the keys
    /// ended right after it.
    ahead_refused: Option<<I::Item as Key>::Error>,
    ahead_ended: bool,
    /// Whether `ahead` was filled for the batch being returned (false before the first
    /// answer, and again after the keys ran out or a batch stopped at its first key).
    started: bool,
    /// A filter that fits in the caches: each key hashed and probed in one step; a plain
    /// filter's answers taken [`AHEAD_KEYS`] at a time by `next` (in a loop compiled with its
    /// kernel).
    direct: bool,
    /// How many of `answers` hold answers (those before `next` were returned).
    filled: usize,
    /// The keys answered `None` right after `answers[..filled]`: `next` answers `None` there
    /// too, so an iterator that is not fused keeps its end where it was.
    ended: bool,
}

/// The two batches of a `contains_each` past the caches.
#[derive(Clone, Default)]
struct Batches {
    /// The batch whose answers are being returned.
    batch: HashBatch,
    /// The batch after `batch`: hashed, and its lines touched.
    ahead: HashBatch,
}

impl<'a, I: Iterator> ContainsEach<'a, I>
where
    I::Item: Key,
{
    pub(crate) fn new(bits: BitsRef<'a>, hashing: KeyHashing<'a>, keys: I) -> Self {
        let direct = fits_in_cache(bits.len());
        Self {
            direct,
            bits,
            hashing,
            keys: Some(keys),
            batches: (!direct).then(Box::default),
            answers: [false; AHEAD_KEYS],
            next: 0,
            refused: None,
            ahead_refused: None,
            ahead_ended: false,
            started: false,
            filled: 0,
            ended: false,
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
            batches: self.batches.clone(),
            answers: self.answers,
            next: self.next,
            refused: self.refused.clone(),
            ahead_refused: self.ahead_refused.clone(),
            ahead_ended: self.ahead_ended,
            started: self.started,
            direct: self.direct,
            filled: self.filled,
            ended: self.ended,
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
        let pending = self.batches.as_deref().map_or(0, |b| {
            b.batch.hashes().len() - self.next + b.ahead.hashes().len()
        });
        pending + usize::from(self.refused.is_some()) + usize::from(self.ahead_refused.is_some())
    }

    /// Hashes the next batch of keys into `ahead` and touches their lines, so that they are
    /// on their way while the current batch is answered and returned.
    fn fill_ahead(&mut self, batches: &mut Batches) {
        let (taken, refused) = match self.keys.as_mut() {
            Some(keys) => batches.ahead.fill(self.hashing, keys),
            None => batches
                .ahead
                .fill(self.hashing, &mut std::iter::empty::<I::Item>()),
        };
        // A batch stops short at a refused key or at the keys' end.
        self.ahead_ended = taken < BATCH_KEYS && refused.is_none();
        self.ahead_refused = refused;
        let (hasher, hashes) = (self.hashing.hasher, batches.ahead.hashes());
        match (self.bits, self.hashing.kernel) {
            (BitsRef::Plain(words), Some(kernel)) => kernel.prefetch_hashes(hasher, words, hashes),
            (bits, _) => bits.touch(hasher, hashes),
        }
    }

    /// Answers the keys of `batch`, whose lines were touched a batch earlier.
    fn answer_batch(&mut self, batch: &HashBatch) {
        let (hasher, hashes) = (self.hashing.hasher, batch.hashes());
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
        for (answer, &sensitive) in answers.iter_mut().zip(batch.table_sensitive()) {
            *answer |= sensitive;
        }
    }

    /// The next answer past the caches, once `answers` ran out: from the batch, answered a
    /// batch at a time while the batch after it is on its way.
    fn next_batched(&mut self) -> Option<<I::Item as Key>::Answer<bool>> {
        let Some(mut batches) = self.batches.take() else {
            // Lost to a panic of the keys' iterator: the answers end (and `size_hint` says
            // so), rather than go on with answers out of step with the keys.
            (self.keys, self.refused, self.ahead_refused) = (None, None, None);
            return None;
        };
        let answer = self.next_of(&mut batches);
        self.batches = Some(batches);
        answer
    }

    /// [`ContainsEach::next_batched`] with its batches.
    fn next_of(&mut self, batches: &mut Batches) -> Option<<I::Item as Key>::Answer<bool>> {
        type Of<I> = <I as Iterator>::Item;
        if self.next == batches.batch.hashes().len() {
            if let Some(refused) = self.refused.take() {
                return Some(<Of<I> as Key>::answer(Err(refused)));
            }
            if std::mem::take(&mut self.ended) {
                // The keys ended after the batch just returned: answered here, and the next
                // call starts over from the keys after that end.
                self.started = false;
                return None;
            }
            if !self.started {
                self.started = true;
                self.fill_ahead(batches);
            }
            std::mem::swap(&mut batches.batch, &mut batches.ahead);
            self.refused = self.ahead_refused.take();
            self.ended = std::mem::take(&mut self.ahead_ended);
            (self.next, self.filled) = (0, 0);
            // `ahead` now holds the batch just returned: emptied, it is never answered again.
            batches.ahead.len = 0;
            if batches.batch.hashes().is_empty() {
                // The keys ran out, or the batch stopped at its first key: the next call
                // starts over from the keys after it.
                self.started = false;
                self.ended = false;
                return self
                    .refused
                    .take()
                    .map(|refused| <Of<I> as Key>::answer(Err(refused)));
            }
            // Nothing is read past the keys' end until the answers before it are returned.
            if self.ended {
                self.started = false;
            } else {
                self.fill_ahead(batches);
            }
            self.answer_batch(&batches.batch);
        }
        self.filled = batches.batch.hashes().len();
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
    /// or the end of the keys that stopped the answers, or else a plain filter's next
    /// [`AHEAD_KEYS`] keys' answers, each key hashed and probed in one step, in one loop
    /// compiled with its kernel ([`Kernel::compiled`], as `fold` does for all of them), and
    /// an atomic filter's next key's answer.
    #[inline(never)]
    fn refill(&mut self) -> Option<<I::Item as Key>::Answer<bool>> {
        if !self.direct {
            return self.next_batched();
        }
        if let Some(refused) = self.refused.take() {
            return Some(<I::Item as Key>::answer(Err(refused)));
        }
        if std::mem::take(&mut self.ended) {
            return None;
        }
        let (filled, refused, ended) = match (self.bits, self.hashing.kernel) {
            (BitsRef::Plain(words), Some(kernel)) => answer_into(
                &mut self.keys,
                self.hashing,
                kernel,
                words,
                &mut self.answers,
            )?,
            // An atomic filter answers each key when it is asked for, as `contains` does:
            // an insert finished before that `next` is in its answer.
            (bits, _) => {
                let key = self.keys.as_mut()?.next()?;
                let (rules, hasher) = (self.hashing.rules(), self.hashing.hasher);
                return Some(answer(key, rules, &BitsProbe::new(bits, hasher)));
            }
        };
        (self.filled, self.next, self.refused, self.ended) = (filled, 0, refused, ended);
        if filled == 0 {
            self.ended = false;
            if ended {
                return None;
            }
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

/// How many answers a loop took, the refusal of a key that stopped it, and whether the keys
/// ended.
type Taken<E> = (usize, Option<E>, bool);

/// What [`AnswerAhead`] gives for the keys `keys` holds, which it takes by value and puts
/// back: how many answers, the refusal that stopped them, and whether the keys ended;
/// `None` when the keys are gone (lost to a panic of theirs in an earlier call).
fn answer_into<I: Iterator>(
    keys: &mut Option<I>,
    hashing: KeyHashing<'_>,
    kernel: Kernel,
    words: &[u64],
    answers: &mut [bool],
) -> Option<Taken<<I::Item as Key>::Error>>
where
    I::Item: Key,
{
    let (rest, filled, refused, ended) = kernel.compiled(AnswerAhead {
        keys: keys.take()?,
        answers,
        rules: hashing.rules(),
        hasher: hashing.hasher,
        words,
    });
    *keys = Some(rest);
    Some((filled, refused, ended))
}

/// As many keys' answers as `answers` holds ([`AHEAD_KEYS`] for `next`, more for
/// `collect`), up to the first key the encoding refuses or the end of the keys, as work for
/// [`Kernel::compiled`]: the keys after them, how many were answered, the refusal, and
/// whether the keys ended. The keys come and go by value: through a reference, the loop
/// loaded and stored their position for every key (the compiler cannot tell it from
/// `answers`).
struct AnswerAhead<'a, 'k, I: Iterator>
where
    I::Item: Key,
{
    keys: I,
    answers: &'k mut [bool],
    rules: (Takes, KeyEncoding, bool),
    hasher: &'a PositionHasher,
    words: &'a [u64],
}

impl<I: Iterator> Compiled for AnswerAhead<'_, '_, I>
where
    I::Item: Key,
{
    type Output = (I, usize, Option<<I::Item as Key>::Error>, bool);

    #[inline(always)]
    fn run(self, kernel: Kernel) -> Self::Output {
        let Self {
            keys,
            answers,
            rules,
            hasher,
            words,
        } = self;
        match kernel.default_probe(words) {
            Some(probe) => answer_ahead(keys, answers, rules, probe),
            None => answer_ahead(keys, answers, rules, kernel.probe(hasher, words)),
        }
    }
}

/// [`AnswerAhead`] through `probe`.
#[inline(always)]
fn answer_ahead<I: Iterator>(
    mut keys: I,
    answers: &mut [bool],
    rules: (Takes, KeyEncoding, bool),
    probe: impl Probe,
) -> (I, usize, Option<<I::Item as Key>::Error>, bool)
where
    I::Item: Key,
{
    for (filled, slot) in answers.iter_mut().enumerate() {
        let Some(key) = keys.next() else {
            return (keys, filled, None, true);
        };
        match probe_key(key, rules, &probe) {
            Ok(answer) => *slot = answer,
            Err(refused) => return (keys, filled, Some(refused), false),
        }
    }
    let filled = answers.len();
    (keys, filled, None, false)
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
        match kernel.default_probe(words) {
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
        let next = self.next;
        if next < self.filled {
            self.next = next + 1;
            // `filled` is at most `AHEAD_KEYS`, a power of two: the remainder is `next`, and
            // needs no bounds check.
            let answer = self.answers[next % AHEAD_KEYS];
            return Some(<I::Item as Key>::answer(Ok(answer)));
        }
        self.refill()
    }

    /// In cache, the answers `next` took first, then the keys answered in a loop of their own
    /// (what `count`, `for_each` and the other consuming adapters run).
    fn fold<B, F>(mut self, init: B, mut f: F) -> B
    where
        F: FnMut(B, Self::Item) -> B,
    {
        if self.direct {
            let mut init = init;
            for &answer in self.answers.get(self.next..self.filled).unwrap_or_default() {
                init = f(init, <I::Item as Key>::answer(Ok(answer)));
            }
            if let Some(refused) = self.refused.take() {
                init = f(init, <I::Item as Key>::answer(Err(refused)));
            }
            let Some(keys) = self.keys.filter(|_| !self.ended) else {
                return init;
            };
            let (bits, hashing) = (self.bits, self.hashing);
            let (rules, hasher) = (hashing.rules(), hashing.hasher);
            // The filter's kind matched once, outside the loop; the default configuration's
            // kernel too, so that its loop tests nothing per key.
            return match (bits, hashing.kernel) {
                (BitsRef::Plain(words), Some(kernel)) => kernel.compiled(FoldAnswers {
                    keys,
                    init,
                    f,
                    rules,
                    hasher,
                    words,
                }),
                (bits, _) => fold_answers(keys, init, f, rules, BitsProbe::new(bits, hasher)),
            };
        }
        let mut acc = init;
        // `next`, never this `fold` again.
        for answer in self.by_ref() {
            acc = f(acc, answer);
        }
        acc
    }

    /// In cache, for a plain filter and keys that say how many they are at most (a finite
    /// upper bound in their `size_hint`), the answers are first taken in one loop into a
    /// `Vec<bool>` that grows as they come, which becomes the collection (reused in place
    /// when it is a `Vec` of answers): `Vec::from_iter` calls `next` for every answer, and
    /// storing and reloading the iterator's position in memory for each one cost more than
    /// the rest of the work (measured 1.02x the time of `contains` one key at a time
    /// collected alike, and 0.84x taken this way). The loop stops at a refused key, and
    /// what comes after it is collected through `next`, as is everything in the other
    /// cases; it stops for good at the keys' first end (see [`ContainsEach`]).
    fn collect<B: FromIterator<Self::Item>>(mut self) -> B {
        type Of<I> = <I as Iterator>::Item;
        let fresh = self.next == self.filled && self.refused.is_none() && !self.ended;
        let (BitsRef::Plain(words), Some(kernel), true, true) =
            (self.bits, self.hashing.kernel, self.direct, fresh)
        else {
            return B::from_iter(self);
        };
        let Some((_, Some(most))) = self.keys.as_ref().map(Iterator::size_hint) else {
            return B::from_iter(self);
        };
        let mut answers: Vec<bool> = Vec::new();
        let (mut refused, mut ended) = (None, false);
        // Keys past the most they said they were are taken through `next`.
        while answers.len() <= most
            && let Some((low, high)) = self.keys.as_ref().map(Iterator::size_hint)
        {
            // Room for the keys' lower bound, at least as many as taken so far (the `Vec`
            // doubles) and at most their upper bound, within `COLLECT_KEYS`; and one more,
            // so that keys of exact size are seen to end in one pass.
            let room = low
                .max(answers.len())
                .max(AHEAD_KEYS)
                .min(high.unwrap_or(usize::MAX))
                .min(COLLECT_KEYS)
                + 1;
            let start = answers.len();
            answers.resize(start.saturating_add(room), false);
            let spare = answers.get_mut(start..).unwrap_or_default();
            let Some((filled, stopped, end)) =
                answer_into(&mut self.keys, self.hashing, kernel, words, spare)
            else {
                answers.truncate(start);
                break;
            };
            answers.truncate(start + filled);
            (refused, ended) = (stopped, end);
            if refused.is_some() || ended {
                break;
            }
        }
        // The buffer doubles as it grows, and a lower bound may claim more keys than come:
        // the collection it becomes keeps no more than a quarter of it spare.
        if answers.capacity() - answers.len() > answers.len() / 4 + AHEAD_KEYS {
            answers.shrink_to_fit();
        }
        let answered = answers.into_iter().map(|a| <Of<I> as Key>::answer(Ok(a)));
        if refused.is_none() && ended {
            return answered.collect();
        }
        // A refused key stopped the loop, or keys went on past their upper bound: the rest
        // through `next`.
        (self.refused, self.ended) = (refused, ended);
        answered.chain(self).collect()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let buffered = self.buffered();
        if self.ended || self.ahead_ended {
            // The keys answered `None` after the answers taken: `next` does too.
            return (buffered, Some(buffered));
        }
        // Past the caches, batches lost to a panic of the keys end the answers.
        let keys = self
            .keys
            .as_ref()
            .filter(|_| self.direct || self.batches.is_some());
        let (low, high) = keys.map_or((0, Some(0)), Iterator::size_hint);
        (
            low.saturating_add(buffered),
            high.and_then(|h| h.checked_add(buffered)),
        )
    }
}

impl<I: std::iter::FusedIterator> std::iter::FusedIterator for ContainsEach<'_, I> where I::Item: Key
{}
