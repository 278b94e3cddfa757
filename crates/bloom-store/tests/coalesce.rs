//! `Coalesced`: single keys from many tasks and threads gathered into batches, each caller
//! answered for its own key, failures and cancellations confined to what they touch.
//! Batches are made deterministic by holding the worker at a gate until the test has queued
//! what it needs (`Coalesced::queued`), never by timing.

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::task::{Context, Waker};

use bloom_core::{EncodedKey, KeyEncoding};
use bloom_store::coalesce::Options;
use bloom_store::{
    Batched, Coalesced, CoalescedError, FilterOptions, FilteredStore, Lookup, MemoryStore,
    MemoryStoreError, PrimaryStore, StoreError,
};

/// A wrapper whose batches can be held at a gate, counted, and made to fail.
struct Gated {
    inner: FilteredStore<MemoryStore>,
    /// Batches wait while it is closed.
    gate: (Mutex<bool>, Condvar),
    /// Batches started (inserts and lookups).
    batches: AtomicUsize,
    /// Sizes of the insert batches.
    sizes: Mutex<Vec<usize>>,
}

#[derive(Debug, thiserror::Error)]
enum GatedError {
    #[error(transparent)]
    Store(#[from] StoreError<MemoryStoreError>),
    #[error("the batch held a poisoned key")]
    Poisoned,
}

impl Gated {
    fn new(closed: bool) -> Self {
        let (inner, _) =
            FilteredStore::open_and_recover(MemoryStore::new(), FilterOptions::new(10_000, 0.01))
                .unwrap();
        Self {
            inner,
            gate: (Mutex::new(closed), Condvar::new()),
            batches: AtomicUsize::new(0),
            sizes: Mutex::new(Vec::new()),
        }
    }

    fn open_gate(&self) {
        *self.gate.0.lock().unwrap() = false;
        self.gate.1.notify_all();
    }

    fn pass(&self) {
        self.batches.fetch_add(1, Ordering::SeqCst);
        let mut closed = self.gate.0.lock().unwrap();
        while *closed {
            closed = self.gate.1.wait(closed).unwrap();
        }
    }
}

impl Batched for Gated {
    type Error = GatedError;

    fn encoding(&self) -> KeyEncoding {
        Batched::encoding(&self.inner)
    }

    fn insert_batch(&self, keys: &[EncodedKey<'_>]) -> Result<Vec<bool>, GatedError> {
        self.pass();
        self.sizes.lock().unwrap().push(keys.len());
        if keys.iter().any(|k| k.as_bytes() == b"poison") {
            return Err(GatedError::Poisoned);
        }
        Ok(self.inner.insert_batch(keys)?)
    }

    fn contains_batch(&self, keys: &[EncodedKey<'_>]) -> Result<Vec<Lookup>, GatedError> {
        self.pass();
        Ok(self.inner.contains_batch(keys)?)
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap()
}

/// Waits (the thread) until `n` calls are queued: the worker is held at the gate.
fn until_queued<T: Batched>(coalesced: &Coalesced<T>, n: usize) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while coalesced.queued() < n {
        assert!(std::time::Instant::now() < deadline, "never queued {n}");
        std::thread::yield_now();
    }
}

/// Waits (the thread) until the worker holds a batch at the gate.
fn until_at_gate(coalesced: &Coalesced<Gated>) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while coalesced.get().batches.load(Ordering::SeqCst) == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "no batch reached the gate"
        );
        std::thread::yield_now();
    }
}

fn one_worker() -> Options {
    Options::default().workers(1)
}

#[test]
fn a_thousand_tasks_share_one_batch_and_each_gets_its_own_answer() {
    let runtime = runtime();
    let seen = Coalesced::new_with(Gated::new(true), one_worker()).unwrap();
    // The worker takes the first key and waits at the gate; the rest queue behind it.
    let mut tasks = vec![runtime.spawn(seen.insert("record-0"))];
    until_at_gate(&seen);
    tasks.extend((1..1_000).map(|i| runtime.spawn(seen.insert(&format!("record-{i}")))));
    until_queued(&seen, 999);
    seen.get().open_gate();
    for task in tasks {
        assert!(runtime.block_on(task).unwrap().unwrap());
    }
    assert_eq!(*seen.get().sizes.lock().unwrap(), [1, 999]);
    // Every key committed and answered present; a key never inserted is absent.
    for i in (0..1_000).step_by(97) {
        let key = format!("record-{i}");
        assert_eq!(
            runtime.block_on(seen.contains(&key)).unwrap(),
            Lookup::Present
        );
        assert!(seen.get().inner.store().contains(key.as_bytes()).unwrap());
    }
    assert!(
        !runtime
            .block_on(seen.contains("never"))
            .unwrap()
            .is_present()
    );
}

