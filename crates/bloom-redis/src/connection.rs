//! [`RedisTarget`]: where a filter lives (one Redis server, or a Redis Cluster), and the
//! connection that sends its commands, pipelined and routed by key, each operation under one
//! deadline.

use std::fmt;
use std::sync::mpsc;
use std::time::Duration;

use redis::cluster::{ClusterClientBuilder, ClusterConnection, cluster_pipe};
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
use redis::{Cmd, FromRedisValue, RedisResult, Value};

use crate::error::RedisFilterError;

/// The default time to wait for a connection or for an operation (one command, or one
/// pipelined batch).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// A Redis server or cluster to hold filters. Its `Debug` form never shows the URLs, which may
/// carry passwords.
#[derive(Clone)]
pub struct RedisTarget {
    nodes: Vec<String>,
    cluster: bool,
    timeout: Duration,
}

impl fmt::Debug for RedisTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisTarget")
            .field("nodes", &self.nodes.len())
            .field("cluster", &self.cluster)
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl RedisTarget {
    /// One Redis server, by URL (`redis://host:port/db`).
    #[must_use]
    pub fn single(url: impl Into<String>) -> Self {
        Self {
            nodes: vec![url.into()],
            cluster: false,
            timeout: DEFAULT_TIMEOUT,
        }
    }

    /// A Redis Cluster, reached through any of its nodes (URLs); the rest are discovered.
    #[must_use]
    pub fn cluster(urls: impl IntoIterator<Item = impl Into<String>>) -> Self {
        Self {
            nodes: urls.into_iter().map(Into::into).collect(),
            cluster: true,
            timeout: DEFAULT_TIMEOUT,
        }
    }

    /// The deadline of each operation (a command, or a pipelined batch) and of connecting
    /// (default [`DEFAULT_TIMEOUT`], at least 1 ms, at most a day): past it, the operation
    /// fails with [`RedisFilterError::Timeout`] and the connection is dropped (the next
    /// operation makes a new one), so a server that stops answering never hangs a caller.
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout.clamp(Duration::from_millis(1), Duration::from_secs(86_400));
        self
    }

    /// The timeout.
    #[must_use]
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Whether this is a cluster.
    #[must_use]
    pub fn is_cluster(&self) -> bool {
        self.cluster
    }

    /// Connects (within the timeout).
    pub(crate) fn connect(&self) -> Result<Conn, RedisFilterError> {
        let mut conn = Conn {
            target: self.clone(),
            worker: None,
        };
        conn.worker = Some(Worker::start(self)?);
        Ok(conn)
    }

    fn open_inner(&self) -> RedisResult<Inner> {
        if self.cluster {
            let client = ClusterClientBuilder::new(self.nodes.clone())
                .connection_timeout(self.timeout)
                .response_timeout(self.timeout)
                .build()?;
            Ok(Inner::Cluster(Box::new(client.get_connection()?)))
        } else {
            let url = self.nodes.first().map_or("", String::as_str);
            let client = redis::Client::open(url)?;
            let conn = client.get_connection_with_timeout(self.timeout)?;
            conn.set_read_timeout(Some(self.timeout))?;
            conn.set_write_timeout(Some(self.timeout))?;
            Ok(Inner::Single(conn))
        }
    }
}

/// A Redis error as a filter error: timeouts named as such.
pub(crate) fn redis_error(error: redis::RedisError, timeout: Duration) -> RedisFilterError {
    if error.is_timeout() {
        RedisFilterError::Timeout { timeout }
    } else {
        RedisFilterError::Redis(error)
    }
}

pub(crate) enum Inner {
    Single(redis::Connection),
    Cluster(Box<ClusterConnection>),
}

type Job = Box<dyn FnOnce(&mut Inner) + Send>;

/// A thread that owns the connection and runs operations on it, so that the caller can give
/// up on one at its deadline (a stuck thread is abandoned and ends with its socket).
struct Worker {
    jobs: mpsc::Sender<Job>,
}

