//! SIGINT, SIGTERM and SIGHUP (a closed terminal) while a snapshot file is being written: the write stops between chunks,
//! the temporary file is removed, and the process exits with 128 + the signal. At any other
//! moment the signals keep their default action (a blocked read of standard input still ends
//! at Ctrl-C); a second signal during the cleanup ends the process at once. Recording starts
//! before the temporary file is created and ends after it is renamed over the target, so a
//! signal either leaves the old file and no temporary one, or (after the last chunk) lets the
//! new file land whole.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::flag;

/// What the handlers read and set.
pub(crate) struct Signals {
    /// True while no temporary file exists: a signal then takes its default action.
    default_action: Arc<AtomicBool>,
    /// The signal received while writing, 0 for none.
    received: Arc<AtomicUsize>,
}

impl Signals {
    /// Installs the handlers. Failing to install them is not fatal: writes then simply keep
    /// the default behaviour (the next write removes a temporary file left behind).
    pub(crate) fn install() -> Self {
        let signals = Self {
            default_action: Arc::new(AtomicBool::new(true)),
            received: Arc::new(AtomicUsize::new(0)),
        };
        for signal in [SIGINT, SIGTERM, SIGHUP] {
            // Order matters: the first handler ends the process while no write is running;
            // the second records the signal for the writer; the third ends the process on a
            // second signal during the cleanup.
            let already = Arc::new(AtomicBool::new(false));
            let _ = flag::register_conditional_default(signal, Arc::clone(&signals.default_action));
            let _ = flag::register_conditional_shutdown(signal, 128 + signal, Arc::clone(&already));
            let _ = flag::register(signal, already);
            let _ = flag::register_usize(
                signal,
                Arc::clone(&signals.received),
                usize::try_from(signal).unwrap_or(0),
            );
        }
        signals
    }

    /// Marks the start of a write: signals are recorded instead of ending the process, until
    /// the guard is dropped.
    pub(crate) fn writing(&self) -> WriteGuard<'_> {
        self.received.store(0, Ordering::SeqCst);
        self.default_action.store(false, Ordering::SeqCst);
        WriteGuard { signals: self }
    }
}

/// While it lives, the write may be interrupted; see [`WriteGuard::interrupted`].
pub(crate) struct WriteGuard<'a> {
    signals: &'a Signals,
}

impl WriteGuard<'_> {
    /// The signal received since the write started, if any.
    pub(crate) fn interrupted(&self) -> Option<i32> {
        match self.signals.received.load(Ordering::SeqCst) {
            0 => None,
            signal => i32::try_from(signal).ok(),
        }
    }
}

impl Drop for WriteGuard<'_> {
    fn drop(&mut self) {
        self.signals.default_action.store(true, Ordering::SeqCst);
    }
}