#[test]
fn a_key_twice_in_one_batch_is_new_for_one_caller() {
    let runtime = runtime();
    let seen = Coalesced::new_with(Gated::new(true), one_worker()).unwrap();
    let first = runtime.spawn(seen.insert("holder"));
    until_at_gate(&seen);
    let twice: Vec<_> = (0..10)
        .map(|_| runtime.spawn(seen.insert("same")))
        .collect();
    until_queued(&seen, 10);
    seen.get().open_gate();
    assert!(runtime.block_on(first).unwrap().unwrap());
    let new = twice
        .into_iter()
        .map(|t| runtime.block_on(t).unwrap().unwrap())
        .filter(|&new| new)
        .count();
    assert_eq!(new, 1);
}

#[test]
fn a_failed_batch_fails_exactly_its_callers() {
    let runtime = runtime();
    let seen = Coalesced::new_with(Gated::new(true), one_worker()).unwrap();
    let held = runtime.spawn(seen.insert("held"));
    until_at_gate(&seen);
    let doomed: Vec<_> = ["poison", "a", "b"]
        .iter()
        .map(|k| runtime.spawn(seen.insert(*k)))
        .collect();
    until_queued(&seen, 3);
    seen.get().open_gate();
    assert!(runtime.block_on(held).unwrap().unwrap());
    for task in doomed {
        let error = runtime.block_on(task).unwrap().unwrap_err();
        assert!(
            matches!(&error, CoalescedError::Batch(e) if matches!(**e, GatedError::Poisoned)),
            "{error:?}"
        );
    }
    // Nothing of the failed batch was committed; the next batch is unaffected.
    assert!(!seen.get().inner.store().contains(b"a").unwrap());
    assert!(runtime.block_on(seen.insert("a")).unwrap());
    assert_eq!(
        runtime.block_on(seen.contains("held")).unwrap(),
        Lookup::Present
    );
}

/// Futures dropped after their key was queued: the batch runs as if they were there, so
/// every key is committed with its bits, and the callers who stayed get their answers.
#[test]
fn dropped_futures_leave_their_keys_committed_with_bits() {
    let seen = Coalesced::new_with(Gated::new(true), one_worker()).unwrap();
    let runtime = runtime();
    let held = runtime.spawn(seen.insert("held"));
    until_at_gate(&seen);
    let mut context = Context::from_waker(Waker::noop());
    for i in 0..50 {
        let mut call = pin!(seen.insert(&format!("dropped-{i}")));
        assert!(call.as_mut().poll(&mut context).is_pending());
        // Dropped here, queued.
    }
    let kept = runtime.spawn(seen.insert("kept"));
    until_queued(&seen, 51);
    seen.get().open_gate();
    assert!(runtime.block_on(held).unwrap().unwrap());
    assert!(runtime.block_on(kept).unwrap().unwrap());
    for i in 0..50 {
        let key = format!("dropped-{i}");
        assert!(seen.get().inner.store().contains(key.as_bytes()).unwrap());
        // Its bits are set: the wrapper's own lookup says present, as does a new batch.
        assert_eq!(seen.get().inner.contains(&key).unwrap(), Lookup::Present);
        assert_eq!(
            runtime.block_on(seen.contains(&key)).unwrap(),
            Lookup::Present
        );
    }
}

#[test]
fn a_refused_key_fails_its_caller_alone_before_it_is_queued() {
    let runtime = runtime();
    let seen = Coalesced::new(Gated::new(false)).unwrap();
    assert_ne!(seen.get().encoding(), bloom_core::KeyEncoding::Bytes);
    let refused = runtime.block_on(seen.insert(&b"\xff\xfe"[..]));
    assert!(
        matches!(refused, Err(CoalescedError::Key(_))),
        "{refused:?}"
    );
    assert!(runtime.block_on(seen.insert("fine")).unwrap());
}

#[test]
fn threads_share_the_batches_of_tasks() {
    let seen = Coalesced::new_with(Gated::new(false), Options::default().workers(2)).unwrap();
    let runtime = runtime();
    std::thread::scope(|scope| {
        for t in 0..8 {
            let seen = &seen;
            scope.spawn(move || {
                for i in 0..100 {
                    assert!(seen.insert_blocking(&format!("t{t}-{i}")).unwrap());
                }
            });
        }
        let tasks: Vec<_> = (0..400)
            .map(|i| runtime.spawn(seen.insert(&format!("task-{i}"))))
            .collect();
        for task in tasks {
            assert!(runtime.block_on(task).unwrap().unwrap());
        }
    });
    assert_eq!(
        seen.get().inner.store().head().unwrap().generation.get(),
        1_200
    );
    assert_eq!(seen.contains_blocking("t3-99").unwrap(), Lookup::Present);
}

