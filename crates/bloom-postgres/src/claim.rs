//! A wrapper's claim on a store: a session advisory lock (exclusive for a `FilteredStore`,
//! shared for the wrappers of a shared filter) on a connection of its own, which also holds
//! the store's tables (`ACCESS SHARE`, in an open transaction) so that nothing can replace
//! them without the claim knowing first.
//!
//! A thread keeps the connection, waiting on its socket:
//! - The session ends (the database dropped `WITH (FORCE)`, a backend terminated before a
//!   rename, a server restart): seen as it happens, and the claim is unconfirmed until it
//!   is taken again on a new session and the store checked.
//! - Another session waits for a lock on the store's tables (`DROP SCHEMA`, `pg_restore
//!   --clean`, `TRUNCATE`, `ALTER TABLE`, `VACUUM FULL`): the claim is made unconfirmed
//!   *before* the tables are let go, so the change can never land under a wrapper that still
//!   answers from its filter; the tables are then taken and the store checked again.
//! - The check: the store is the one opened (its identity) and its history still has the
//!   newest point this process saw (its digest at that generation). Anything else (another
//!   database under the name, another store restored into the schema, an older backup, a
//!   diverged copy) loses the claim for good, and the store fails every call with
//!   `Replaced`. Another wrapper holding the lock when it is taken again loses it for good
//!   too (`ClaimLost`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, channel};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use postgres::Client;
use postgres::fallible_iterator::FallibleIterator;

use bloom_store::{ClaimKind, ClaimWatch};

use crate::PostgresStoreError;
use crate::guard::Guard;
use crate::schema::{self, Namespace};

/// How long the thread waits on the socket at a time: also how soon a dropped claim lets go
/// of its lock.
const SLICE: Duration = Duration::from_millis(50);
/// Every this many slices, the thread looks for sessions waiting on the store's tables (and
/// tries again to take a claim it could not confirm).
const SLICES_PER_LOOK: u32 = 4;
/// The tables the claim holds: every table of the store.
const TABLES: [&str; 3] = ["store_meta", "changes", "head"];

/// The claim's connection, holding the advisory lock and (while confirmed) the tables.
struct Session {
    client: Client,
    /// The tables' OIDs, as text for the waiters query.
    tables: String,
}

/// What taking the claim on a new session found.
enum Taken {
    Held(Box<Session>),
    /// Another wrapper holds a conflicting claim.
    Refused,
}

/// The parts of a claim its thread and its holder share.
pub(crate) struct Claim {
    pub(crate) watch: ClaimWatch,
    /// Requests to take the claim again at once (asked, answered), for a store that just
    /// made a new connection: after a server restart, the claim is taken again before the
    /// store goes on, so that a wrapper that got there first is the one refused.
    renewals: Mutex<(u64, u64)>,
    renewed: std::sync::Condvar,
    guard: Arc<Guard>,
    config: postgres::Config,
    namespace: Namespace,
    kind: ClaimKind,
    /// The lock's second key, hashed by the server.
    name: String,
}

/// Held by the wrapper: dropping it stops the thread, and waits (a bounded time) for it to
/// let go of the lock, so that another wrapper can claim the store at once.
pub(crate) struct Holder {
    /// The claim itself, alive as long as its holder (the store sees it through a weak
    /// reference, after its thread returned too).
    _claim: Arc<Claim>,
    stop: Arc<AtomicBool>,
    /// Closed by the thread when it returns.
    done: Mutex<Receiver<()>>,
}

/// How long a dropped claim waits for its thread to let go of the lock: past a slice, the
/// thread is taking the tables (bounded by `lock_timeout`) or connecting to a server that
/// cannot be reached (and then holds no lock).
const RELEASE_WAIT: Duration = Duration::from_secs(2);

impl Drop for Holder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        let done = self.done.get_mut().unwrap_or_else(PoisonError::into_inner);
        let _ = done.recv_timeout(RELEASE_WAIT);
    }
}

