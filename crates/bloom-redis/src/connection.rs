//! [`RedisTarget`]: where a filter lives (one Redis server, or a Redis Cluster), and the
//! connection that sends its commands, pipelined and routed by key.

use std::fmt;
use std::time::Duration;

use redis::cluster::{ClusterClientBuilder, ClusterConnection, cluster_pipe};
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
use redis::{Cmd, FromRedisValue, Value};

use crate::error::RedisFilterError;

/// The default time to wait for a connection or a reply.
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

    /// How long to wait for a connection and for each reply (default
    /// [`DEFAULT_TIMEOUT`]): past it, an operation fails with
    /// [`RedisFilterError::Timeout`] rather than hanging.
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout.max(Duration::from_millis(1));
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

    pub(crate) fn connect(&self) -> Result<Conn, RedisFilterError> {
        let failed = |e| redis_error(e, self.timeout);
        if self.cluster {
            let client = ClusterClientBuilder::new(self.nodes.clone())
                .connection_timeout(self.timeout)
                .response_timeout(self.timeout)
                .build()
                .map_err(failed)?;
            let conn = client.get_connection().map_err(failed)?;
            Ok(Conn {
                inner: Inner::Cluster(Box::new(conn)),
                timeout: self.timeout,
            })
        } else {
            let url = self.nodes.first().map_or("", String::as_str);
            let client = redis::Client::open(url).map_err(failed)?;
            let conn = client
                .get_connection_with_timeout(self.timeout)
                .map_err(failed)?;
            conn.set_read_timeout(Some(self.timeout)).map_err(failed)?;
            conn.set_write_timeout(Some(self.timeout)).map_err(failed)?;
            Ok(Conn {
                inner: Inner::Single(conn),
                timeout: self.timeout,
            })
        }
    }
}

/// A Redis error as a filter error: timeouts named as such.
pub(crate) fn redis_error(error: redis::RedisError, timeout: Duration) -> RedisFilterError {
    if error.is_timeout() {
        RedisFilterError::Timeout {
            timeout,
            source: error,
        }
    } else {
        RedisFilterError::Redis(error)
    }
}

enum Inner {
    Single(redis::Connection),
    Cluster(Box<ClusterConnection>),
}

/// A connection to a [`RedisTarget`].
pub(crate) struct Conn {
    inner: Inner,
    timeout: Duration,
}

impl Conn {
    fn failed(&self, error: redis::RedisError) -> RedisFilterError {
        redis_error(error, self.timeout)
    }

    /// One command.
    pub(crate) fn query<T: FromRedisValue>(&mut self, cmd: &Cmd) -> Result<T, RedisFilterError> {
        let result = match &mut self.inner {
            Inner::Single(conn) => cmd.query(conn),
            Inner::Cluster(conn) => cmd.query(conn.as_mut()),
        };
        result.map_err(|e| self.failed(e))
    }

    /// Commands pipelined: one round trip per node, replies in order.
    pub(crate) fn pipeline(&mut self, cmds: Vec<Cmd>) -> Result<Vec<Value>, RedisFilterError> {
        if cmds.is_empty() {
            return Ok(Vec::new());
        }
        let result = match &mut self.inner {
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
        };
        result.map_err(|e| self.failed(e))
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
        // WAIT blocks up to its own timeout: the reply may take that long plus the usual.
        let patience = Some(timeout + self.timeout);
        let restore = Some(self.timeout);
        let acked: i64 = match &mut self.inner {
            Inner::Single(conn) => {
                conn.set_read_timeout(patience)
                    .map_err(|e| redis_error(e, self.timeout))?;
                let acked = wait.query(conn);
                conn.set_read_timeout(restore)
                    .map_err(|e| redis_error(e, self.timeout))?;
                acked.map_err(|e| redis_error(e, self.timeout))?
            }
            Inner::Cluster(conn) => {
                conn.set_read_timeout(patience)
                    .map_err(|e| redis_error(e, self.timeout))?;
                let route = RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(
                    Route::with_key(key, SlotAddr::Master),
                ));
                let value = conn.route_command(&wait, route);
                conn.set_read_timeout(restore)
                    .map_err(|e| redis_error(e, self.timeout))?;
                let value = value.map_err(|e| redis_error(e, self.timeout))?;
                redis::from_redis_value(value)
                    .map_err(|e| RedisFilterError::Protocol(format!("WAIT replied {e}")))?
            }
        };
        Ok(usize::try_from(acked).unwrap_or(0))
    }
}
