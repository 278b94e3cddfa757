//! The bounded queue between callers and workers, and what a worker does with it: single
//! keys gathered into one batch (up to the batch size, after the linger), or one call run
//! alone.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use bloom_core::EncodedKey;

use super::reply::{Answer, Reply};
use super::{Batched, CoalescedError, Handle, Options};
use crate::Lookup;

/// The answer of one caller's single-key call.
pub(super) type KeyAnswer<R, E> = Answer<Result<R, CoalescedError<E>>>;

/// What one caller asked.
pub(super) enum Job<T: Batched> {
    Insert(Vec<u8>, KeyAnswer<bool, T::Error>),
    Contains(Vec<u8>, KeyAnswer<Lookup, T::Error>),
    /// Any call, run alone on a worker (it answers through its own reply).
    Run(Box<dyn FnOnce(&T) + Send>),
}

struct State<T: Batched> {
    jobs: VecDeque<Job<T>>,
    /// No handle is left: the workers finish what is queued, then stop.
    closed: bool,
    /// Tasks waiting for room in the queue.
    waiting: Vec<Waker>,
    /// Workers waiting for a job (only then is `work` signalled: a signal is a system call).
    idle: usize,
}

/// The value the workers call, and the queue that feeds them.
pub(super) struct Shared<T: Batched> {
    pub(super) value: T,
    state: Mutex<State<T>>,
    /// Signalled when a job is queued or the queue closes.
    work: Condvar,
    /// Signalled when room is made in the queue (for blocked threads).
    room: Condvar,
    pub(super) options: Options,
}

impl<T: Batched> Shared<T> {
    pub(super) fn new(value: T, options: Options) -> Self {
        Self {
            value,
            state: Mutex::new(State {
                jobs: VecDeque::new(),
                closed: false,
                waiting: Vec::new(),
                idle: 0,
            }),
            work: Condvar::new(),
            room: Condvar::new(),
            options,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Calls queued and not yet taken.
    pub(super) fn queued(&self) -> usize {
        self.lock().jobs.len()
    }

    /// Queues `job` if there is room (or gives it back).
    /// (A closed queue takes no job: dropped, it answers that no worker is left.)
    fn try_push(&self, job: Job<T>, waker: Option<&Waker>) -> Result<(), Job<T>> {
        let mut state = self.lock();
        if state.closed {
            drop(state);
            drop(job);
            return Ok(());
        }
        if state.jobs.len() >= self.options.max_queued {
            if let Some(waker) = waker
                && !state.waiting.iter().any(|w| w.will_wake(waker))
            {
                state.waiting.push(waker.clone());
            }
            return Err(job);
        }
        state.jobs.push_back(job);
        let idle = state.idle > 0;
        drop(state);
        if idle {
            self.work.notify_one();
        }
        Ok(())
    }

    /// Queues `job`, blocking the thread while the queue is full.
    pub(super) fn push_blocking(&self, job: Job<T>) {
        let mut state = self.lock();
        while state.jobs.len() >= self.options.max_queued && !state.closed {
            state = self
                .room
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        if state.closed {
            return; // The job is dropped: no worker is left.
        }
        state.jobs.push_back(job);
        let idle = state.idle > 0;
        drop(state);
        if idle {
            self.work.notify_one();
        }
    }

    /// Closes the queue: the workers stop once it is empty.
    pub(super) fn close(&self) {
        self.lock().closed = true;
        self.work.notify_all();
    }

    /// The next jobs for a worker: one run, or up to a batch of keys (waiting up to the
    /// linger for a fuller batch); `None` once closed and empty.
    fn next(&self) -> Option<Vec<Job<T>>> {
        let mut state = self.lock();
        loop {
            if !state.jobs.is_empty() {
                break;
            }
            if state.closed {
                return None;
            }
            state.idle += 1;
            state = self
                .work
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
            state.idle -= 1;
        }
        if matches!(state.jobs.front(), Some(Job::Run(_))) {
            let run = state.jobs.pop_front().into_iter().collect();
            self.made_room(state);
            return Some(run);
        }
        let linger = self.options.linger;
        if !linger.is_zero()
            && let Some(until) = Instant::now().checked_add(linger)
        {
            while keys_queued(&state.jobs) < self.options.max_batch
                && state.jobs.len() < self.options.max_queued
                && !state.closed
            {
                let Some(left) = until.checked_duration_since(Instant::now()) else {
                    break;
                };
                state.idle += 1;
                state = self
                    .work
                    .wait_timeout(state, left)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
                state.idle -= 1;
            }
        }
        let mut batch = Vec::new();
        while batch.len() < self.options.max_batch {
            match state.jobs.front() {
                Some(Job::Insert(..) | Job::Contains(..)) => {
                    batch.extend(state.jobs.pop_front());
                }
                _ => break,
            }
        }
        self.made_room(state);
        Some(batch)
    }

    fn made_room(&self, mut state: MutexGuard<'_, State<T>>) {
        // Every waiting task: one that was dropped meanwhile takes no room, and the others
        // must not sleep through it.
        let waiting = std::mem::take(&mut state.waiting);
        let more = !state.jobs.is_empty() && state.idle > 0;
        drop(state);
        self.room.notify_all();
        for waker in waiting {
            waker.wake();
        }
        if more {
            // Another worker takes the rest while this one works.
            self.work.notify_one();
        }
    }
}

/// Single-key jobs at the front of the queue.
fn keys_queued<T: Batched>(jobs: &VecDeque<Job<T>>) -> usize {
    jobs.iter()
        .take_while(|job| !matches!(job, Job::Run(_)))
        .count()
}

/// Closes the queue if a worker ends by a panic (a bug: batches and runs are caught): the
/// jobs left are dropped, so that each caller is answered `Stopped` instead of waiting.
struct Unwinding<'a, T: Batched>(&'a Shared<T>);

impl<T: Batched> Drop for Unwinding<'_, T> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let mut state = self.0.lock();
            state.closed = true;
            let jobs = std::mem::take(&mut state.jobs);
            let waiting = std::mem::take(&mut state.waiting);
            drop(state);
            drop(jobs);
            self.0.work.notify_all();
            self.0.room.notify_all();
            for waker in waiting {
                waker.wake();
            }
        }
    }
}

