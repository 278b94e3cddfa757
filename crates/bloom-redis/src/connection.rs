//! [`RedisTarget`]: where a filter lives (one Redis server, a Redis Cluster, or the master a
//! set of Sentinels names), and the connection that sends its commands, owned by a worker
//! thread so that every operation ends by one deadline, retries and reconnects included.

use std::fmt;
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use redis::Value;

use crate::error::RedisFilterError;
use crate::module::ModuleUse;
use crate::node::NodeIdentity;
use crate::transport::{Replies, Topology, Transport, parse_urls};
use crate::wire::Commands;

/// The default deadline of an operation (a whole call of the filter: every command, batch,
/// retry and reconnect it makes).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Clone)]
enum Kind {
    Single,
    Cluster,
    Sentinel { master: String },
}

/// A Redis server, cluster or Sentinel-managed master to hold filters. Its `Debug` form never
/// shows the URLs, which may carry passwords.
#[derive(Clone)]
pub struct RedisTarget {
    urls: Vec<String>,
    kind: Kind,
    timeout: Duration,
    deadline: Option<Instant>,
    tls_ca: Option<Vec<u8>>,
    module: ModuleUse,
}

impl fmt::Debug for RedisTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match &self.kind {
            Kind::Single => "single",
            Kind::Cluster => "cluster",
            Kind::Sentinel { .. } => "sentinel",
        };
        f.debug_struct("RedisTarget")
            .field("nodes", &self.urls.len())
            .field("kind", &kind)
            .field("timeout", &self.timeout)
            .field("tls_ca", &self.tls_ca.is_some())
            .field("module", &self.module)
            .finish_non_exhaustive()
    }
}

impl RedisTarget {
    /// One Redis server, by URL: `redis://[user:password@]host:port/db`, or `rediss://` for
    /// TLS (with the `tls` feature; certificates are verified against the system's roots, or
    /// [`RedisTarget::with_tls_ca`]).
    #[must_use]
    pub fn single(url: impl Into<String>) -> Self {
        Self::new(vec![url.into()], Kind::Single)
    }

    /// A Redis Cluster, reached through any of its nodes (URLs); the rest are discovered, and
    /// their credentials and TLS are those of the first URL.
    #[must_use]
    pub fn cluster(urls: impl IntoIterator<Item = impl Into<String>>) -> Self {
        Self::new(urls.into_iter().map(Into::into).collect(), Kind::Cluster)
    }

    /// The master that Redis Sentinels (by URL, any of them) name `master`; the master is
    /// reached with the first URL's credentials and TLS (and its database), and looked up
    /// again when its connection fails (a failover).
    #[must_use]
    pub fn sentinel(
        sentinels: impl IntoIterator<Item = impl Into<String>>,
        master: impl Into<String>,
    ) -> Self {
        Self::new(
            sentinels.into_iter().map(Into::into).collect(),
            Kind::Sentinel {
                master: master.into(),
            },
        )
    }

    fn new(urls: Vec<String>, kind: Kind) -> Self {
        Self {
            urls,
            kind,
            timeout: DEFAULT_TIMEOUT,
            deadline: None,
            tls_ca: None,
            module: ModuleUse::Auto,
        }
    }

    /// Whether filters through this target use the `bloom` Redis module's commands, which
    /// hash keys inside the server (see [`ModuleUse`]; the default is
    /// [`ModuleUse::Auto`]).
    #[must_use]
    pub fn with_module(mut self, module: ModuleUse) -> Self {
        self.module = module;
        self
    }

    /// Whether filters through this target use the `bloom` Redis module.
    #[must_use]
    pub fn module(&self) -> ModuleUse {
        self.module
    }