impl Claim {
    /// The claim of `kind` on the store, taken and checked, with its thread running; `None`
    /// when a conflicting claim is held.
    pub(crate) fn take_new(
        config: &postgres::Config,
        namespace: &Namespace,
        guard: Arc<Guard>,
        kind: ClaimKind,
    ) -> Result<Option<(Arc<Self>, Holder)>, PostgresStoreError> {
        let claim = Arc::new(Self {
            watch: ClaimWatch::new(),
            renewals: Mutex::new((0, 0)),
            renewed: std::sync::Condvar::new(),
            name: format!("{}:{}", namespace.as_str(), guard.identity),
            guard,
            config: config.clone(),
            namespace: namespace.clone(),
            kind,
        });
        let session = match claim.take(true)? {
            Taken::Held(session) => *session,
            Taken::Refused => return Ok(None),
        };
        let stop = Arc::new(AtomicBool::new(false));
        let running = Arc::clone(&claim);
        let stopped = Arc::clone(&stop);
        let (finished, done) = channel::<()>();
        std::thread::Builder::new()
            .name("bloom-postgres claim".into())
            .spawn(move || {
                running.run(session, &stopped);
                drop(finished);
            })
            .map_err(|e| {
                PostgresStoreError::Unreachable(format!("cannot start the claim's thread: {e}"))
            })?;
        Ok(Some((
            Arc::clone(&claim),
            Holder {
                _claim: claim,
                stop,
                done: Mutex::new(done),
            },
        )))
    }

    /// Whether the claim is lost for good.
    pub(crate) fn is_lost(&self) -> bool {
        self.watch.is_lost()
    }

