//! [`Reply`]: the one answer a worker gives one caller, awaited by a task or waited for by a
//! thread. Runtime-agnostic: a mutex, a waker and a condition variable.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::task::{Context, Poll, Waker};

struct State<T> {
    value: Option<T>,
    waker: Option<Waker>,
    /// A thread waits in [`Reply::wait`] (only then is the condition variable signalled: a
    /// signal is a system call).
    blocked: bool,
}

struct Slot<T> {
    state: Mutex<State<T>>,
    ready: Condvar,
}

/// The worker's end: [`Answer::send`] once. Dropped unsent (a worker that stopped), the
/// caller gets `gone`.
pub(crate) struct Answer<T> {
    slot: Arc<Slot<T>>,
    /// Sent when the answer is dropped unsent.
    gone: Option<T>,
}

/// The caller's end: a future, or [`Reply::wait`].
pub(crate) struct Reply<T> {
    slot: Arc<Slot<T>>,
}

/// A pair; `gone` is what the caller gets when the worker's end is dropped unsent.
pub(crate) fn pair<T>(gone: T) -> (Answer<T>, Reply<T>) {
    let slot = Arc::new(Slot {
        state: Mutex::new(State {
            value: None,
            waker: None,
            blocked: false,
        }),
        ready: Condvar::new(),
    });
    (
        Answer {
            slot: Arc::clone(&slot),
            gone: Some(gone),
        },
        Reply { slot },
    )
}

impl<T> Answer<T> {
    fn put(&self, value: T) {
        let mut state = self
            .slot
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        state.value = Some(value);
        let waker = state.waker.take();
        let blocked = state.blocked;
        drop(state);
        if blocked {
            self.slot.ready.notify_all();
        }
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// Gives the caller its answer (kept if the caller has gone: dropped with the slot).
    pub(crate) fn send(mut self, value: T) {
        self.gone = None;
        self.put(value);
    }
}

impl<T> Drop for Answer<T> {
    fn drop(&mut self) {
        if let Some(gone) = self.gone.take() {
            self.put(gone);
        }
    }
}

impl<T> Reply<T> {
    /// Blocks the thread until the answer comes.
    pub(crate) fn wait(self) -> T {
        let mut state = self
            .slot
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        loop {
            if let Some(value) = state.value.take() {
                return value;
            }
            state.blocked = true;
            state = self
                .slot
                .ready
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }
}

impl<T> Future for Reply<T> {
    type Output = T;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let mut state = self
            .slot
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match state.value.take() {
            Some(value) => Poll::Ready(value),
            None => {
                if !state
                    .waker
                    .as_ref()
                    .is_some_and(|w| w.will_wake(cx.waker()))
                {
                    state.waker = Some(cx.waker().clone());
                }
                Poll::Pending
            }
        }
    }
}