    /// The deadline of each operation (default [`DEFAULT_TIMEOUT`], at least 1 ms, at most a
    /// day): one call of the filter ends by it, every batch, retry, redirect and reconnect
    /// included, with [`RedisFilterError::Timeout`] if it is not done; the connection is then
    /// dropped (the next operation makes a new one), so a server that stops answering never
    /// hangs a caller.
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout.clamp(Duration::from_millis(1), Duration::from_secs(86_400));
        self
    }

    /// A deadline for every operation through this target, whatever each one's timeout: a
    /// command-line tool gives its whole run one deadline this way.
    #[must_use]
    pub fn with_deadline(mut self, deadline: Instant) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// Trusts the certificate authority in `pem` (PEM) for `rediss://` servers, instead of
    /// the system's roots.
    #[must_use]
    pub fn with_tls_ca(mut self, pem: Vec<u8>) -> Self {
        self.tls_ca = Some(pem);
        self
    }

    /// [`RedisTarget::with_tls_ca`] with the PEM file at `path` (read at most 1 MiB).
    ///
    /// # Errors
    /// [`RedisFilterError::TlsCa`] when the file cannot be read or is too large.
    pub fn with_tls_ca_file(self, path: impl AsRef<Path>) -> Result<Self, RedisFilterError> {
        let path = path.as_ref();
        use std::io::Read as _;
        let mut pem = Vec::new();
        std::fs::File::open(path)
            .and_then(|f| f.take(1 << 20 | 1).read_to_end(&mut pem))
            .map_err(|e| RedisFilterError::TlsCa(format!("{}: {e}", path.display())))?;
        if pem.len() > 1 << 20 {
            return Err(RedisFilterError::TlsCa(format!(
                "{}: over 1 MiB, not a CA file",
                path.display()
            )));
        }
        Ok(self.with_tls_ca(pem))
    }

    /// The timeout.
    #[must_use]
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Whether this is a cluster.
    #[must_use]
    pub fn is_cluster(&self) -> bool {
        matches!(self.kind, Kind::Cluster)
    }

    /// The deadline of an operation starting now.
    pub(crate) fn deadline_from_now(&self) -> Instant {
        let own = Instant::now() + self.timeout;
        self.deadline.map_or(own, |d| d.min(own))
    }

    fn topology(&self) -> Result<Topology, RedisFilterError> {
        let infos = parse_urls(&self.urls)?;
        if infos.is_empty() {
            return Err(RedisFilterError::Protocol("the target has no URL".into()));
        }
        Ok(match &self.kind {
            Kind::Single => Topology::Single(
                infos
                    .into_iter()
                    .next()
                    .ok_or_else(|| RedisFilterError::Protocol("the target has no URL".into()))?,
            ),
            Kind::Cluster => Topology::Cluster(infos),
            Kind::Sentinel { master } => {
                // The Sentinels are reached with each URL's credentials and TLS (not its db:
                // a Sentinel has none); the master with the first URL's, db included.
                let template = infos[0].clone();
                Topology::Sentinel {
                    sentinels: infos,
                    master: master.clone(),
                    template,
                }
            }
        })
    }

    /// Connects (within the timeout).
    pub(crate) fn connect(&self) -> Result<Conn, RedisFilterError> {
        let mut conn = Conn {
            target: self.clone(),
            worker: None,
            workers: 0,
        };
        conn.ensure_worker()?;
        // Reach a node now, so that a target with nothing behind it fails at once.
        conn.query(&[b"PING"], None)?;
        Ok(conn)
    }
}

type Job = Box<dyn FnOnce(&mut Transport) + Send>;

/// A thread that owns the transport and runs operations on it, so that the caller can give up
/// on one at its deadline (a thread stuck on a socket or a name lookup is abandoned, and ends
/// with its socket's own timeouts).
struct Worker {
    jobs: mpsc::Sender<Job>,
    /// Which worker of its connection this is (each new one counts up).
    generation: u64,
}

impl Worker {
    fn start(target: &RedisTarget, generation: u64) -> Result<Self, RedisFilterError> {
        let mut transport =
            Transport::new(target.topology()?, target.tls_ca.clone(), target.timeout);
        let (jobs, queue) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("bloom-redis".into())
            .spawn(move || {
                while let Ok(job) = queue.recv() {
                    job(&mut transport);
                }
            })
            .map_err(|e| RedisFilterError::Protocol(format!("cannot start a thread: {e}")))?;
        Ok(Self { jobs, generation })
    }
}

/// An operation on its way: its reply, and the deadline it must come by.
pub(crate) struct Pending<T> {
    reply: mpsc::Receiver<Result<T, RedisFilterError>>,
    deadline: Instant,
}

/// A pipeline sent, its replies not read yet. Dropped unfinished, its replies are read and
/// dropped by the worker.
pub(crate) struct PendingPipeline {
    id: Option<mpsc::Receiver<u64>>,
    jobs: mpsc::Sender<Job>,
    /// The worker that began it.
    generation: u64,
}

impl Drop for PendingPipeline {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            let job: Job = Box::new(move |transport| {
                if let Ok(id) = id.try_recv() {
                    transport.abandon(id);
                }
            });
            let _ = self.jobs.send(job);
        }
    }
}

