//! [`Coalesced`]: a wrapper shared by many tasks and threads, whose single-key calls are
//! gathered into batches (group commit), with `async` forms for services.
//!
//! A service answers one record per request, and a wrapper's single-key
//! [`insert`](crate::FilteredStore::insert) is one store transaction (one flush of the
//! store's log, one filter round trip): a thousand concurrent requests would make a
//! thousand commits, one after the other. [`Coalesced`] queues each caller's key, and a few
//! worker threads take whatever has queued while they were busy as one batch
//! ([`Batched::insert_batch`], [`Batched::contains_batch`]): one transaction for many
//! callers, each of whom still gets its own answer.
//!
//! The trust logic is the wrapper's, unchanged: the workers call its blocking batch
//! operations (the same code the blocking API runs), so a caller is answered only once its
//! key's bits are set and the transaction holding it has committed, exactly as
//! [`FilteredStore::insert_all`] promises. What this adds:
//!
//! - **Each caller its own answer.** A key inserted twice in one batch is new for one
//!   caller only. A batch that fails fails each of its callers, with the one shared error
//!   ([`CoalescedError::Batch`]); a key the encoding refuses fails its caller alone, before
//!   it is queued.
//! - **Cancellation is safe.** A future dropped before its key is queued asked nothing; one
//!   dropped after leaves the batch to run as if it were there, so a committed key always
//!   has its bits, and the others' answers are untouched.
//! - **Bounded.** At most [`Options::max_queued`] keys wait (callers beyond wait for room,
//!   tasks without blocking their thread), batches hold at most [`Options::max_batch`], and
//!   [`Options::workers`] threads call the wrapper, [`Coalesced::run`]'s calls included (so a
//!   store's pool needs no more connections than that).
//! - **Any runtime.** The futures need no particular executor (tokio, async-std, smol, a
//!   `block_on`); nothing blocks the task that awaits them. The workers are plain threads,
//!   where a blocking client (the `postgres` crate's) runs as it should.
//! - **Threads too.** [`Coalesced::insert_blocking`] and [`Coalesced::contains_blocking`]
//!   queue into the same batches from plain threads.
//!
//! ```
//! use bloom_store::{Coalesced, FilterOptions, FilteredStore, Lookup, SqliteStore};
//!
//! # let dir = tempfile::tempdir()?;
//! # let path = dir.path().join("seen.db");
//! let store = SqliteStore::open(&path)?;
//! let (seen, _) = FilteredStore::open_and_recover(store, FilterOptions::new(10_000, 0.01))?;
//! let seen = Coalesced::new(seen)?;                         // cheap to clone, Send + Sync
//!
//! let runtime = tokio::runtime::Builder::new_multi_thread().build()?;
//! runtime.block_on(async {
//!     let tasks: Vec<_> = (0..100)
//!         .map(|i| {
//!             let seen = seen.clone();
//!             tokio::spawn(async move { seen.insert(&format!("record-{i}")).await })
//!         })
//!         .collect();
//!     for task in tasks {
//!         assert!(task.await??);                            // new: committed, bits set
//!     }
//!     assert_eq!(seen.contains("record-7").await?, Lookup::Present);
//!     // Anything else runs on a worker, off the runtime's threads.
//!     let metrics = seen.run(|s| s.metrics()).await?;
//!     assert_eq!(metrics.queries, 1);
//!     Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
//! })
//! .map_err(|e| e as Box<dyn std::error::Error>)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod queue;
mod reply;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bloom_core::{EncodedKey, Key, KeyEncoding, KeyError};

use crate::{FilteredStore, Lookup, PrimaryStore, StoreError};
use queue::{Job, Shared, Submit};

