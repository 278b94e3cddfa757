//! The store's connections: a bounded pool. At most [`Settings::max_connections`] are open
//! at once (lent out or idle); a caller that finds none free waits for one, up to
//! [`Settings::pool_timeout`], and then fails with [`PostgresStoreError::PoolExhausted`]
//! rather than open one more. (A wrapper's claim holds one connection of its own besides.)
//!
//! [`Settings::max_connections`]: crate::Settings::max_connections
//! [`Settings::pool_timeout`]: crate::Settings::pool_timeout

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::PostgresStoreError;
use crate::runtime::drop_off_runtime;
use crate::statements::Conn;

/// The connections, and how many are open.
pub(crate) struct Pool {
    state: Mutex<State>,
    /// Signalled when a connection is put back or its place freed.
    freed: Condvar,
    max: usize,
    wait: Duration,
}

struct State {
    idle: Vec<Conn>,
    /// Connections open: idle, lent out, or being made.
    open: usize,
}

impl Pool {
    pub(crate) fn new(max: usize, wait: Duration) -> Self {
        Self {
            state: Mutex::new(State {
                idle: Vec::new(),
                open: 0,
            }),
            freed: Condvar::new(),
            max: max.max(1),
            wait,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// An idle connection, or (`None`) a place for a new one, which the caller makes and
    /// [`Pool::put_back`]s, or gives back with [`Pool::forget`]; waits for either up to the
    /// pool's timeout.
    pub(crate) fn lend(&self) -> Result<Option<Conn>, PostgresStoreError> {
        let started = Instant::now();
        let mut state = self.lock();
        loop {
            while let Some(conn) = state.idle.pop() {
                if !conn.client.is_closed() {
                    return Ok(Some(conn));
                }
                state.open -= 1;
                drop_off_runtime(conn);
            }
            if state.open < self.max {
                state.open += 1;
                return Ok(None);
            }
            let waited = started.elapsed();
            let Some(left) = self.wait.checked_sub(waited).filter(|d| !d.is_zero()) else {
                return Err(PostgresStoreError::PoolExhausted {
                    max: self.max,
                    waited,
                });
            };
            state = self
                .freed
                .wait_timeout(state, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// Returns a lent connection (a closed one only frees its place).
    pub(crate) fn put_back(&self, conn: Conn) {
        let mut state = self.lock();
        if conn.client.is_closed() {
            state.open -= 1;
            drop(state);
            drop_off_runtime(conn);
        } else {
            state.idle.push(conn);
        }
        self.freed.notify_one();
    }

    /// Frees the place of a connection that was never made, or was let go of.
    pub(crate) fn forget(&self) {
        self.lock().open -= 1;
        self.freed.notify_one();
    }

    /// Closes the idle connections (the server restarted: they are gone too).
    pub(crate) fn clear_idle(&self) {
        let mut state = self.lock();
        let idle = std::mem::take(&mut state.idle);
        state.open -= idle.len();
        drop(state);
        self.freed.notify_all();
        drop_off_runtime(idle);
    }

    /// Closes every idle connection, for the store's drop.
    pub(crate) fn close(&self) {
        self.clear_idle();
    }
}
