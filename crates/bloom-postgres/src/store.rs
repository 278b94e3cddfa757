//! [`PostgresStore`]: its connections, how it opens (creating or checking the tables), and
//! the statements it runs.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use postgres::{Client, IsolationLevel, NoTls, Statement};

use bloom_format::{DatasetGeneration, HistoryDigest, StoreIdentity};
use bloom_store::HistoryPoint;

use crate::PostgresStoreError;
use crate::schema::{self, CREATE_LOCK_CLASS, Namespace};

/// The PostgreSQL schema a store is in unless told otherwise.
pub const DEFAULT_NAMESPACE: &str = "bloom";

/// Idle connections kept for reuse.
const MAX_IDLE: usize = 16;

/// The statements of the store, by number (each connection prepares one the first time it
/// runs it).
#[derive(Clone, Copy)]
pub(crate) enum Q {
    /// `$1` key: whether it is in the store.
    Contains = 0,
    /// `$1` keys: the 1-based positions of those in the store, as one array.
    PresentOf,
    /// The head, read.
    Head,
    /// `$1` generation: its digest.
    HistoryAt,
    /// `$1` after, `$2` up to, `$3` limit: `seq, live insert, key`.
    KeysPage,
    /// `$1` after, `$2` up to, `$3` limit: `seq, kind, key, history, replayed`.
    ChangesPage,
    /// `$1` generations, `$2` keys, `$3` digests: inserts appended, but for keys in the
    /// store; the generations of those appended returned.
    Append,
    /// `$1` key: the generation of its live insert.
    LiveInsert,
    /// `$1` seq, `$2` key, `$3` digest, `$4` undone insert: a removal appended.
    AppendRemoval,
    /// `$1` removal, `$2` insert: the insert marked removed.
    MarkRemoved,
    /// `$1` value: the key encoding recorded unless one is.
    ClaimEncoding,
    /// The key encoding recorded.
    Encoding,
    /// The number of keys in the store.
    KeyCount,
    /// The head's generation and the largest in the log, read together.
    LastSeq,
}

/// The identity of the store the statement ran on: every read returns it, so that a store
/// replaced under a running process (the schema dropped and made again by another store,
/// whose tables PostgreSQL silently re-plans a prepared statement against) is never
/// answered for.
const IDENTITY: &str = "(SELECT value FROM {ns}.store_meta WHERE name = 'identity')";