/// A wrapper whose keys can be looked up and inserted a batch at a time: what
/// [`Coalesced`] drives. Implemented by [`FilteredStore`] and by bloom-redis's
/// `SharedFilteredStore`.
pub trait Batched: Send + Sync + 'static {
    /// The wrapper's error.
    type Error: std::error::Error + Send + Sync + 'static;

    /// The encoding keys are given in (each caller's key is encoded before it is queued).
    fn encoding(&self) -> KeyEncoding;

    /// Inserts every key (already encoded), answering in order whether each was new, as
    /// `insert_all` does: an answer only once the keys' bits are set and their commit done.
    ///
    /// # Errors
    /// The wrapper's, for the whole batch.
    fn insert_batch(&self, keys: &[EncodedKey<'_>]) -> Result<Vec<bool>, Self::Error>;

    /// Looks up every key (already encoded), in order, as `contains_each` does.
    ///
    /// # Errors
    /// The wrapper's, for the whole batch.
    fn contains_batch(&self, keys: &[EncodedKey<'_>]) -> Result<Vec<Lookup>, Self::Error>;
}

impl<S> Batched for FilteredStore<S>
where
    S: PrimaryStore + Send + Sync + 'static,
    S::Error: Send + Sync + 'static,
{
    type Error = StoreError<S::Error>;

    fn encoding(&self) -> KeyEncoding {
        self.options().encoding
    }

    fn insert_batch(&self, keys: &[EncodedKey<'_>]) -> Result<Vec<bool>, Self::Error> {
        self.insert_all(keys)
    }

    fn contains_batch(&self, keys: &[EncodedKey<'_>]) -> Result<Vec<Lookup>, Self::Error> {
        self.contains_each(keys)
    }
}

/// A single-key job's constructor (`Job::Insert`, `Job::Contains`).
type KeyJob<T, R> = fn(Vec<u8>, queue::KeyAnswer<R, <T as Batched>::Error>) -> Job<T>;

/// One of [`Batched`]'s batch operations.
type BatchFn<T, R> = fn(&T, &[EncodedKey<'_>]) -> Result<Vec<R>, <T as Batched>::Error>;

/// How a [`Coalesced`] batches.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Options {
    /// Worker threads calling the wrapper (default 4): while one commits a batch, the next
    /// gathers what queued meanwhile.
    pub workers: usize,
    /// The most keys in one batch (default 1,000).
    pub max_batch: usize,
    /// The most calls waiting (default 65,536); callers beyond wait for room.
    pub max_queued: usize,
    /// How long a worker that found fewer than `max_batch` keys waits for more before it
    /// starts (default zero: batches form from what queues while the workers are busy, so
    /// an idle service answers at once and a busy one in large batches).
    pub linger: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            workers: 4,
            max_batch: 1_000,
            max_queued: 65_536,
            linger: Duration::ZERO,
        }
    }
}

impl Options {
    /// `workers` worker threads.
    #[must_use]
    pub fn workers(mut self, workers: usize) -> Self {
        self.workers = workers;
        self
    }

    /// Batches of at most `max_batch` keys.
    #[must_use]
    pub fn max_batch(mut self, max_batch: usize) -> Self {
        self.max_batch = max_batch;
        self
    }

    /// At most `max_queued` calls waiting.
    #[must_use]
    pub fn max_queued(mut self, max_queued: usize) -> Self {
        self.max_queued = max_queued;
        self
    }

    /// Workers wait up to `linger` for a fuller batch.
    #[must_use]
    pub fn linger(mut self, linger: Duration) -> Self {
        self.linger = linger;
        self
    }
}

/// Why a call through a [`Coalesced`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CoalescedError<E: std::error::Error + 'static> {
    /// The caller's key was refused by the wrapper's encoding; it was not queued.
    #[error(transparent)]
    Key(#[from] KeyError),
    /// The batch holding the caller's key failed, for every caller in it (the wrapper's own
    /// guarantee holds: a key is committed only with its bits). Retry as the error says.
    #[error(transparent)]
    Batch(Arc<E>),
    /// The wrapper answered a batch with fewer answers than keys: nobody in it is answered
    /// (never "absent" without an answer).
    #[error("the wrapper answered {answered} of {asked} keys in a batch; retry")]
    Short {
        /// Keys in the batch.
        asked: usize,
        /// Answers given.
        answered: usize,
    },
    /// The worker stopped before it answered: the call panicked, or no worker is left
    /// (see [`Coalesced::new_with`]). For an insert, the key may have been committed, with
    /// its bits: insert it again to know.
    #[error(
        "the worker stopped before answering (a panic in the wrapper, or no worker left); for an insert, the key may be committed: insert it again to know"
    )]
    Stopped,
    /// A worker thread could not be started.
    #[error("could not start the coalescing workers: {0}")]
    Start(String),
}

impl<E: std::error::Error + 'static> Clone for CoalescedError<E> {
    fn clone(&self) -> Self {
        match self {
            Self::Key(e) => Self::Key(e.clone()),
            Self::Batch(e) => Self::Batch(Arc::clone(e)),
            Self::Short { asked, answered } => Self::Short {
                asked: *asked,
                answered: *answered,
            },
            Self::Stopped => Self::Stopped,
            Self::Start(why) => Self::Start(why.clone()),
        }
    }
}

/// Closes the queue when the last handle goes: the workers finish what is queued, then stop
/// (and the last one drops the wrapper, on its own thread).
struct Handle<T: Batched> {
    shared: Arc<Shared<T>>,
}

impl<T: Batched> Drop for Handle<T> {
    fn drop(&mut self) {
        self.shared.close();
    }
}

/// A wrapper shared by many tasks and threads, its single-key calls gathered into batches:
/// see the [module documentation](self). Cloning is cheap (one reference count).
pub struct Coalesced<T: Batched> {
    handle: Arc<Handle<T>>,
}

impl<T: Batched> Clone for Coalesced<T> {
    fn clone(&self) -> Self {
        Self {
            handle: Arc::clone(&self.handle),
        }
    }
}

impl<T: Batched + std::fmt::Debug> std::fmt::Debug for Coalesced<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Coalesced")
            .field("wrapper", &self.handle.shared.value)
            .field("options", &self.handle.shared.options)
            .finish()
    }
}

