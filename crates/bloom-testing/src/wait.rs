//! Waiting for something a test is not told of as it happens (a background thread's verdict,
//! a server's state): the condition is polled, and the deadline only bounds a hang, so a busy
//! machine never fails a test that would pass on a quiet one.

use std::time::{Duration, Instant};

/// How long a wait may last before the test fails: long enough that only a hang reaches it.
pub const HANG: Duration = Duration::from_secs(180);

/// Waits until `done` returns `true`, asking it every 20 ms; panics naming `what` once
/// [`HANG`] has passed without it.
pub fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + HANG;
    while !done() {
        assert!(
            Instant::now() < deadline,
            "{what} never happened (waited {} s)",
            HANG.as_secs()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
