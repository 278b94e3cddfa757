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
    client: Mutex<Option<Client>>,
    valid: std::sync::Arc<std::sync::atomic::AtomicBool>,
    config: postgres::Config,
    /// The lock's second key, hashed by the server.
    name: String,
}

impl Claim {
    /// Takes the advisory lock on a new connection; `false` when another session holds it.
    fn take(&self) -> Result<bool, PostgresStoreError> {
        preflight(&self.config)?;
        let mut client = self.config.connect(NoTls)?;
        let granted: bool = crate::values::field(
            &client.query_one(
                "SELECT pg_try_advisory_lock($1, hashtext($2))",
                &[&schema::CLAIM_LOCK_CLASS, &self.name],
            )?,
            0,
            "the claim",
        )?;
        if granted {
            *self.client.lock().unwrap_or_else(PoisonError::into_inner) = Some(client);
        }
        Ok(granted)
    }

    /// Whether the claim still holds: its connection answers, or (after a server restart
    /// ended it) the lock could be taken again. When another wrapper took it meanwhile, the
    /// claim is given up for good.
    pub(crate) fn renew(&self) -> bool {
        if !self.valid.load(std::sync::atomic::Ordering::Acquire) {
            return false;
        }
        let alive = self
            .client
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_mut()
            .is_some_and(|client| client.simple_query("SELECT 1").is_ok());
        match alive || self.take().unwrap_or(true) {
            // An error while taking it again (the server not back yet) is tried again.
            true => true,
            false => {
                self.valid
                    .store(false, std::sync::atomic::Ordering::Release);
                false
            }
        }
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
            config: config.clone(),
            name,
        });
        if !claim.take()? {
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

    /// Whether the claim still holds.
    pub(crate) fn is_valid(&self) -> bool {
        self.valid.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The flag a `StoreClaim` watches.
    pub(crate) fn validity(&self) -> Arc<std::sync::atomic::AtomicBool> {
        Arc::clone(&self.valid)
    }
}