impl<T: Batched> Coalesced<T> {
    /// `wrapper` behind workers with the default [`Options`].
    ///
    /// # Errors
    /// [`CoalescedError::Start`] when a worker thread cannot be started.
    pub fn new(wrapper: T) -> Result<Self, CoalescedError<T::Error>> {
        Self::new_with(wrapper, Options::default())
    }

    /// `wrapper` behind workers with `options` (zero workers, batch size or queue are taken
    /// as one).
    ///
    /// # Errors
    /// As [`Coalesced::new`].
    pub fn new_with(wrapper: T, mut options: Options) -> Result<Self, CoalescedError<T::Error>> {
        options.workers = options.workers.max(1);
        options.max_batch = options.max_batch.max(1);
        options.max_queued = options.max_queued.max(1);
        let shared = Arc::new(Shared::new(wrapper, options));
        let handle = Arc::new(Handle {
            shared: Arc::clone(&shared),
        });
        for i in 0..shared.options.workers {
            let worker = Arc::clone(&shared);
            std::thread::Builder::new()
                .name(format!("bloom coalesce {i}"))
                .spawn(move || queue::work(&worker))
                .map_err(|e| CoalescedError::Start(e.to_string()))?;
        }
        Ok(Self { handle })
    }

    /// Opens a wrapper with `open` on a thread of its own (opening reads the store, may
    /// wait out a grace period, and must not block an async runtime's thread), then puts it
    /// behind workers with `options`. Returns what the opening returned beside the wrapper.
    ///
    /// # Errors
    /// [`OpenError::Open`] with `open`'s error, or [`OpenError::Coalesced`] when the opening
    /// panicked or no thread could be started.
    pub async fn open<O, E, F>(
        open: F,
        options: Options,
    ) -> Result<(Self, O), OpenError<T::Error, E>>
    where
        F: FnOnce() -> Result<(T, O), E> + Send + 'static,
        O: Send + 'static,
        E: std::error::Error + Send + 'static,
    {
        let (wrapper, outcome) = match unblock(open).await {
            Some(Ok(opened)) => opened,
            Some(Err(e)) => return Err(OpenError::Open(e)),
            None => return Err(OpenError::Coalesced(CoalescedError::Stopped)),
        };
        let coalesced = Self::new_with(wrapper, options).map_err(OpenError::Coalesced)?;
        Ok((coalesced, outcome))
    }

