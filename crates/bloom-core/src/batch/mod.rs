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
//! many-key calls hash and probe each key in one step, in a loop of their own (a plain
//! filter's compiled with its kernel, `Kernel::compiled`), and a plain filter's
//! `contains_each` takes its answers [`AHEAD_KEYS`] at a time.

use std::sync::atomic::AtomicU64;

use crate::encoding::{EncodedKey, KeyEncoding};
use crate::kernel::{Compiled, Insert, Kernel};
use crate::key::{self, Key, Takes};
use crate::position::{KeyHash, PositionHasher};
use crate::probe::{self, BitsRef};

mod contains_each;

pub use self::contains_each::ContainsEach;

/// Keys hashed before any of their bits is touched.
pub(crate) const BATCH_KEYS: usize = 16;

/// Answers `contains_each` takes at a time in cache, in one loop (`contains_each.rs`):
/// enough that the loop's setup is a small share of each key's work. A power of two, which
/// lets `next` index the answers with no bounds check. Read through `next` into a `Vec`
/// (as `extend` does) against one `contains` a key collected alike, 24-byte keys, 10^5-key
/// filter: 1.05x at 64, 1.02x at 256.
const AHEAD_KEYS: usize = 256;

const _: () = assert!(AHEAD_KEYS.is_power_of_two());

/// The most answers `ContainsEach::collect` makes room for at a time in cache (1 MiB of
/// them), however many the keys say they are.
const COLLECT_KEYS: usize = 1 << 20;

/// Bit arrays up to this size stay close enough to the CPU (its L2 and the part of its L3 a
/// filter gets) that one key at a time keeps its few misses overlapped, and batching only
/// adds bookkeeping. Many-key calls on them hash and probe each key in one step; the answers
/// are the same either way. Measured on an AMD EPYC (512 KiB L2, 32 MiB L3), batched against one at
/// a time, `contains_each` / `insert_all`: 5 MB 1.2-1.4x / 1.1-1.3x, 10 MB 1.04-1.2x /
/// 1.0x, 12.6 MB 0.83x / 0.77x, 19 MB 0.5-0.73x / 0.47-0.65x, 37 MB 0.45x / 0.42x.
const CACHED_BYTES: usize = 10 << 20;

/// Whether many-key calls on `words` words hash and probe each key in one step.
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
        // A batch stops short at a refused key or at the keys' end: nothing is read past
        // either.
        if taken < BATCH_KEYS || refused.is_some() {
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