impl Worker {
    fn start(target: &RedisTarget) -> Result<Self, RedisFilterError> {
        let timeout = target.timeout;
        let (ready_tx, ready_rx) = mpsc::sync_channel::<Result<(), redis::RedisError>>(1);
        let (jobs, queue) = mpsc::channel::<Job>();
        let target = target.clone();
        std::thread::Builder::new()
            .name("bloom-redis".into())
            .spawn(move || {
                let mut inner = match target.open_inner() {
                    Ok(inner) => {
                        let _ = ready_tx.send(Ok(()));
                        inner
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                while let Ok(job) = queue.recv() {
                    job(&mut inner);
                }
            })
            .map_err(|e| RedisFilterError::Protocol(format!("cannot start a thread: {e}")))?;
        // Connecting has its own timeout; this bounds it even if a resolver hangs.
        match ready_rx.recv_timeout(timeout.saturating_mul(2)) {
            Ok(Ok(())) => Ok(Self { jobs }),
            Ok(Err(e)) => Err(redis_error(e, timeout)),
            Err(_) => Err(RedisFilterError::Timeout { timeout }),
        }
    }
}

/// A connection to a [`RedisTarget`].
pub(crate) struct Conn {
    target: RedisTarget,
    worker: Option<Worker>,
}

impl Conn {
    /// Runs `operation` on the connection, within the deadline.
    fn run<T: Send + 'static>(
        &mut self,
        deadline: Duration,
        operation: impl FnOnce(&mut Inner) -> RedisResult<T> + Send + 'static,
    ) -> Result<T, RedisFilterError> {
        let timeout = self.target.timeout;
        if self.worker.is_none() {
            self.worker = Some(Worker::start(&self.target)?);
        }
        let (reply_tx, reply_rx) = mpsc::sync_channel(1);
        let job: Job = Box::new(move |inner| {
            let _ = reply_tx.send(operation(inner));
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
        match reply_rx.recv_timeout(deadline) {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => {
                // A connection that failed is not trusted with the next operation.
                if e.is_io_error() || e.is_timeout() || e.is_connection_dropped() {
                    self.worker = None;
                }
                Err(redis_error(e, timeout))
            }
            Err(_) => {
                // Give up on this connection: its thread may be stuck on a socket.
                self.worker = None;
                Err(RedisFilterError::Timeout { timeout })
            }
        }
    }

    /// One command.
    pub(crate) fn query<T: FromRedisValue + Send + 'static>(
        &mut self,
        cmd: &Cmd,
    ) -> Result<T, RedisFilterError> {
        let cmd = cmd.clone();
        self.run(self.target.timeout, move |inner| match inner {
            Inner::Single(conn) => cmd.query(conn),
            Inner::Cluster(conn) => cmd.query(conn.as_mut()),
        })
    }

    /// Commands pipelined: one round trip per node, replies in order, within one deadline.
    pub(crate) fn pipeline(&mut self, cmds: Vec<Cmd>) -> Result<Vec<Value>, RedisFilterError> {
        if cmds.is_empty() {
            return Ok(Vec::new());
        }
        self.run(self.target.timeout, move |inner| match inner {
            Inner::Single(conn) => {
                let mut pipe = redis::pipe();
                for cmd in cmds {
                    pipe.add_command(cmd);
                }
                pipe.query::<Vec<Value>>(conn)
            }
            Inner::Cluster(conn) => {
                let mut pipe = cluster_pipe();
                for cmd in cmds {
                    pipe.add_command(cmd);
                }
                pipe.query::<Vec<Value>>(conn.as_mut())
            }
        })
    }

    /// `WAIT replicas timeout` on the node that holds `key`: how many replicas acknowledged
    /// every write this connection made to that node.
    pub(crate) fn wait_for_replicas(
        &mut self,
        key: &str,
        replicas: usize,
        timeout: Duration,
    ) -> Result<usize, RedisFilterError> {
        let mut wait = redis::cmd("WAIT");
        wait.arg(replicas).arg(
            u64::try_from(timeout.as_millis())
                .unwrap_or(u64::MAX)
                .max(1),
        );
        let key = key.to_owned();
        let usual = self.target.timeout;
        // WAIT blocks up to its own timeout: the reply may take that long plus the usual.
        let patience = timeout.saturating_add(usual);
        let acked: i64 = self.run(patience, move |inner| match inner {
            Inner::Single(conn) => {
                conn.set_read_timeout(Some(patience))?;
                let acked = wait.query(conn);
                conn.set_read_timeout(Some(usual))?;
                acked
            }
            Inner::Cluster(conn) => {
                conn.set_read_timeout(Some(patience))?;
                let route = RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(
                    Route::with_key(&key, SlotAddr::Master),
                ));
                let value = conn.route_command(&wait, route);
                conn.set_read_timeout(Some(usual))?;
                redis::from_redis_value(value?).map_err(Into::into)
            }
        })?;
        Ok(usize::try_from(acked).unwrap_or(0))
    }
}