    /// Calls queued and not yet taken by a worker.
    #[must_use]
    pub fn queued(&self) -> usize {
        self.handle.shared.queued()
    }

    /// The wrapper, for calls that do not touch the store (or for blocking calls from a
    /// thread of the caller's own).
    #[must_use]
    pub fn get(&self) -> &T {
        &self.handle.shared.value
    }

    /// The options the workers run with.
    #[must_use]
    pub fn options(&self) -> &Options {
        &self.handle.shared.options
    }

    fn encode<K: Key + ?Sized>(&self, key: &K) -> Result<Vec<u8>, KeyError> {
        Ok(key
            .encode_checked(self.get().encoding())?
            .as_bytes()
            .to_vec())
    }

    /// A single-key call: its job queued by the future, or (a key the encoding refused)
    /// the future answered at once.
    fn key_call<R>(
        &self,
        key: Result<Vec<u8>, KeyError>,
        job: KeyJob<T, R>,
    ) -> Submit<T, Result<R, CoalescedError<T::Error>>> {
        self.submit(key.map(|key| move |answer| job(key, answer)))
    }

    /// The job `make` builds around the caller's answer, to be queued; or, for a key the
    /// encoding refused, no job and the refusal answered at once.
    fn submit<R>(
        &self,
        make: Result<impl FnOnce(queue::KeyAnswer<R, T::Error>) -> Job<T>, KeyError>,
    ) -> Submit<T, Result<R, CoalescedError<T::Error>>> {
        let (answer, reply) = reply::pair(Err(CoalescedError::Stopped));
        let job = match make {
            Ok(make) => Some(make(answer)),
            Err(e) => {
                answer.send(Err(e.into()));
                None
            }
        };
        Submit {
            handle: Arc::clone(&self.handle),
            job,
            reply,
        }
    }

    /// Inserts a key (text, bytes or encoded: see [`Key`]) in the next batch; answers
    /// whether it was new, once its bits are set and its commit is done. The future owns
    /// what it needs (`'static`): spawn it or await it.
    ///
    /// # Errors
    /// [`CoalescedError::Key`] for a key the encoding refuses; [`CoalescedError::Batch`]
    /// when the batch fails: the wrapper's error says whether the key was committed all the
    /// same (bloom-redis's `SharedError::is_committed`), and inserting it again is safe
    /// either way.
    pub fn insert<K: Key + ?Sized>(
        &self,
        key: &K,
    ) -> impl Future<Output = Result<bool, CoalescedError<T::Error>>> + Send + 'static + use<T, K>
    where
        T::Error: Send,
    {
        self.key_call(self.encode(key), Job::Insert)
    }

    /// Looks up a key in the next batch.
    ///
    /// # Errors
    /// As [`Coalesced::insert`].
    pub fn contains<K: Key + ?Sized>(
        &self,
        key: &K,
    ) -> impl Future<Output = Result<Lookup, CoalescedError<T::Error>>> + Send + 'static + use<T, K>
    {
        self.key_call(self.encode(key), Job::Contains)
    }

