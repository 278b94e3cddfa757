//! The store's connections: a bounded pool. At most [`Settings::max_connections`] are open
//! at once (lent out or idle); a caller that finds none free waits for one, in the order
//! callers came, up to [`Settings::pool_timeout`], and then fails with
//! [`PostgresStoreError::PoolExhausted`] rather than open one more. (A wrapper's claim holds
//! one connection of its own besides.)
//!
//! [`Settings::max_connections`]: crate::Settings::max_connections
//! [`Settings::pool_timeout`]: crate::Settings::pool_timeout

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::PostgresStoreError;
use crate::runtime::drop_off_runtime;
use crate::statements::Conn;

/// The connections, and how many are open.
pub(crate) struct Pool {
    state: Mutex<State>,
    /// Signalled when a connection is put back or its place freed, or the first waiter
    /// changes.
    freed: Condvar,
    max: usize,
    wait: Duration,
    /// The exhaustion warnings: one every ten seconds at most, however many callers time out.
    warned: Throttle,
}

/// At most one event per period: each `due` says how many were held back since the last.
struct Throttle {
    last: Mutex<Option<(Instant, u64)>>,
}

impl Throttle {
    const PERIOD: Duration = Duration::from_secs(10);

    /// `Some(held back)` when an event is due now, `None` while one was made within the
    /// period (this one is counted for the next).
    fn due(&self) -> Option<u64> {
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        match &mut *last {
            Some((at, held)) if at.elapsed() < Self::PERIOD => {
                *held += 1;
                None
            }
            _ => {
                let held = last.map_or(0, |(_, held)| held);
                *last = Some((Instant::now(), 0));
                Some(held)
            }
        }
    }
}

struct State {
    idle: Vec<Conn>,
    /// Connections open: idle, lent out, or being made.
    open: usize,
    /// The tickets of the callers waiting, first come first.
    waiting: VecDeque<u64>,
    next_ticket: u64,
}

/// A connection lent out, or a place for one the caller makes ([`Lease::conn`] is `None`).
/// Dropped, it goes back to the pool; dropped by a panic, the connection (perhaps in the
/// middle of a transaction) is closed and only its place goes back.
pub(crate) struct Lease<'a> {
    pool: &'a Pool,
    pub(crate) conn: Option<Conn>,
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        match self.conn.take() {
            Some(conn) if !std::thread::panicking() => self.pool.put_back(conn),
            Some(conn) => {
                drop_off_runtime(conn);
                self.pool.forget();
            }
            None => self.pool.forget(),
        }
    }
}

impl Pool {
    pub(crate) fn new(max: usize, wait: Duration) -> Self {
        Self {
            state: Mutex::new(State {
                idle: Vec::new(),
                open: 0,
                waiting: VecDeque::new(),
                next_ticket: 0,
            }),
            freed: Condvar::new(),
            max: max.max(1),
            wait,
            warned: Throttle {
                last: Mutex::new(None),
            },
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// An idle connection, or a place for a new one (a lease without a connection, which
    /// the caller fills); waits its turn for either, up to the pool's timeout.
    pub(crate) fn lease(&self) -> Result<Lease<'_>, PostgresStoreError> {
        let started = Instant::now();
        let mut state = self.lock();
        let ticket = state.next_ticket;
        state.next_ticket += 1;
        state.waiting.push_back(ticket);
        let mut queued = false;
        loop {
            if state.waiting.front() == Some(&ticket) {
                let mut lent = None;
                while let Some(conn) = state.idle.pop() {
                    if !conn.client.is_closed() {
                        lent = Some(Some(conn));
                        break;
                    }
                    state.open -= 1;
                    drop_off_runtime(conn);
                }
                if lent.is_none() && state.open < self.max {
                    state.open += 1;
                    lent = Some(None);
                }
                if let Some(conn) = lent {
                    state.waiting.pop_front();
                    drop(state);
                    // The next caller's turn.
                    self.freed.notify_all();
                    waited_for(started, queued.then_some("waited"));
                    return Ok(Lease { pool: self, conn });
                }
            }
            let waited = started.elapsed();
            let Some(left) = self.wait.checked_sub(waited).filter(|d| !d.is_zero()) else {
                state.waiting.retain(|t| *t != ticket);
                drop(state);
                self.freed.notify_all();
                waited_for(started, Some("timed_out"));
                if let Some(since_last) = self.warned.due() {
                    tracing::warn!(
                        target: "bloom",
                        max_connections = self.max,
                        waited_ms = waited.as_millis() as u64,
                        timed_out_since_last = since_last,
                        "the PostgreSQL pool stayed exhausted for the pool timeout: a lookup or commit failed; raise max_connections or find what holds them",
                    );
                }
                return Err(PostgresStoreError::PoolExhausted {
                    max: self.max,
                    waited,
                });
            };
            queued = true;
            state = self
                .freed
                .wait_timeout(state, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// Returns a lent connection (a closed one only frees its place).
    fn put_back(&self, conn: Conn) {
        let mut state = self.lock();
        if conn.client.is_closed() {
            state.open -= 1;
            drop(state);
            drop_off_runtime(conn);
        } else {
            state.idle.push(conn);
            drop(state);
        }
        self.freed.notify_all();
    }

    /// Frees the place of a connection that was never made, or was let go of.
    fn forget(&self) {
        self.lock().open -= 1;
        self.freed.notify_all();
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
}

/// Records a wait for a connection begun at `started`, and its `outcome` when it found the
/// pool exhausted (`waited` for a connection, or `timed_out`).
fn waited_for(started: Instant, outcome: Option<&'static str>) {
    use bloom_store::telemetry::names;
    metrics::histogram!(names::POSTGRES_POOL_WAIT_SECONDS).record(started.elapsed().as_secs_f64());
    if let Some(outcome) = outcome {
        metrics::counter!(names::POSTGRES_POOL_EXHAUSTED, "outcome" => outcome).increment(1);
    }
}
