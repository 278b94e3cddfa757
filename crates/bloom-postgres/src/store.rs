//! [`PostgresStore`]: its connections (a pool, each checked to be of this store when it is
//! made), how it opens, and the one writing transaction.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bloom_format::StoreIdentity;
use bloom_store::{ClaimKind, HistoryPoint};

use crate::PostgresStoreError;
use crate::claim::Claim;
use crate::connect::{begin_holding_head, connect, open_schema};
use crate::guard::Guard;
use crate::pool::Pool;
use crate::runtime::off_runtime;
use crate::schema::{self, Namespace};
use crate::statements::{BEGIN_HOLDING_HEAD, Conn, IDENTITY, Q, STATEMENTS, Writing};
use crate::values::from_hex;

/// The PostgreSQL schema a store is in unless told otherwise.
pub const DEFAULT_NAMESPACE: &str = "bloom";

/// Per-session settings of every connection the store opens.
#[derive(Clone, Debug)]
pub struct Settings {
    /// `lock_timeout`: how long a writer waits for the head of the log (held by another
    /// writer's transaction) before failing.
    pub lock_timeout: Duration,
    /// `idle_in_transaction_session_timeout`: a writer stopped inside its transaction (a
    /// paused process, a lost machine whose connection lingers) loses it after this long, so
    /// the head it holds is freed for the others.
    pub idle_in_transaction_timeout: Duration,
    /// Whether an open replays the whole change log and checks every row's digest, the
    /// generations and the head ([`PostgresStore::verify_history`]): a table rewritten or
    /// edited with its guards off (by `ALTER TABLE … USING`, or with triggers disabled) is
    /// then refused instead of trusted. It reads every row once (about a second per million
    /// changes on a local server); turn it off for a store known to be intact.
    pub verify_history: bool,
    /// The most connections the store has open at once, lent out or idle (default 10). A
    /// caller that finds none free waits for one; a wrapper's claim holds one more of its
    /// own. Across a fleet, the sum of every process's must stay under the server's
    /// `max_connections` (default 100), less what other clients use.
    pub max_connections: usize,
    /// How long a caller waits for a free connection before failing with
    /// [`PostgresStoreError::PoolExhausted`] (default 30 s).
    pub pool_timeout: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            lock_timeout: Duration::from_secs(60),
            idle_in_transaction_timeout: Duration::from_secs(30),
            verify_history: true,
            max_connections: 10,
            pool_timeout: Duration::from_secs(30),
        }
    }
}

/// A primary store in PostgreSQL, shared by every process and machine that connects to it;
/// see the [crate documentation](crate) for the tables and the ordering of writers.
pub struct PostgresStore {
    pub(crate) config: postgres::Config,
    pub(crate) namespace: Namespace,
    pub(crate) identity: StoreIdentity,
    settings: Settings,
    sql: Vec<String>,
    /// The start of a writing transaction ([`BEGIN_HOLDING_HEAD`] in this namespace).
    begin: String,
    pool: Pool,
    /// The claim this store handed out, while it is held.
    claim: Mutex<std::sync::Weak<Claim>>,
    /// What ties the handle to the store it opened (its identity, the history it saw), and
    /// whether it was found replaced.
    pub(crate) guard: Arc<Guard>,
}

/// Where the store is, never how it logs in.
impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore")
            .field("hosts", &self.config.get_hosts())
            .field("ports", &self.config.get_ports())
            .field("dbname", &self.config.get_dbname())
            .field("user", &self.config.get_user())
            .field("namespace", &self.namespace.as_str())
            .field("identity", &self.identity)
            .finish_non_exhaustive()
    }
}

impl PostgresStore {
    /// The version of the store's tables this build writes, and the newest it reads (kept in
    /// `store_meta`; see `docs/postgres-schema.md`).
    pub const SCHEMA_VERSION: i64 = schema::SCHEMA_VERSION;

    /// Connects to the database `params` names (`postgresql://user@host:port/db` or
    /// `host=… port=… user=… dbname=…`, as libpq takes them; without TLS) and opens the
    /// store in the PostgreSQL schema `bloom`, creating it there if the schema does not
    /// exist or is empty.
    ///
    /// # Errors
    /// [`PostgresStoreError`]: the server's error, a store of a newer version, a schema
    /// holding someone else's tables, or a store whose tables or guards were changed.
    pub fn connect(params: &str) -> Result<Self, PostgresStoreError> {
        Self::connect_in(params, DEFAULT_NAMESPACE)
    }