    /// A batch of the caller's own on a worker (`run` over [`Batched::insert_batch`] or
    /// [`Batched::contains_batch`]), its keys encoded first (a refused key fails it before
    /// anything is queued).
    fn own_batch<R: Send + 'static>(
        &self,
        keys: Result<Vec<Vec<u8>>, KeyError>,
        call: BatchFn<T, R>,
    ) -> Submit<T, Result<Vec<R>, CoalescedError<T::Error>>> {
        self.submit(keys.map(|keys| {
            move |answer: queue::KeyAnswer<Vec<R>, T::Error>| {
                Job::Run(Box::new(move |wrapper: &T| {
                    let encoded: Vec<EncodedKey<'_>> =
                        keys.iter().map(|k| EncodedKey::from_encoded(k)).collect();
                    let answered = call(wrapper, &encoded);
                    answer.send(match answered {
                        Ok(answers) if answers.len() == encoded.len() => Ok(answers),
                        Ok(answers) => Err(CoalescedError::Short {
                            asked: encoded.len(),
                            answered: answers.len(),
                        }),
                        Err(e) => Err(CoalescedError::Batch(Arc::new(e))),
                    });
                }) as Box<dyn FnOnce(&T) + Send>)
            }
        }))
    }

    /// Inserts every key as one batch of its own (one transaction: the wrapper's
    /// `insert_all`, with its all-or-nothing promise), on a worker; answers in key order
    /// whether each was new.
    ///
    /// # Errors
    /// [`CoalescedError::Key`] for a key the encoding refuses (nothing is inserted);
    /// [`CoalescedError::Batch`] when the batch fails.
    pub fn insert_all<I>(
        &self,
        keys: I,
    ) -> impl Future<Output = Result<Vec<bool>, CoalescedError<T::Error>>> + Send + 'static + use<T, I>
    where
        I: IntoIterator,
        I::Item: Key,
    {
        let encoded = keys.into_iter().map(|k| self.encode(&k)).collect();
        self.own_batch(encoded, T::insert_batch)
    }

    /// Looks up every key as one batch of its own, on a worker: the wrapper's
    /// `contains_each`.
    ///
    /// # Errors
    /// As [`Coalesced::insert_all`].
    pub fn contains_each<I>(
        &self,
        keys: I,
    ) -> impl Future<Output = Result<Vec<Lookup>, CoalescedError<T::Error>>> + Send + 'static + use<T, I>
    where
        I: IntoIterator,
        I::Item: Key,
    {
        let encoded = keys.into_iter().map(|k| self.encode(&k)).collect();
        self.own_batch(encoded, T::contains_batch)
    }

    /// [`Coalesced::insert`] from a plain thread: queued into the same batches, blocking the
    /// thread until answered (never call it on an async runtime's thread).
    ///
    /// # Errors
    /// As [`Coalesced::insert`].
    pub fn insert_blocking<K: Key + ?Sized>(
        &self,
        key: &K,
    ) -> Result<bool, CoalescedError<T::Error>> {
        self.key_call(self.encode(key), Job::Insert).wait()
    }

    /// [`Coalesced::contains`] from a plain thread.
    ///
    /// # Errors
    /// As [`Coalesced::insert`].
    pub fn contains_blocking<K: Key + ?Sized>(
        &self,
        key: &K,
    ) -> Result<Lookup, CoalescedError<T::Error>> {
        self.key_call(self.encode(key), Job::Contains).wait()
    }

    /// Runs `call` with the wrapper on a worker, alone (not batched with others' keys):
    /// every other operation from async code (`remove`, `rebuild`, `metrics`, the store's
    /// own calls). Dropped before it runs, `call` still
    /// runs; its result is let go.
    ///
    /// # Errors
    /// [`CoalescedError::Stopped`] when `call` panicked.
    pub fn run<R, F>(
        &self,
        call: F,
    ) -> impl Future<Output = Result<R, CoalescedError<T::Error>>> + Send + 'static + use<T, R, F>
    where
        R: Send + 'static,
        F: FnOnce(&T) -> R + Send + 'static,
    {
        let (answer, reply) = reply::pair(Err(CoalescedError::Stopped));
        Submit {
            handle: Arc::clone(&self.handle),
            job: Some(Job::Run(Box::new(move |wrapper: &T| {
                answer.send(Ok(call(wrapper)));
            }))),
            reply,
        }
    }
}