#[test]
fn a_panicking_call_fails_alone_and_the_workers_go_on() {
    let runtime = runtime();
    let seen = Coalesced::new_with(Gated::new(false), one_worker()).unwrap();
    let panicked = runtime.block_on(seen.run(|_| -> u8 { panic!("in the wrapper") }));
    assert!(
        matches!(panicked, Err(CoalescedError::Stopped)),
        "{panicked:?}"
    );
    assert!(runtime.block_on(seen.insert("after")).unwrap());
    let count = runtime
        .block_on(seen.run(|s| s.inner.store().head().map(|h| h.generation.get())))
        .unwrap()
        .unwrap();
    assert_eq!(count, 1);
}

/// From a current-thread runtime (one thread: a blocked thread would hang it), and after the
/// last handle is dropped inside it, the queued calls are still answered.
#[test]
fn a_current_thread_runtime_is_never_blocked() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let seen = Coalesced::new(Gated::new(false)).unwrap();
    let answers = runtime.block_on(async move {
        let calls: Vec<_> = (0..100).map(|i| seen.insert(&format!("k{i}"))).collect();
        drop(seen);
        let mut answers = Vec::new();
        for call in calls {
            answers.push(call.await.unwrap());
        }
        answers
    });
    assert!(answers.into_iter().all(|new| new));
}

/// A full queue: callers past `max_queued` wait (tasks without blocking their thread, one of
/// them dropped while it waits), and all are answered once the worker goes on; a linger too
/// long to add to the clock is no panic.
#[test]
fn a_full_queue_makes_callers_wait_not_fail() {
    let runtime = runtime();
    let options = one_worker().max_queued(4).linger(std::time::Duration::MAX);
    let seen = Coalesced::new_with(Gated::new(true), options.clone()).unwrap();
    let held = runtime.spawn(seen.insert("held"));
    until_at_gate(&seen);
    let queued: Vec<_> = (0..4)
        .map(|i| runtime.spawn(seen.insert(&format!("q{i}"))))
        .collect();
    until_queued(&seen, 4);
    // Past the bound: these wait for room; one is dropped while it waits.
    let mut context = Context::from_waker(Waker::noop());
    {
        let mut dropped = pin!(seen.insert("dropped"));
        assert!(dropped.as_mut().poll(&mut context).is_pending());
    }
    let waiting: Vec<_> = (0..20)
        .map(|i| runtime.spawn(seen.insert(&format!("w{i}"))))
        .collect();
    assert_eq!(seen.queued(), 4);
    seen.get().open_gate();
    for task in std::iter::once(held).chain(queued).chain(waiting) {
        assert!(runtime.block_on(task).unwrap().unwrap());
    }
    // The dropped caller never queued its key.
    assert!(!seen.get().inner.store().contains(b"dropped").unwrap());
    assert_eq!(seen.options().linger, std::time::Duration::MAX);
}

/// Batches of the caller's own: answered in key order, a refused key failing the whole call
/// before anything is inserted; the future owns its keys even when they were borrowed.
#[test]
fn a_callers_own_batch_is_one_call() {
    let runtime = runtime();
    let seen = Coalesced::new(Gated::new(false)).unwrap();
    let owned = vec!["a".to_owned(), "b".to_owned()];
    let borrowed: Vec<&str> = owned.iter().map(String::as_str).collect();
    let call = seen.insert_all(borrowed);
    drop(owned);
    assert_eq!(
        runtime.block_on(runtime.spawn(call)).unwrap().unwrap(),
        [true, true]
    );
    assert_eq!(
        runtime.block_on(seen.insert_all(["b", "c", "c"])).unwrap(),
        [false, true, false]
    );
    let refused = runtime.block_on(seen.insert_all([&b"d"[..], &b"\xff"[..]]));
    assert!(
        matches!(refused, Err(CoalescedError::Key(_))),
        "{refused:?}"
    );
    assert!(!seen.get().inner.store().contains(b"d").unwrap());
    assert_eq!(
        runtime.block_on(seen.contains_each(["a", "d"])).unwrap()[0],
        Lookup::Present
    );
    assert!(!runtime.block_on(seen.contains_each(["d"])).unwrap()[0].is_present());
}