    /// [`PostgresStore::connect`] with the store in the PostgreSQL schema `namespace` (so
    /// that one database can hold several stores).
    ///
    /// # Errors
    /// As [`PostgresStore::connect`], and [`PostgresStoreError::InvalidNamespace`].
    pub fn connect_in(params: &str, namespace: &str) -> Result<Self, PostgresStoreError> {
        let config: postgres::Config = params.parse()?;
        Self::open(config, namespace, Settings::default())
    }

    /// Opens the store with a connection configuration built by the caller, in the
    /// PostgreSQL schema `namespace`, with the session settings `settings`.
    ///
    /// # Errors
    /// As [`PostgresStore::connect_in`].
    pub fn open(
        config: postgres::Config,
        namespace: &str,
        settings: Settings,
    ) -> Result<Self, PostgresStoreError> {
        off_runtime(move || Self::open_here(config, namespace, settings))
    }

    fn open_here(
        mut config: postgres::Config,
        namespace: &str,
        settings: Settings,
    ) -> Result<Self, PostgresStoreError> {
        let namespace = Namespace::new(namespace)?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(Duration::from_secs(10));
        }
        if config.get_application_name().is_none() {
            config.application_name("bloom-postgres");
        }
        config.keepalives(true);
        config.keepalives_idle(Duration::from_secs(30));
        if config.get_tcp_user_timeout().is_none() {
            // A host that stops acknowledging (gone, cut off) fails the call in bounded time.
            config.tcp_user_timeout(Duration::from_secs(30));
        }
        // The store writes, and a standby would answer from a past state: the primary only.
        config.target_session_attrs(postgres::config::TargetSessionAttrs::ReadWrite);
        let sql = STATEMENTS
            .iter()
            .map(|s| namespace.sql(&s.replace("{identity}", IDENTITY)))
            .collect();
        let begin = namespace.sql(BEGIN_HOLDING_HEAD);
        let mut store = Self {
            begin,
            config,
            namespace,
            identity: StoreIdentity::from_bytes([0; 16]),
            pool: Pool::new(settings.max_connections, settings.pool_timeout),
            settings,
            sql,
            claim: Mutex::new(std::sync::Weak::new()),
            guard: Arc::new(Guard::new(StoreIdentity::from_bytes([0; 16]), "")),
        };
        let mut lease = store.pool.lease()?;
        let mut conn = match lease.conn.take() {
            Some(conn) => conn,
            None => store.connect_one()?,
        };
        let identity = open_schema(&mut conn.client, &store.namespace)?;
        lease.conn = Some(conn);
        drop(lease);
        store.identity = identity;
        store.guard = Arc::new(Guard::new(store.identity, store.namespace.as_str()));
        if store.settings.verify_history {
            store.verify_history()?;
        }
        // The point a claim checks the store against from now on.
        bloom_store::PrimaryStore::head(&store)?;
        Ok(store)
    }

    /// The PostgreSQL schema the store is in.
    #[must_use]
    pub fn namespace(&self) -> &str {
        self.namespace.as_str()
    }

    /// The number of keys in the store.
    ///
    /// # Errors
    /// The server's error.
    pub fn key_count(&self) -> Result<u64, PostgresStoreError> {
        let row = self.read_one(Q::KeyCount, &[])?;
        let count: i64 = crate::values::field(&row, 1, "the key count")?;
        Ok(u64::try_from(count).unwrap_or(0))
    }

    /// A wrapper's claim on this store ([`PrimaryStore::claim_wrapper`]): see the `claim`
    /// module.
    ///
    /// [`PrimaryStore::claim_wrapper`]: bloom_store::PrimaryStore::claim_wrapper
    pub(crate) fn claim(
        &self,
        kind: ClaimKind,
    ) -> Result<Option<bloom_store::StoreClaim>, PostgresStoreError> {
        self.guard.check()?;
        let Some((claim, holder)) = off_runtime(|| {
            Claim::take_new(&self.config, &self.namespace, Arc::clone(&self.guard), kind)
        })?
        else {
            return Ok(None);
        };
        *self.claim.lock().unwrap_or_else(PoisonError::into_inner) = Arc::downgrade(&claim);
        Ok(Some(
            bloom_store::StoreClaim::holding_while(holder, claim.watch.clone())
                .also_watching(self.guard.watch.clone()),
        ))
    }

    /// The claim this store handed out, while its holder keeps it.
    fn held_claim(&self) -> Option<std::sync::Arc<Claim>> {
        self.claim
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .upgrade()
    }

    fn claim_lost(&self, claim: &Claim) -> PostgresStoreError {
        PostgresStoreError::ClaimLost {
            namespace: self.namespace.as_str().to_owned(),
            why: match claim.watch.status() {
                bloom_store::ClaimStatus::Lost { why } => why,
                _ => "the claim ended".into(),
            },
        }
    }

    /// `Replaced` once the store was found replaced, `ClaimLost` once the claim this store
    /// handed out was taken by another wrapper.
    fn check_claim(&self) -> Result<(), PostgresStoreError> {
        self.guard.check()?;
        match self.held_claim() {
            Some(claim) if claim.is_lost() => Err(self.claim_lost(&claim)),
            _ => Ok(()),
        }
    }

    pub(crate) fn connect_one(&self) -> Result<Conn, PostgresStoreError> {
        let mut client = connect(&self.config)?;
        let settings = format!(
            "{} SET lock_timeout = {}; SET idle_in_transaction_session_timeout = {};",
            crate::connect::SESSION_SEARCH_PATH,
            self.settings.lock_timeout.as_millis().max(1),
            self.settings.idle_in_transaction_timeout.as_millis().max(1)
        );
        if self.identity.is_zero() {
            // The first connection, which opens the store and reads its identity.
            client.batch_execute(&settings)?;
        } else {
            // Every later one checks that the store is still the one opened: a database
            // dropped and recreated (or another store's backup restored) under a running
            // process must not be written with this store's history, nor answered for.
            let found = client
                .simple_query(&format!(
                    "{settings} SELECT encode(value, 'hex') FROM {}.store_meta WHERE name = 'identity'",
                    self.namespace.as_str()
                ))?
                .into_iter()
                .find_map(|message| match message {
                    postgres::SimpleQueryMessage::Row(row) => row.get(0).and_then(from_hex),
                    _ => None,
                });
            if found.as_deref() != Some(self.identity.to_bytes().as_slice()) {
                return Err(self.guard.replaced(match found {
                    Some(_) => "a new connection found another store in its place",
                    None => "a new connection found no store in its place",
                }));
            }
            // A new connection: the one before may have ended with a server restart, and
            // the claim's session with it. The claim is taken again first, so that a wrapper
            // that comes after the restart is the one refused.
            if let Some(claim) = self.held_claim()
                && !claim.renew_now()
            {
                return Err(self.claim_lost(&claim));
            }
        }
        Ok(Conn {
            client,
            prepared: Default::default(),
            wrote: false,
        })
    }

    /// Runs `f` on a connection of the pool (a new one when none is idle, once there is
    /// room: see [`Settings::max_connections`]). A connection that failed is not reused:
    /// after a server restart, the next call connects anew. Inside an async runtime, runs on
    /// a thread of its own (see the `runtime` module).
    pub(crate) fn with<T: Send>(
        &self,
        mut f: impl FnMut(&mut Conn) -> Result<T, PostgresStoreError> + Send,
    ) -> Result<T, PostgresStoreError> {
        self.check_claim()?;
        off_runtime(|| {
            let mut lease = self.pool.lease()?;
            let (mut conn, reused) = match lease.conn.take() {
                Some(conn) => (conn, true),
                None => (self.connect_one()?, false),
            };
            conn.wrote = false;
            let mut result = f(&mut conn);
            // A closed connection most likely means the server restarted: the idle ones are
            // gone too, and are dropped rather than each failing a caller once. A call that
            // failed on an idle connection found dead, before it began to write, did nothing:
            // it is run again once on a new connection (in the same place).
            if conn.client.is_closed() {
                self.pool.clear_idle();
                if result.is_err() && reused && !conn.wrote {
                    crate::runtime::drop_off_runtime(conn);
                    conn = self.connect_one()?;
                    result = f(&mut conn);
                }
            }
            // A connection whose call failed is kept unless it is closed (every writing
            // transaction is rolled back before an error leaves it).
            lease.conn = Some(conn);
            drop(lease);
            if let Err(PostgresStoreError::Replaced { why, .. }) = &result {
                // Found by a statement (its identity, or the head behind one seen): every
                // claim is lost with the store.
                let _ = self.guard.replaced(why.clone());
            }
            result
        })
    }

    /// Runs `f` in a READ COMMITTED transaction that first takes the head of the log
    /// `FOR UPDATE`, and commits when it returns `Ok(Some((_, head)))`, `head` being the
    /// head its appends made (recorded as seen once committed); `Ok(None)`: nothing to write,
    /// rolled back.
    ///
    /// The head is the one lock every append takes, first: writers in every process queue
    /// on it, so the log has one order, and each writer reads the head it extends (READ
    /// COMMITTED returns the newest committed row once the lock is granted; every later
    /// statement sees the commits before it).
    ///
    /// The commit waits for its write-ahead log to reach the disk while it still holds the
    /// head, so writers' commits are flushed one at a time. (Committing without waiting and
    /// then waiting in a transaction of its own would free the head sooner, but a
    /// transaction that writes nothing of its own is committed without a flush in
    /// PostgreSQL: the crash probe lost acknowledged keys that way.)
    pub(crate) fn with_head<T: Send>(
        &self,
        f: impl FnOnce(
            &mut Writing<'_, '_>,
            HistoryPoint,
        ) -> Result<Option<(T, HistoryPoint)>, PostgresStoreError>
        + Send,
    ) -> Result<Option<T>, PostgresStoreError> {
        let identity = self.identity;
        let sql = &self.sql;
        let begin = &self.begin;
        let mut f = Some(f);
        let floor = self.guard.floor();
        self.with(|conn| {
            let Conn {
                client,
                prepared,
                wrote,
            } = conn;
            let head = match begin_holding_head(client, begin, identity, &self.namespace)
                .and_then(|head| self.guard.saw_after(floor, head).map(|()| head))
            {
                Ok(head) => head,
                Err(e) => {
                    let _ = client.batch_execute("ROLLBACK");
                    return Err(e);
                }
            };
            *wrote = true;
            let Some(f) = f.take() else {
                let _ = client.batch_execute("ROLLBACK");
                return Err(PostgresStoreError::Damaged {
                    what: "a writing transaction",
                    detail: "run twice".into(),
                });
            };
            let mut writing = Writing {
                client,
                prepared,
                sql,
            };
            match f(&mut writing, head) {
                Ok(Some((done, after))) => {
                    // Between the commit and its record, the claim's check must not take the
                    // head it may read for someone else's.
                    let _committing = self.guard.committing();
                    crate::statements::timed("commit", || writing.client.batch_execute("COMMIT"))?;
                    self.guard.saw_after(floor, after)?;
                    Ok(Some(done))
                }
                Ok(None) => {
                    writing.client.batch_execute("ROLLBACK")?;
                    Ok(None)
                }
                Err(e) => {
                    let _ = writing.client.batch_execute("ROLLBACK");
                    Err(e)
                }
            }
        })
    }
}