/// A worker: takes jobs until the queue closes and empties.
pub(super) fn work<T: Batched>(shared: &Shared<T>) {
    let _unwinding = Unwinding(shared);
    while let Some(jobs) = shared.next() {
        let mut inserts = Vec::new();
        let mut lookups = Vec::new();
        for job in jobs {
            match job {
                Job::Run(run) => {
                    // A panic is the caller's: its reply is dropped unsent (and says so).
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        run(&shared.value);
                    }));
                }
                Job::Insert(key, answer) => inserts.push((key, answer)),
                Job::Contains(key, answer) => lookups.push((key, answer)),
            }
        }
        if !inserts.is_empty() {
            answer_all(inserts, |keys| shared.value.insert_batch(keys));
        }
        if !lookups.is_empty() {
            answer_all(lookups, |keys| shared.value.contains_batch(keys));
        }
    }
}

/// Runs one batch and gives each caller its answer, or every caller the batch's error.
fn answer_all<R, E: std::error::Error>(
    jobs: Vec<(Vec<u8>, KeyAnswer<R, E>)>,
    run: impl FnOnce(&[EncodedKey<'_>]) -> Result<Vec<R>, E>,
) {
    let keys: Vec<EncodedKey<'_>> = jobs
        .iter()
        .map(|(key, _)| EncodedKey::from_encoded(key))
        .collect();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(&keys)));
    drop(keys);
    match result {
        Ok(Ok(answers)) if answers.len() == jobs.len() => {
            for ((_, answer), value) in jobs.into_iter().zip(answers) {
                answer.send(Ok(value));
            }
        }
        Ok(Ok(answers)) => {
            let short = CoalescedError::Short {
                asked: jobs.len(),
                answered: answers.len(),
            };
            for (_, answer) in jobs {
                answer.send(Err(short.clone()));
            }
        }
        Ok(Err(e)) => {
            let e = Arc::new(e);
            for (_, answer) in jobs {
                answer.send(Err(CoalescedError::Batch(Arc::clone(&e))));
            }
        }
        // Dropped unsent: each caller is told the worker panicked.
        Err(_) => drop(jobs),
    }
}

/// Queues a job from async code: waits (without blocking the thread) while the queue is
/// full, then awaits the answer. Dropped before the job is queued, nothing was asked;
/// dropped after, the job runs all the same and its answer is let go.
pub(super) struct Submit<T: Batched, R> {
    /// A handle, so that the workers stay until the job is queued.
    pub(super) handle: Arc<Handle<T>>,
    pub(super) job: Option<Job<T>>,
    pub(super) reply: Reply<R>,
}

impl<T: Batched, R> Future for Submit<T, R> {
    type Output = R;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<R> {
        let this = self.get_mut();
        if let Some(job) = this.job.take()
            && let Err(job) = this.handle.shared.try_push(job, Some(cx.waker()))
        {
            this.job = Some(job);
            return Poll::Pending;
        }
        Pin::new(&mut this.reply).poll(cx)
    }
}

impl<T: Batched, R> Submit<T, R> {
    /// The call from a plain thread: its job queued (blocking while the queue is full), then
    /// its answer waited for.
    pub(super) fn wait(mut self) -> R {
        if let Some(job) = self.job.take() {
            self.handle.shared.push_blocking(job);
        }
        self.reply.wait()
    }
}

impl<T: Batched, R> Unpin for Submit<T, R> {}
