//! Blocking calls made from inside an async runtime.
//!
//! The `postgres` client drives each connection with a runtime of its own, and tokio refuses
//! to start (`block_on`) or drop a runtime on a thread that is running one: called from an
//! `async fn` under `#[tokio::main]`, every call of the store would panic. So a call made
//! where a runtime is entered runs on a thread of its own (scoped: it borrows the store),
//! and connections let go of there are closed on a thread of their own too. Outside a
//! runtime, calls run where they are made.
//!
//! This keeps the blocking API safe anywhere; it still blocks the caller's thread, so async
//! code should go through `bloom_store::Coalesced`, whose workers are plain threads.

use crate::PostgresStoreError;

/// Whether the current thread is inside an async runtime's context (a task, a `block_on`,
/// or a thread that entered a runtime's handle).
pub(crate) fn inside_runtime() -> bool {
    tokio::runtime::Handle::try_current().is_ok()
}

/// Runs `f` here, or on a scoped thread of its own when a runtime is entered here.
pub(crate) fn off_runtime<T: Send>(
    f: impl FnOnce() -> Result<T, PostgresStoreError> + Send,
) -> Result<T, PostgresStoreError> {
    if !inside_runtime() {
        return f();
    }
    // The caller's span goes along, so that the statements' spans and events nest under it.
    let span = tracing::Span::current();
    std::thread::scope(|scope| {
        let thread = std::thread::Builder::new()
            .name("bloom-postgres call".into())
            .spawn_scoped(scope, move || span.in_scope(f))
            .map_err(|e| PostgresStoreError::Thread(e.to_string()))?;
        match thread.join() {
            Ok(result) => result,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    })
}

/// Drops `value` here, or on a thread of its own when a runtime is entered here (closing a
/// connection blocks on its own runtime). When no thread can be started, the value is
/// leaked rather than dropped here: its socket stays open until the process ends.
pub(crate) fn drop_off_runtime<T: Send + 'static>(value: T) {
    if !inside_runtime() {
        drop(value);
        return;
    }
    // Held apart from the thread's closure: a closure that cannot be started is dropped
    // here, and the value must not be.
    let slot = std::sync::Arc::new(std::sync::Mutex::new(Some(value)));
    let moved = std::sync::Arc::clone(&slot);
    let started = std::thread::Builder::new()
        .name("bloom-postgres close".into())
        .spawn(move || drop(moved.lock().map(|mut value| value.take())));
    if started.is_err()
        && let Ok(mut value) = slot.lock()
    {
        std::mem::forget(value.take());
    }
}