/// Any blocking value (bloom-redis's `RedisFilter`, bloom-postgres's `PostgresStore`, a
/// wrapper) used from async code: each [`Offloaded::run`] runs on one of a bounded set of
/// worker threads, never on the runtime's, and is awaited without blocking. What
/// [`Coalesced`] is without the batching of single keys. Cloning is cheap.
///
/// ```
/// use bloom_store::coalesce::{Offloaded, Options};
///
/// let counter = Offloaded::new(std::sync::atomic::AtomicU64::new(0), Options::default())?;
/// let runtime = tokio::runtime::Builder::new_current_thread().build()?;
/// let before = runtime.block_on(counter.run(|c| c.fetch_add(1, std::sync::atomic::Ordering::SeqCst)))?;
/// assert_eq!(before, 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Offloaded<T: Send + Sync + 'static> {
    inner: Coalesced<RunOnly<T>>,
}

impl<T: Send + Sync + 'static> Clone for Offloaded<T> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

impl<T: Send + Sync + 'static + std::fmt::Debug> std::fmt::Debug for Offloaded<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Offloaded")
            .field("value", &self.inner.get().0)
            .field("workers", &self.inner.options().workers)
            .finish()
    }
}

/// A value with no batches of its own: only runs are ever queued for it.
struct RunOnly<T>(T);

impl<T: Send + Sync + 'static> Batched for RunOnly<T> {
    type Error = std::convert::Infallible;

    fn encoding(&self) -> KeyEncoding {
        KeyEncoding::Bytes
    }

    fn insert_batch(&self, _: &[EncodedKey<'_>]) -> Result<Vec<bool>, Self::Error> {
        Ok(Vec::new())
    }

    fn contains_batch(&self, _: &[EncodedKey<'_>]) -> Result<Vec<Lookup>, Self::Error> {
        Ok(Vec::new())
    }
}

impl<T: Send + Sync + 'static> Offloaded<T> {
    /// `value` behind `options.workers` worker threads (the batch options do not apply).
    ///
    /// # Errors
    /// [`CoalescedError::Start`] when a worker thread cannot be started.
    pub fn new(
        value: T,
        options: Options,
    ) -> Result<Self, CoalescedError<std::convert::Infallible>> {
        Ok(Self {
            inner: Coalesced::new_with(RunOnly(value), options)?,
        })
    }

    /// The value, for calls that do not block.
    #[must_use]
    pub fn get(&self) -> &T {
        &self.inner.get().0
    }

    /// Runs `call` with the value on a worker. Dropped before it runs, `call` still runs; its
    /// result is let go.
    ///
    /// # Errors
    /// [`CoalescedError::Stopped`] when `call` panicked.
    pub fn run<R, F>(
        &self,
        call: F,
    ) -> impl Future<Output = Result<R, CoalescedError<std::convert::Infallible>>>
    + Send
    + 'static
    + use<T, R, F>
    where
        R: Send + 'static,
        F: FnOnce(&T) -> R + Send + 'static,
    {
        self.inner.run(move |value| call(&value.0))
    }
}

/// Why [`Coalesced::open`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError<E: std::error::Error + 'static, O: std::error::Error + 'static> {
    /// The opening failed.
    #[error(transparent)]
    Open(O),
    /// The workers could not be started (or the opening panicked: `Stopped`).
    #[error(transparent)]
    Coalesced(CoalescedError<E>),
}

/// Runs `f` on a thread of its own and awaits its result (`None` if it panicked or no thread
/// could be started): for rare, long calls such as opening a wrapper.
pub fn unblock<R: Send + 'static>(
    f: impl FnOnce() -> R + Send + 'static,
) -> impl Future<Output = Option<R>> + Send + 'static {
    let (answer, reply) = reply::pair(None);
    let started = std::thread::Builder::new()
        .name("bloom unblock".into())
        .spawn(move || answer.send(Some(f())));
    // A thread that could not be started dropped the answer unsent: `None`.
    drop(started);
    reply
}