const STATEMENTS: [&str; 14] = [
    // Keys of up to 2,000 bytes are indexed as they are, longer ones by their SHA-256
    // (a B-tree entry holds about 2,700 bytes): each lookup asks both indexes.
    "SELECT {identity}, EXISTS (SELECT 1 FROM {ns}.changes
             WHERE key = $1::bytea AND kind = 1 AND removed_at IS NULL AND octet_length(key) <= 2000)
         OR EXISTS (SELECT 1 FROM {ns}.changes
             WHERE sha256(key) = sha256($1::bytea) AND key = $1::bytea AND kind = 1
               AND removed_at IS NULL AND octet_length(key) > 2000)",
    // A lateral probe with LIMIT 1 per key: one index lookup each, whatever the planner
    // guesses of the array's length (a semi-join would hash the whole log).
    "SELECT {identity}, ARRAY(SELECT k.i FROM unnest($1::bytea[]) WITH ORDINALITY AS k(key, i)
     CROSS JOIN LATERAL (
         (SELECT 1 FROM {ns}.changes c
          WHERE c.key = k.key AND c.kind = 1 AND c.removed_at IS NULL AND octet_length(c.key) <= 2000)
         UNION ALL
         (SELECT 1 FROM {ns}.changes c
          WHERE sha256(c.key) = sha256(k.key) AND c.key = k.key AND c.kind = 1
            AND c.removed_at IS NULL AND octet_length(c.key) > 2000)
         LIMIT 1) AS hit)",
    "SELECT {identity}, seq, history FROM {ns}.head",
    "SELECT {identity}, (SELECT history FROM {ns}.changes WHERE seq = $1)",
    "SELECT seq, kind = 1 AND removed_at IS NULL, key, {identity} FROM {ns}.changes
     WHERE seq > $1 AND seq <= $2 ORDER BY seq LIMIT $3",
    "SELECT c.seq, c.kind, c.key, c.history,
         c.kind = 1 OR EXISTS (SELECT 1 FROM {ns}.changes i
             WHERE i.seq = c.undoes AND i.removed_at = c.seq AND i.key = c.key),
         {identity}
     FROM {ns}.changes c WHERE c.seq > $1 AND c.seq <= $2 ORDER BY c.seq LIMIT $3",
    // Every column given: a default added by hand cannot change what a row means.
    "INSERT INTO {ns}.changes (seq, kind, key, history, removed_at, undoes)
     SELECT s, 1, k, h, NULL, NULL FROM unnest($1::int8[], $2::bytea[], $3::bytea[]) AS t(s, k, h)
     ON CONFLICT DO NOTHING
     RETURNING seq",
    "SELECT {identity}, (SELECT seq FROM (
         (SELECT seq FROM {ns}.changes
          WHERE key = $1::bytea AND kind = 1 AND removed_at IS NULL AND octet_length(key) <= 2000)
         UNION ALL
         (SELECT seq FROM {ns}.changes
          WHERE sha256(key) = sha256($1::bytea) AND key = $1::bytea AND kind = 1
            AND removed_at IS NULL AND octet_length(key) > 2000)) AS live LIMIT 1)",
    "INSERT INTO {ns}.changes (seq, kind, key, history, removed_at, undoes)
     VALUES ($1, 2, $2, $3, NULL, $4)",
    "UPDATE {ns}.changes SET removed_at = $1 WHERE seq = $2",
    "INSERT INTO {ns}.store_meta (name, value) VALUES ('key_encoding', convert_to($1, 'UTF8'))
     ON CONFLICT (name) DO NOTHING",
    "SELECT {identity}, (SELECT convert_from(value, 'UTF8') FROM {ns}.store_meta WHERE name = 'key_encoding')",
    "SELECT {identity}, count(*) FROM {ns}.changes WHERE kind = 1 AND removed_at IS NULL",
    "SELECT {identity}, h.seq, (SELECT max(seq) FROM {ns}.changes) FROM {ns}.head h",
];