    /// Asks the thread whether the claim's session is still there, and to take the claim
    /// again at once if it ended; waits (bounded) for the answer. Returns `false` once the
    /// claim is lost for good.
    pub(crate) fn renew_now(&self) -> bool {
        if self.watch.is_lost() {
            return false;
        }
        let mut renewals = self.renewals.lock().unwrap_or_else(PoisonError::into_inner);
        renewals.0 += 1;
        let asked = renewals.0;
        self.renewed.notify_all();
        let deadline = std::time::Instant::now() + RELEASE_WAIT * 5;
        while renewals.1 < asked {
            let now = std::time::Instant::now();
            if now >= deadline {
                break;
            }
            renewals = self
                .renewed
                .wait_timeout(renewals, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        !self.watch.is_lost()
    }

    /// Waits out the pause between two attempts at a claim whose session ended, or until a
    /// renewal is asked for or the claim dropped.
    fn pause(&self, stop: &AtomicBool) {
        let renewals = self.renewals.lock().unwrap_or_else(PoisonError::into_inner);
        if renewals.0 > renewals.1 || stop.load(Ordering::Acquire) {
            return;
        }
        drop(
            self.renewed
                .wait_timeout(renewals, SLICE * SLICES_PER_LOOK)
                .unwrap_or_else(PoisonError::into_inner),
        );
    }

    /// Every renewal asked so far has been tried.
    fn answer_renewals(&self) {
        let mut renewals = self.renewals.lock().unwrap_or_else(PoisonError::into_inner);
        renewals.1 = renewals.0;
        self.renewed.notify_all();
    }

    /// A new session: the advisory lock of the claim's kind, then the tables and the check
    /// (`first`: as the claim is first taken, see [`Claim::hold_tables`]).
    fn take(&self, first: bool) -> Result<Taken, PostgresStoreError> {
        let mut client = crate::connect::connect(&self.config)?;
        // Its transaction stays open while it holds the tables: never ended by a timeout of
        // the server's (which would only make the claim unconfirmed for a moment).
        client.batch_execute(&format!(
            "{} SET idle_in_transaction_session_timeout = 0; SET statement_timeout = 0; \
             SET lock_timeout = 1000;",
            crate::connect::SESSION_SEARCH_PATH
        ))?;
        let function = match self.kind {
            ClaimKind::Exclusive => "pg_try_advisory_lock",
            _ => "pg_try_advisory_lock_shared",
        };
        let granted: bool = crate::values::field(
            &client.query_one(
                &format!("SELECT {function}($1, hashtext($2))"),
                &[&schema::CLAIM_LOCK_CLASS, &self.name],
            )?,
            0,
            "the claim",
        )?;
        if !granted {
            return Ok(Taken::Refused);
        }
        let mut session = Session {
            client,
            tables: String::new(),
        };
        self.hold_tables(&mut session, first)?;
        Ok(Taken::Held(Box::new(session)))
    }

    /// Takes the store's tables (`ACCESS SHARE`, in a transaction left open) and checks the
    /// store under them: the one opened, with the history this process saw. A store found
    /// replaced loses the claim for good (through the store's guard). As the claim is
    /// `first` taken, the head is taken for seen instead of checked: what was committed
    /// before is the store the wrapper opens (and catches up with).
    fn hold_tables(&self, session: &mut Session, first: bool) -> Result<(), PostgresStoreError> {
        let ns = self.namespace.as_str();
        let tables: Vec<String> = TABLES.iter().map(|t| format!("{ns}.{t}")).collect();
        let client = &mut session.client;
        let held = (|| -> Result<String, PostgresStoreError> {
            client.batch_execute(&format!(
                "BEGIN ISOLATION LEVEL READ COMMITTED; LOCK TABLE {} IN ACCESS SHARE MODE;",
                tables.join(", ")
            ))?;
            let row = client.query_one(
                &format!(
                    "SELECT array_to_string(ARRAY[{}]::oid[], ','), \
                     (SELECT value FROM {ns}.store_meta WHERE name = 'identity')",
                    tables
                        .iter()
                        .map(|t| format!("'{t}'::regclass"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                &[],
            )?;
            let oids: String = crate::values::field(&row, 0, "the store's tables")?;
            let identity: Option<&[u8]> = crate::values::field(&row, 1, "the store identity")?;
            if identity != Some(self.guard.identity.to_bytes().as_slice()) {
                return Err(self.guard.replaced("another store is in its place"));
            }
            let seen = self.guard.seen();
            if seen.generation != bloom_format::DatasetGeneration::ZERO {
                let row = client.query_opt(
                    &format!("SELECT history FROM {ns}.changes WHERE seq = $1"),
                    &[&crate::values::to_seq(seen.generation)],
                )?;
                let digest = row
                    .as_ref()
                    .map(|row| crate::values::field::<&[u8]>(row, 0, "a history digest"))
                    .transpose()?;
                match digest {
                    Some(digest) if digest == seen.digest.to_bytes().as_slice() => {}
                    Some(_) => {
                        return Err(self.guard.replaced(format!(
                            "its history up to generation {} is another one (a diverged copy restored into it?)",
                            seen.generation
                        )));
                    }
                    None => {
                        return Err(self.guard.replaced(format!(
                            "its history went back behind generation {} (an older backup restored into it?)",
                            seen.generation
                        )));
                    }
                }
            }
            if first {
                let row = client.query_one(&format!("SELECT seq, history FROM {ns}.head"), &[])?;
                let head = crate::values::point(
                    self.guard.identity,
                    crate::values::field(&row, 0, "the head")?,
                    crate::values::field(&row, 1, "the head")?,
                )?;
                self.guard
                    .saw_after(bloom_format::DatasetGeneration::ZERO, head)?;
            } else if self.kind == ClaimKind::Exclusive {
                self.nothing_unseen(client, seen)?;
            }
            Ok(oids)
        })();
        match held {
            Ok(oids) => {
                session.tables = oids;
                Ok(())
            }
            Err(e) => {
                let _ = session.client.batch_execute("ROLLBACK");
                Err(e)
            }
        }
    }

    /// An exclusive claim's wrapper made every change of the store: a head past the newest
    /// point it saw is history it never saw (writes behind its back, or a copy of this very
    /// history that went on without it put in its place), whose keys its filter lacks. The
    /// claim is then behind (`ClaimStatus::Behind`): the wrapper asks the store for every
    /// lookup until a save or a rebuild takes those keys in; the store stays usable.
    fn nothing_unseen(
        &self,
        client: &mut Client,
        seen: bloom_store::HistoryPoint,
    ) -> Result<(), PostgresStoreError> {
        let row = client.query_one(
            &format!("SELECT seq FROM {}.head", self.namespace.as_str()),
            &[],
        )?;
        let head = crate::values::from_seq(crate::values::field(&row, 0, "the head")?);
        // One of this process's commits may have landed without its record yet: looked at
        // again at the next check.
        let busy = self.guard.commits_in_flight();
        let seen = self.guard.seen().generation.max(seen.generation);
        if head <= seen {
            return Ok(());
        }
        if busy {
            return Err(PostgresStoreError::Unreachable(
                "a commit of this process is being recorded; the claim is checked again".into(),
            ));
        }
        // Writes that did not pass through the wrapper: the store is still this one, but
        // the filter lacks their keys until a save or a rebuild takes them in.
        self.watch.fall_behind(head);
        Ok(())
    }

    /// Whether the store's tables must be let go and checked again: another session waits
    /// for a lock on them, or their names no longer lead to them (a schema renamed, and
    /// another renamed into its place, takes no lock on the tables).
    fn someone_waits(&self, session: &mut Session) -> Result<bool, PostgresStoreError> {
        let ns = self.namespace.as_str();
        let names = TABLES
            .iter()
            .map(|t| format!("to_regclass('{ns}.{t}')"))
            .collect::<Vec<_>>()
            .join(", ");
        let row = session.client.query_one(
            &format!(
                "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_locks \
                 WHERE NOT granted AND locktype = 'relation' \
                 AND relation = ANY(string_to_array($1, ',')::oid[]) \
                 AND database = (SELECT oid FROM pg_catalog.pg_database \
                                 WHERE datname = current_database())) \
                 OR array_to_string(ARRAY[{names}]::oid[], ',') IS DISTINCT FROM $1"
            ),
            &[&session.tables],
        )?;
        crate::values::field(&row, 0, "the claim's waiters")
    }

    /// The thread: keeps the claim until its holder drops it or it is lost.
    fn run(&self, session: Session, stop: &AtomicBool) {
        let mut session = Some(session);
        // Whether the tables are held and the store checked under them.
        let mut confirmed = true;
        let mut slices = 0u32;
        while !stop.load(Ordering::Acquire) && !self.watch.is_lost() && !self.guard.is_lost() {
            let Some(current) = session.as_mut() else {
                // Taken again every look while the server cannot be reached, or at once
                // when the store asks.
                self.pause(stop);
                match self.take(false) {
                    Ok(Taken::Held(new)) => {
                        session = Some(*new);
                        confirmed = true;
                        self.watch.confirm();
                    }
                    Ok(Taken::Refused) => self.watch.lose(
                        "another wrapper took the store's claim while this one's session was gone",
                    ),
                    // Replaced: the guard lost it; unreachable: try again.
                    Err(_) => {}
                }
                self.answer_renewals();
                continue;
            };
            // Waits on the socket: a session ended by the server is seen at once.
            let ended = current
                .client
                .notifications()
                .timeout_iter(SLICE)
                .next()
                .is_err()
                || current.client.is_closed();
            if ended {
                self.watch.suspend();
                session = None;
                continue;
            }
            // The session is there: a renewal asked for has nothing to do.
            self.answer_renewals();
            slices += 1;
            if !slices.is_multiple_of(SLICES_PER_LOOK) {
                continue;
            }
            if confirmed {
                match self.someone_waits(current) {
                    Ok(false) => continue,
                    Ok(true) => {
                        // Unconfirmed first, then the tables let go: whatever the waiter does
                        // lands after the filter stopped answering alone.
                        self.watch.suspend();
                        confirmed = false;
                        if current.client.batch_execute("ROLLBACK").is_err() {
                            session = None;
                            continue;
                        }
                    }
                    Err(_) => {
                        self.watch.suspend();
                        session = None;
                        continue;
                    }
                }
            }
            // Take the tables and check the store again (the waiter's change is done, or
            // the tables are taken once it is: `lock_timeout` bounds the wait).
            if self.hold_tables(current, false).is_ok() {
                confirmed = true;
                self.watch.confirm();
            } else if current.client.is_closed() {
                session = None;
            }
        }
        self.answer_renewals();
        // Let go of the lock before the holder's drop returns (closing the connection frees
        // it too, but the server may take a moment to notice).
        if let Some(mut session) = session {
            let _ = session
                .client
                .batch_execute("ROLLBACK; SELECT pg_advisory_unlock_all();");
        }
    }
}