/// Closes the idle connections: on a thread of its own inside an async runtime, where the
/// client's own runtime may not be dropped.
impl Drop for PostgresStore {
    fn drop(&mut self) {
        self.pool.clear_idle();
    }
}

impl PostgresStore {
    /// Runs statement `q` on a pooled connection.
    pub(crate) fn query(
        &self,
        q: Q,
        params: &[&(dyn postgres::types::ToSql + Sync)],
    ) -> Result<Vec<postgres::Row>, PostgresStoreError> {
        self.with(|conn| conn.query(&self.sql, q, params))
    }

    /// Runs a statement that returns one row whose first column is the identity of the
    /// store it ran on, and checks that identity.
    pub(crate) fn read_one(
        &self,
        q: Q,
        params: &[&(dyn postgres::types::ToSql + Sync)],
    ) -> Result<postgres::Row, PostgresStoreError> {
        let row = self.query(q, params)?.into_iter().next().ok_or_else(|| {
            PostgresStoreError::Damaged {
                what: "a statement of the store",
                detail: "it returned no row".into(),
            }
        })?;
        self.same_store(&row, 0)?;
        Ok(row)
    }

    /// `Replaced` unless column `i` of `row` is this store's identity.
    pub(crate) fn same_store(
        &self,
        row: &postgres::Row,
        i: usize,
    ) -> Result<(), PostgresStoreError> {
        let found: Option<&[u8]> = crate::values::field(row, i, "the store identity")?;
        if found == Some(self.identity.to_bytes().as_slice()) {
            Ok(())
        } else {
            Err(self
                .guard
                .replaced("a statement ran on another store in its place"))
        }
    }
}