/// A connection of the pool, with the statements it prepared.
pub(crate) struct Conn {
    pub(crate) client: Client,
    prepared: [Option<Statement>; STATEMENTS.len()],
}

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
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            lock_timeout: Duration::from_secs(60),
            idle_in_transaction_timeout: Duration::from_secs(30),
            verify_history: true,
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
    idle: Mutex<Vec<Conn>>,
    /// The claim this store handed out, while it is held.
    claim: Mutex<std::sync::Weak<Claim>>,
}

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
        let granted: bool = crate::primary::field(
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
    fn renew(&self) -> bool {
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
        let mut store = Self {
            config,
            namespace,
            identity: StoreIdentity::from_bytes([0; 16]),
            settings,
            sql,
            idle: Mutex::new(Vec::new()),
            claim: Mutex::new(std::sync::Weak::new()),
        };
        let mut conn = store.connect_one()?;
        store.identity = open_schema(&mut conn.client, &store.namespace)?;
        store.put_back(conn);
        if store.settings.verify_history {
            store.verify_history()?;
        }
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
        let count: i64 = crate::primary::field(&row, 1, "the key count")?;
        Ok(u64::try_from(count).unwrap_or(0))
    }

    /// A new connection, with the store's session settings.
    /// The claim of one wrapper on this store ([`PrimaryStore::claim_wrapper`]), with a
    /// heartbeat that notices a server restart within about a second and takes the lock
    /// again (or gives the claim up, when another wrapper took it).
    ///
    /// [`PrimaryStore::claim_wrapper`]: bloom_store::PrimaryStore::claim_wrapper
    pub(crate) fn claim(&self) -> Result<Option<bloom_store::StoreClaim>, PostgresStoreError> {
        let claim = std::sync::Arc::new(Claim {
            client: Mutex::new(None),
            valid: std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true)),
            config: self.config.clone(),
            name: format!("{}:{}", self.namespace.as_str(), self.identity),
        });
        if !claim.take()? {
            return Ok(None);
        }
        *self.claim.lock().unwrap_or_else(PoisonError::into_inner) =
            std::sync::Arc::downgrade(&claim);
        let watched = std::sync::Arc::downgrade(&claim);
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
        let valid = std::sync::Arc::clone(&claim.valid);
        Ok(Some(bloom_store::StoreClaim::holding_while(claim, valid)))
    }

    /// `ClaimLost` once the claim this store handed out was taken by another wrapper.
    fn check_claim(&self) -> Result<(), PostgresStoreError> {
        let claim = self
            .claim
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .upgrade();
        match claim {
            Some(claim) if !claim.valid.load(std::sync::atomic::Ordering::Acquire) => {
                Err(PostgresStoreError::ClaimLost {
                    namespace: self.namespace.as_str().to_owned(),
                })
            }
            _ => Ok(()),
        }
    }

    /// When a new connection is made while a claim is held: the claim's connection may have
    /// ended with the one before (a server restart), and is renewed at once.
    fn renew_claim(&self) -> Result<(), PostgresStoreError> {
        let claim = self
            .claim
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .upgrade();
        if let Some(claim) = claim {
            claim.renew();
        }
        self.check_claim()
    }

    pub(crate) fn connect_one(&self) -> Result<Conn, PostgresStoreError> {
        preflight(&self.config)?;
        let mut client = self.config.connect(NoTls)?;
        let settings = format!(
            "SET lock_timeout = {}; SET idle_in_transaction_session_timeout = {};",
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
                return Err(PostgresStoreError::Replaced {
                    namespace: self.namespace.as_str().to_owned(),
                });
            }
        }
        self.renew_claim()?;
        Ok(Conn {
            client,
            prepared: Default::default(),
        })
    }

    fn put_back(&self, conn: Conn) {
        if conn.client.is_closed() {
            return;
        }
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        if idle.len() < MAX_IDLE {
            idle.push(conn);
        }
    }

    /// Runs `f` on a connection of the pool (a new one when none is idle). A connection that
    /// failed is not reused: after a server restart, the next call connects anew.
    pub(crate) fn with<T>(
        &self,
        f: impl FnOnce(&mut Conn) -> Result<T, PostgresStoreError>,
    ) -> Result<T, PostgresStoreError> {
        self.check_claim()?;
        let pooled = self
            .idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        let mut conn = match pooled {
            Some(conn) if !conn.client.is_closed() => conn,
            _ => self.connect_one()?,
        };
        let result = f(&mut conn);
        // A connection whose call failed is kept unless it is closed (every writing
        // transaction is rolled back before an error leaves it). A closed one most likely
        // means the server restarted: the idle ones are gone too, and are dropped rather
        // than each failing a caller once.
        if conn.client.is_closed() {
            self.idle
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clear();
        }
        self.put_back(conn);
        result
    }

    /// Runs `f` in a READ COMMITTED transaction that first takes the head of the log
    /// `FOR UPDATE`, and commits when it returns `Ok(Some(_))` (`Ok(None)`: nothing to
    /// write, rolled back).
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
    pub(crate) fn with_head<T>(
        &self,
        f: impl FnOnce(&mut Writing<'_, '_>, HistoryPoint) -> Result<Option<T>, PostgresStoreError>,
    ) -> Result<Option<T>, PostgresStoreError> {
        let identity = self.identity;
        let sql = &self.sql;
        let begin = self.namespace.sql(
            "BEGIN ISOLATION LEVEL READ COMMITTED;
             SELECT h.seq, encode(h.history, 'hex'), encode(m.value, 'hex')
             FROM {ns}.head h, {ns}.store_meta m WHERE m.name = 'identity' FOR UPDATE OF h",
        );
        self.with(|conn| {
            let Conn { client, prepared } = conn;
            let head = match begin_holding_head(client, &begin, identity, &self.namespace) {
                Ok(head) => head,
                Err(e) => {
                    let _ = client.batch_execute("ROLLBACK");
                    return Err(e);
                }
            };
            let mut writing = Writing {
                client,
                prepared,
                sql,
            };
            match f(&mut writing, head) {
                Ok(Some(done)) => {
                    writing.client.batch_execute("COMMIT")?;
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

/// Starts the writing transaction and takes the head, in one round trip.
fn begin_holding_head(
    client: &mut Client,
    begin: &str,
    identity: StoreIdentity,
    namespace: &Namespace,
) -> Result<HistoryPoint, PostgresStoreError> {
    let missing = || PostgresStoreError::Damaged {
        what: "the head of the change log",
        detail: "missing".into(),
    };
    let row = client
        .simple_query(begin)?
        .into_iter()
        .find_map(|message| match message {
            postgres::SimpleQueryMessage::Row(row) => Some(row),
            _ => None,
        })
        .ok_or_else(missing)?;
    let seq: i64 = row
        .get(0)
        .and_then(|s| s.parse().ok())
        .ok_or_else(missing)?;
    let digest = row.get(1).and_then(from_hex).ok_or_else(missing)?;
    // Another store in its place (recreated, or restored from another's backup) is never
    // written with this one's history.
    if row.get(2).and_then(from_hex).as_deref() != Some(identity.to_bytes().as_slice()) {
        return Err(PostgresStoreError::Replaced {
            namespace: namespace.as_str().to_owned(),
        });
    }
    point(identity, seq, &digest)
}

fn from_hex(text: &str) -> Option<Vec<u8>> {
    let digit = |c: u8| (c as char).to_digit(16).and_then(|d| u8::try_from(d).ok());
    text.as_bytes()
        .chunks(2)
        .map(|pair| match pair {
            [hi, lo] => Some(digit(*hi)? << 4 | digit(*lo)?),
            _ => None,
        })
        .collect()
}

/// Asks every TCP host of `config` whether it speaks PostgreSQL (an `SSLRequest`, which a
/// server answers with one byte at once), within the connect timeout: the client's own
/// timeout covers only the TCP connection, and a listener that never answers (another
/// service on the port, a stalled proxy) would hang the startup without bound. Passes when
/// one host answers, or when the hosts are Unix sockets.
fn preflight(config: &postgres::Config) -> Result<(), PostgresStoreError> {
    use std::io::{Read as _, Write as _};
    use std::net::ToSocketAddrs as _;
    let timeout = config
        .get_connect_timeout()
        .copied()
        .unwrap_or(Duration::from_secs(10));
    let ports = config.get_ports();
    let mut last = None;
    for (i, host) in config.get_hosts().iter().enumerate() {
        let postgres::config::Host::Tcp(name) = host else {
            return Ok(());
        };
        let port = ports.get(i).or(ports.first()).copied().unwrap_or(5432);
        let asked = (|| -> std::io::Result<u8> {
            let address = (name.as_str(), port)
                .to_socket_addrs()?
                .next()
                .ok_or_else(|| std::io::Error::other("the host name has no address"))?;
            let mut stream = std::net::TcpStream::connect_timeout(&address, timeout)?;
            stream.set_read_timeout(Some(timeout))?;
            stream.set_write_timeout(Some(timeout))?;
            // Length 8, then the SSLRequest code 80877103.
            stream.write_all(&[0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f])?;
            let mut answer = [0u8];
            stream.read_exact(&mut answer)?;
            Ok(answer[0])
        })();
        match asked {
            Ok(b'N' | b'S') => return Ok(()),
            Ok(other) => {
                last = Some(format!(
                    "{name}:{port} answered {other:#04x}, not as PostgreSQL does"
                ))
            }
            Err(e) => last = Some(format!("{name}:{port}: {e}")),
        }
    }
    match last {
        None => Ok(()),
        Some(detail) => Err(PostgresStoreError::Unreachable(detail)),
    }
}

/// The newest point of the history read from the head row.
pub(crate) fn point(
    identity: StoreIdentity,
    seq: i64,
    digest: &[u8],
) -> Result<HistoryPoint, PostgresStoreError> {
    let generation = from_seq(seq);
    if generation == DatasetGeneration::ZERO
        && digest16(digest)? != bloom_store::history::genesis(identity)
    {
        return Err(PostgresStoreError::Damaged {
            what: "the head of the change log",
            detail: "its digest at generation 0 is not this store's".into(),
        });
    }
    Ok(HistoryPoint {
        generation,
        digest: digest16(digest)?,
    })
}

pub(crate) fn digest16(bytes: &[u8]) -> Result<HistoryDigest, PostgresStoreError> {
    <[u8; 16]>::try_from(bytes)
        .map(HistoryDigest::from_bytes)
        .map_err(|_| PostgresStoreError::Damaged {
            what: "a history digest",
            detail: format!("{} bytes, expected 16", bytes.len()),
        })
}

pub(crate) fn to_seq(generation: DatasetGeneration) -> i64 {
    i64::try_from(generation.get()).unwrap_or(i64::MAX)
}

pub(crate) fn from_seq(seq: i64) -> DatasetGeneration {
    DatasetGeneration::new(u64::try_from(seq).unwrap_or(0))
}

/// Reads the store's tables, creating them when there are none (under a transaction-level
/// advisory lock, so that processes opening a new store at once create it once), and checks
/// them. Returns the identity.
fn open_schema(client: &mut Client, ns: &Namespace) -> Result<StoreIdentity, PostgresStoreError> {
    // A name PostgreSQL would need quoted (a reserved word such as `user`) is refused: the
    // store's SQL writes it bare.
    let quoted: String = client
        .query_one("SELECT quote_ident($1)", &[&ns.as_str()])?
        .get(0);
    if quoted != ns.as_str() {
        return Err(PostgresStoreError::InvalidNamespace(ns.as_str().to_owned()));
    }
    {
        let mut tx = client
            .build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()?;
        let state = schema::read_state(&mut tx, ns)?;
        if state.is_created() {
            let identity = schema::check(&mut tx, ns, &state)?;
            tx.commit()?;
            return Ok(identity);
        }
    }
    let mut tx = client
        .build_transaction()
        .isolation_level(IsolationLevel::ReadCommitted)
        .start()?;
    tx.execute(
        "SELECT pg_advisory_xact_lock($1, hashtext($2))",
        &[&CREATE_LOCK_CLASS, &ns.as_str()],
    )?;
    let state = schema::read_state(&mut tx, ns)?;
    let identity = if state.is_created() {
        schema::check(&mut tx, ns, &state)?
    } else {
        schema::create(&mut tx, ns, &state)?
    };
    tx.commit()?;
    Ok(identity)
}

impl Conn {
    fn statement(&mut self, sql: &[String], q: Q) -> Result<Statement, PostgresStoreError> {
        prepare(&mut self.client, &mut self.prepared, sql, q)
    }

    pub(crate) fn query(
        &mut self,
        sql: &[String],
        q: Q,
        params: &[&(dyn postgres::types::ToSql + Sync)],
    ) -> Result<Vec<postgres::Row>, PostgresStoreError> {
        let statement = self.statement(sql, q)?;
        Ok(self.client.query(&statement, params)?)
    }
}

fn prepare(
    client: &mut impl postgres::GenericClient,
    prepared: &mut [Option<Statement>],
    sql: &[String],
    q: Q,
) -> Result<Statement, PostgresStoreError> {
    let slot = &mut prepared[q as usize];
    if let Some(statement) = slot {
        return Ok(statement.clone());
    }
    let statement = client.prepare(&sql[q as usize])?;
    *slot = Some(statement.clone());
    Ok(statement)
}

/// A writing transaction that holds the head of the log (on a connection inside `BEGIN`).
pub(crate) struct Writing<'c, 's> {
    client: &'c mut Client,
    prepared: &'c mut [Option<Statement>; STATEMENTS.len()],
    sql: &'s [String],
}

impl Writing<'_, '_> {
    pub(crate) fn query(
        &mut self,
        q: Q,
        params: &[&(dyn postgres::types::ToSql + Sync)],
    ) -> Result<Vec<postgres::Row>, PostgresStoreError> {
        let statement = prepare(self.client, self.prepared, self.sql, q)?;
        Ok(self.client.query(&statement, params)?)
    }

    pub(crate) fn execute(
        &mut self,
        q: Q,
        params: &[&(dyn postgres::types::ToSql + Sync)],
    ) -> Result<u64, PostgresStoreError> {
        let statement = prepare(self.client, self.prepared, self.sql, q)?;
        Ok(self.client.execute(&statement, params)?)
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
        let found: Option<&[u8]> = crate::primary::field(row, i, "the store identity")?;
        if found == Some(self.identity.to_bytes().as_slice()) {
            Ok(())
        } else {
            Err(PostgresStoreError::Replaced {
                namespace: self.namespace.as_str().to_owned(),
            })
        }
    }
}