/// A connection to a [`RedisTarget`].
pub(crate) struct Conn {
    target: RedisTarget,
    worker: Option<Worker>,
    /// Workers started so far.
    workers: u64,
}

impl Conn {
    fn ensure_worker(&mut self) -> Result<(), RedisFilterError> {
        if self.worker.is_none() {
            self.workers += 1;
            self.worker = Some(Worker::start(&self.target, self.workers)?);
        }
        Ok(())
    }

    /// Runs `operation` on the transport, by `deadline`.
    pub(crate) fn run<T: Send + 'static>(
        &mut self,
        deadline: Instant,
        operation: impl FnOnce(&mut Transport, Instant) -> Result<T, RedisFilterError> + Send + 'static,
    ) -> Result<T, RedisFilterError> {
        // Measured here, on the caller's thread: its span and the recorder it sees.
        let _span = tracing::debug_span!(target: "bloom", "bloom.redis.round_trip").entered();
        let started = Instant::now();
        let result = self
            .start(deadline, operation)
            .and_then(|pending| self.finish(pending));
        measured(started, result.as_ref().err());
        result
    }

    /// Hands `operation` to the worker and returns at once: the caller prepares its next
    /// batch while this one is on the wire, then [`Conn::finish`]es it. Operations run in
    /// the order they were started.
    pub(crate) fn start<T: Send + 'static>(
        &mut self,
        deadline: Instant,
        operation: impl FnOnce(&mut Transport, Instant) -> Result<T, RedisFilterError> + Send + 'static,
    ) -> Result<Pending<T>, RedisFilterError> {
        self.ensure_worker()?;
        let (reply_tx, reply_rx) = mpsc::sync_channel(1);
        let job: Job = Box::new(move |transport| {
            let _ = reply_tx.send(operation(transport, deadline));
        });
        let sent = self
            .worker
            .as_ref()
            .is_some_and(|worker| worker.jobs.send(job).is_ok());
        if !sent {
            self.worker = None;
            return Err(RedisFilterError::Protocol(
                "the connection ended; the next operation reconnects".into(),
            ));
        }
        Ok(Pending {
            reply: reply_rx,
            deadline,
        })
    }

    /// Waits for an operation [`Conn::start`]ed, by its deadline.
    pub(crate) fn finish<T>(&mut self, pending: Pending<T>) -> Result<T, RedisFilterError> {
        let timeout = self.target.timeout;
        let left = pending.deadline.saturating_duration_since(Instant::now());
        match pending.reply.recv_timeout(left) {
            Ok(result) => {
                if matches!(result, Err(RedisFilterError::Timeout { .. })) {
                    // Its sockets may hold half an exchange: start afresh.
                    self.worker = None;
                }
                result
            }
            Err(_) => {
                // Give up on this worker: its thread may be stuck on a socket.
                self.worker = None;
                Err(RedisFilterError::Timeout { timeout })
            }
        }
    }

    /// Sends a pipeline (command `i` routed by `keys[i]`) and returns before its replies are
    /// read: the caller prepares the next batch, sends it too, then
    /// [`Conn::finish_pipeline`]s this one, so that the server always has work queued.
    pub(crate) fn start_pipeline(
        &mut self,
        commands: Commands,
        keys: Vec<Vec<u8>>,
        deadline: Instant,
    ) -> Result<PendingPipeline, RedisFilterError> {
        let (id_tx, id) = mpsc::sync_channel(1);
        let started = self
            .start(deadline, move |transport, deadline| {
                let _ = id_tx.send(transport.begin(commands, keys, deadline));
                Ok(())
            })
            .inspect_err(|e| measured(Instant::now(), Some(e)))?;
        let (jobs, generation) = self
            .worker
            .as_ref()
            .map(|worker| (worker.jobs.clone(), worker.generation))
            .ok_or_else(|| RedisFilterError::Protocol("the connection ended".into()))?;
        drop(started);
        Ok(PendingPipeline {
            id: Some(id),
            jobs,
            generation,
        })
    }

    /// The replies of a pipeline [`Conn::start_pipeline`]ed, by `deadline`, with the live
    /// connections and who their nodes are once they were read (as [`Conn::live`] would say
    /// then, without a round trip of its own to the worker).
    pub(crate) fn finish_pipeline(
        &mut self,
        mut pending: PendingPipeline,
        deadline: Instant,
    ) -> Result<(Replies, Vec<(u64, NodeIdentity)>), RedisFilterError> {
        let id = pending.id.take();
        // Not on the worker that began it (it was dropped after a timeout): nothing to read.
        let same_worker = self
            .worker
            .as_ref()
            .is_some_and(|worker| worker.generation == pending.generation);
        if !same_worker {
            let timed_out = RedisFilterError::Timeout {
                timeout: self.target.timeout,
            };
            measured(Instant::now(), Some(&timed_out));
            return Err(timed_out);
        }
        self.run(deadline, move |transport, deadline| {
            let id = id
                .and_then(|id| id.try_recv().ok())
                .ok_or_else(|| RedisFilterError::Protocol("a pipeline was lost".into()))?;
            let replies = transport.end(id, deadline)?;
            Ok((replies, transport.live()))
        })
    }

    /// One command (routed by `key`, or to any node), within one operation's deadline.
    pub(crate) fn query(
        &mut self,
        args: &[&[u8]],
        key: Option<&[u8]>,
    ) -> Result<Value, RedisFilterError> {
        let deadline = self.target.deadline_from_now();
        self.query_by(args, key, deadline).map(|(value, _)| value)
    }

    /// One command by `deadline`, with the serial of the connection that answered.
    pub(crate) fn query_by(
        &mut self,
        args: &[&[u8]],
        key: Option<&[u8]>,
        deadline: Instant,
    ) -> Result<(Value, u64), RedisFilterError> {
        let args: Vec<Vec<u8>> = args.iter().map(|a| a.to_vec()).collect();
        let key = key.map(<[u8]>::to_vec);
        self.run(deadline, move |transport, deadline| {
            let args: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
            let (value, serial) = transport.query(&args, key.as_deref(), deadline)?;
            Ok((server_error(value)?, serial))
        })
    }

    /// Commands pipelined (command `i` routed by `keys[i]`), by `deadline`.
    pub(crate) fn pipeline_by(
        &mut self,
        commands: Commands,
        keys: Vec<Vec<u8>>,
        deadline: Instant,
    ) -> Result<Replies, RedisFilterError> {
        if commands.len() == 0 {
            return Ok(Replies {
                values: Vec::new(),
                answered_by: Vec::new(),
            });
        }
        self.run(deadline, move |transport, deadline| {
            transport.pipeline(commands, keys, deadline)
        })
    }

    /// One command on the connection `serial`, by `deadline`.
    pub(crate) fn query_on(
        &mut self,
        serial: u64,
        args: &[&[u8]],
        deadline: Instant,
    ) -> Result<Value, RedisFilterError> {
        let args: Vec<Vec<u8>> = args.iter().map(|a| a.to_vec()).collect();
        self.run(deadline, move |transport, deadline| {
            let args: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
            server_error(transport.query_on(serial, &args, deadline)?)
        })
    }

    /// The live connections and who their nodes are.
    pub(crate) fn live(
        &mut self,
        deadline: Instant,
    ) -> Result<Vec<(u64, NodeIdentity)>, RedisFilterError> {
        self.run(deadline, |transport, _| Ok(transport.live()))
    }

    /// `CLUSTER NODES`, from any node.
    pub(crate) fn cluster_nodes(&mut self, deadline: Instant) -> Result<String, RedisFilterError> {
        self.run(deadline, |transport, deadline| {
            transport.cluster_nodes(deadline)
        })
    }
}

/// An error reply as an error (`NOPERM` named as a permission the user lacks).
pub(crate) fn server_error(value: Value) -> Result<Value, RedisFilterError> {
    match value {
        Value::ServerError(e) => Err(RedisFilterError::Server {
            code: e.code().to_owned(),
            detail: e.details().unwrap_or("").to_owned(),
        }),
        other => Ok(other),
    }
}

/// Records an operation begun at `started` (one or more round trips to Redis, redirects and
/// retries included): its time, and its failure.
fn measured(started: Instant, failed: Option<&RedisFilterError>) {
    use bloom_store::telemetry::names;
    metrics::histogram!(names::REDIS_ROUND_TRIP_SECONDS).record(started.elapsed().as_secs_f64());
    if let Some(e) = failed {
        let kind = if matches!(e, RedisFilterError::Timeout { .. }) {
            "timeout"
        } else {
            "failed"
        };
        metrics::counter!(names::REDIS_ERRORS, "kind" => kind).increment(1);
        tracing::debug!(target: "bloom", kind, error = %e, "a Redis operation failed");
    }
}
