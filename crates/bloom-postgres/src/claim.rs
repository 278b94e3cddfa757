//! The claim of one `FilteredStore` on a store: a session advisory lock on a connection of
//! its own, with a heartbeat.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use postgres::{Client, NoTls};

use crate::PostgresStoreError;
use crate::connect::preflight;
use crate::schema;

/// How often a held claim checks that its connection (and so its lock) is still there.
const HEARTBEAT: Duration = Duration::from_secs(1);

/// The connection that holds a wrapper's claim (its advisory lock), and whether it still
/// does.
pub(crate) struct Claim {
    /// The connection holding the lock. Its mutex is held across every check and retake,
    /// so that two renewals at once never take the lock on two sessions (the second would
    /// find it held and give up a claim that is still this wrapper's).
    client: Mutex<Option<Client>>,
    /// Whether the lock was confirmed at the last heartbeat: cleared while the server cannot
    /// be reached (so a wrapper cut off from it stops answering from its filter alone), set
    /// again once the lock is confirmed or taken again.
    valid: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// Set for good when another session holds the lock.
    lost: std::sync::atomic::AtomicBool,
    config: postgres::Config,
    /// The lock's second key, hashed by the server.
    name: String,
}

impl Claim {
    /// Takes the advisory lock on a new connection into `slot`; `false` when another
    /// session holds it.
    fn take(&self, slot: &mut Option<Client>) -> Result<bool, PostgresStoreError> {
        preflight(&self.config)?;
        let mut client = self.config.connect(NoTls)?;
        client.batch_execute(crate::connect::SESSION_SEARCH_PATH)?;
        let granted: bool = crate::values::field(
            &client.query_one(
                "SELECT pg_try_advisory_lock($1, hashtext($2))",
                &[&schema::CLAIM_LOCK_CLASS, &self.name],
            )?,
            0,
            "the claim",
        )?;
        if granted {
            *slot = Some(client);
        }
        Ok(granted)
    }

    /// Confirms the lock: its connection answers, or (after a server restart ended it) the
    /// lock is taken again. Returns `false` once the claim is lost for good (another
    /// session holds the lock).
    pub(crate) fn renew(&self) -> bool {
        use std::sync::atomic::Ordering;
        if self.lost.load(Ordering::Acquire) {
            return false;
        }
        let mut slot = self.client.lock().unwrap_or_else(PoisonError::into_inner);
        let alive = slot
            .as_mut()
            .is_some_and(|client| client.simple_query("SELECT 1").is_ok());
        let confirmed = if alive {
            Ok(true)
        } else {
            *slot = None;
            self.take(&mut slot)
        };
        match confirmed {
            Ok(true) => {
                self.valid.store(true, Ordering::Release);
                true
            }
            Ok(false) => {
                self.lost.store(true, Ordering::Release);
                self.valid.store(false, Ordering::Release);
                false
            }
            // The server cannot be reached: unconfirmed, tried again at the next heartbeat.
            Err(_) => {
                self.valid.store(false, Ordering::Release);
                true
            }
        }
    }

    /// Whether another session took the lock: the claim is over for good.
    pub(crate) fn is_lost(&self) -> bool {
        self.lost.load(std::sync::atomic::Ordering::Acquire)
    }
}

impl Claim {
    /// The claim `name` on the server `config` names, taken, with its heartbeat running; or
    /// `None` when another session holds it.
    pub(crate) fn take_new(
        config: &postgres::Config,
        name: String,
    ) -> Result<Option<Arc<Self>>, PostgresStoreError> {
        let claim = Arc::new(Self {
            client: Mutex::new(None),
            valid: Arc::new(std::sync::atomic::AtomicBool::new(true)),
            lost: std::sync::atomic::AtomicBool::new(false),
            config: config.clone(),
            name,
        });
        let granted = {
            let mut slot = claim.client.lock().unwrap_or_else(PoisonError::into_inner);
            claim.take(&mut slot)?
        };
        if !granted {
            return Ok(None);
        }
        let watched = Arc::downgrade(&claim);
        std::thread::Builder::new()
            .name("bloom-postgres claim".into())
            .spawn(move || {
                loop {
                    std::thread::sleep(HEARTBEAT);
                    // Ends with the claim (its holder dropped it) or once it is given up.
                    match watched.upgrade() {
                        Some(claim) if claim.renew() => {}
                        _ => return,
                    }
                }
            })
            .map_err(|e| {
                PostgresStoreError::Unreachable(format!("cannot start the claim's heartbeat: {e}"))
            })?;
        Ok(Some(claim))
    }

    /// The flag a `StoreClaim` watches.
    pub(crate) fn validity(&self) -> Arc<std::sync::atomic::AtomicBool> {
        Arc::clone(&self.valid)
    }
}
