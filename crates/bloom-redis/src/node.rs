//! One connection to one Redis node, and who that node is: the process (`run_id`), its
//! replication history (`master_replid`, `master_replid2`), its role, its version, whether its
//! persistence makes an acknowledged write durable, and its cluster node id. Read once when
//! the connection is made: a restart or a failover ends the connection, and the next one reads
//! the node again.

use std::time::{Duration, Instant};

use redis::{ConnectionInfo, Value};

use crate::error::RedisFilterError;

/// Who a node is, as it says at connection time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct NodeIdentity {
    /// The server process (`INFO server` `run_id`): new at every start.
    pub(crate) run_id: String,
    /// The replication history it serves (`master_replid`): new when it becomes a master
    /// (a restart, or a promotion).
    pub(crate) replid: String,
    /// The history it served before its promotion (`master_replid2`), or zeros.
    pub(crate) replid2: String,
    /// Whether it is a master.
    pub(crate) master: bool,
    /// `redis_version`.
    pub(crate) version: (u32, u32, u32),
    /// AOF on, with `appendfsync always`: a write it acknowledged survives its restart.
    pub(crate) aof_always: bool,
    /// AOF on since the process started (`aof_enabled:1` and no AOF rewrite yet,
    /// `aof_last_rewrite_time_sec:-1`): a server that restarted with it loaded its AOF. AOF
    /// turned on at run time (`CONFIG SET appendonly yes`) starts with a rewrite of whatever
    /// the server loaded, which is not that.
    pub(crate) aof_enabled: bool,
    /// Its cluster node id (`CLUSTER MYID`), kept across its restarts; `None` outside a
    /// cluster.
    pub(crate) node_id: Option<String>,
}

impl NodeIdentity {
    /// Whether the server has `WAITAOF` (Redis 7.2).
    pub(crate) fn has_waitaof(&self) -> bool {
        self.version >= (7, 2, 0)
    }
}

/// `INFO replication`, sent after every node's share of a pipeline: its reply says whether
/// the node still serves the history it served when the connection was made.
pub(crate) const PROBE: &[u8] = b"*2\r\n$4\r\nINFO\r\n$11\r\nreplication\r\n";

impl NodeIdentity {
    /// Whether an `INFO replication` reply (the [`PROBE`]) shows the same node as this
    /// identity: the same role and replication history. A server demoted or promoted on a
    /// live connection (`REPLICAOF`, a Sentinel's failover) shows another `master_replid`.
    pub(crate) fn unchanged_in(&self, reply: &Value) -> bool {
        let Some(info) = text(reply) else {
            return false;
        };
        info_field(&info, "master_replid") == Some(self.replid.as_str())
            && (info_field(&info, "role") == Some("master")) == self.master
    }
}

/// A connection to one node.
pub(crate) struct Node {
    conn: redis::Connection,
    pub(crate) identity: NodeIdentity,
}

/// A Redis error as a filter error: timeouts named as such.
pub(crate) fn redis_error(error: redis::RedisError, timeout: Duration) -> RedisFilterError {
    if error.is_timeout() {
        RedisFilterError::Timeout { timeout }
    } else {
        RedisFilterError::Redis(error)
    }
}

/// The time left before `deadline`, or a timeout error when none is.
pub(crate) fn remaining(
    deadline: Instant,
    timeout: Duration,
) -> Result<Duration, RedisFilterError> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        Err(RedisFilterError::Timeout { timeout })
    } else {
        Ok(left)
    }
}

/// The value of `field:` in an `INFO` reply.
fn info_field<'a>(info: &'a str, field: &str) -> Option<&'a str> {
    info.lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .map(str::trim)
}

pub(crate) fn text(value: &Value) -> Option<String> {
    match value {
        Value::BulkString(bytes) => String::from_utf8(bytes.clone()).ok(),
        Value::SimpleString(s) => Some(s.clone()),
        Value::VerbatimString { text, .. } => Some(text.clone()),
        _ => None,
    }
}

impl Node {
    /// Connects to `addr` (given by `info`) and reads who the node is, all before
    /// `deadline`.
    pub(crate) fn connect(
        info: ConnectionInfo,
        tls_ca: Option<&[u8]>,
        deadline: Instant,
        timeout: Duration,
        cluster: bool,
    ) -> Result<Self, RedisFilterError> {
        let client = match tls_ca {
            Some(ca) => tls_client(info, ca)?,
            None => redis::Client::open(info).map_err(RedisFilterError::Redis)?,
        };
        let conn = client
            .get_connection_with_timeout(remaining(deadline, timeout)?)
            .map_err(|e| redis_error(e, timeout))?;
        let mut node = Self {
            conn,
            identity: NodeIdentity {
                run_id: String::new(),
                replid: String::new(),
                replid2: String::new(),
                master: true,
                version: (0, 0, 0),
                aof_always: false,
                aof_enabled: false,
                node_id: None,
            },
        };
        node.identity = node.read_identity(deadline, timeout, cluster)?;
        Ok(node)
    }

    /// Connects without reading who the node is (a Sentinel, asked for its master only).
    pub(crate) fn connect_plain(
        info: ConnectionInfo,
        tls_ca: Option<&[u8]>,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<Self, RedisFilterError> {
        let client = match tls_ca {
            Some(ca) => tls_client(info, ca)?,
            None => redis::Client::open(info).map_err(RedisFilterError::Redis)?,
        };
        let conn = client
            .get_connection_with_timeout(remaining(deadline, timeout)?)
            .map_err(|e| redis_error(e, timeout))?;
        Ok(Self {
            conn,
            identity: NodeIdentity {
                run_id: String::new(),
                replid: String::new(),
                replid2: String::new(),
                master: false,
                version: (0, 0, 0),
                aof_always: false,
                aof_enabled: false,
                node_id: None,
            },
        })
    }

    fn read_identity(
        &mut self,
        deadline: Instant,
        timeout: Duration,
        cluster: bool,
    ) -> Result<NodeIdentity, RedisFilterError> {
        let mut commands = crate::wire::Commands::new();
        commands.push(&[b"INFO", b"server"]);
        commands.push(&[b"INFO", b"replication"]);
        commands.push(&[b"INFO", b"persistence"]);
        commands.push(&[b"CONFIG", b"GET", b"appendfsync"]);
        if cluster {
            commands.push(&[b"CLUSTER", b"MYID"]);
        }
        let replies = self.round_trip(&commands, deadline, timeout)?;
        let info = |i: usize| -> Result<String, RedisFilterError> {
            match replies.get(i) {
                Some(Value::ServerError(e)) => Err(RedisFilterError::Server {
                    code: e.code().to_owned(),
                    detail: format!(
                        "INFO was refused ({}): the filter needs INFO to tell a restart or a failover",
                        e.details().unwrap_or("")
                    ),
                }),
                Some(value) => text(value).ok_or_else(|| {
                    RedisFilterError::Protocol("INFO did not answer with text".into())
                }),
                None => Err(RedisFilterError::Protocol("a reply is missing".into())),
            }
        };
        let (server, replication, persistence) = (info(0)?, info(1)?, info(2)?);
        let field = |info: &str, name: &str| info_field(info, name).unwrap_or("").to_owned();
        let version: Vec<u32> = field(&server, "redis_version")
            .split('.')
            .map(|p| p.parse().unwrap_or(0))
            .collect();
        // CONFIG may be refused (a managed server, or an ACL): then AOF is not counted on.
        let fsync_always = match replies.get(3) {
            Some(Value::Array(items)) => items.get(1).and_then(text).as_deref() == Some("always"),
            Some(Value::Map(items)) => {
                items.first().and_then(|(_, v)| text(v)).as_deref() == Some("always")
            }
            _ => false,
        };
        let node_id = if cluster {
            replies.get(4).and_then(text).filter(|id| !id.is_empty())
        } else {
            None
        };
        let run_id = field(&server, "run_id");
        if run_id.is_empty() {
            return Err(RedisFilterError::Protocol(
                "INFO server has no run_id: not a Redis server the filter can tell restarts of"
                    .into(),
            ));
        }
        Ok(NodeIdentity {
            run_id,
            replid: field(&replication, "master_replid"),
            replid2: field(&replication, "master_replid2"),
            master: field(&replication, "role") == "master",
            version: (
                version.first().copied().unwrap_or(0),
                version.get(1).copied().unwrap_or(0),
                version.get(2).copied().unwrap_or(0),
            ),
            aof_always: field(&persistence, "aof_enabled") == "1" && fsync_always,
            aof_enabled: field(&persistence, "aof_enabled") == "1"
                && field(&persistence, "aof_last_rewrite_time_sec") == "-1",
            node_id,
        })
    }

    /// Bounds the socket's reads and writes by `deadline`.
    pub(crate) fn bound(
        &self,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<(), RedisFilterError> {
        let left = remaining(deadline, timeout)?;
        self.conn
            .set_read_timeout(Some(left))
            .and_then(|()| self.conn.set_write_timeout(Some(left)))
            .map_err(|e| redis_error(e, timeout))
    }

    /// Sends encoded commands (no reply read).
    pub(crate) fn send(&mut self, bytes: &[u8], timeout: Duration) -> Result<(), RedisFilterError> {
        self.conn
            .send_packed_command(bytes)
            .map_err(|e| redis_error(e, timeout))
    }

    /// Reads one reply (a server error is a reply, not an error).
    pub(crate) fn recv(&mut self, timeout: Duration) -> Result<Value, RedisFilterError> {
        self.conn
            .recv_response()
            .map_err(|e| redis_error(e, timeout))
    }

    /// Sends every command of `commands` and reads their replies, in order.
    pub(crate) fn round_trip(
        &mut self,
        commands: &crate::wire::Commands,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<Vec<Value>, RedisFilterError> {
        self.bound(deadline, timeout)?;
        let mut all = Vec::new();
        for i in 0..commands.len() {
            all.extend_from_slice(commands.get(i));
        }
        self.send(&all, timeout)?;
        (0..commands.len()).map(|_| self.recv(timeout)).collect()
    }
}

#[cfg(feature = "tls")]
fn tls_client(info: ConnectionInfo, ca: &[u8]) -> Result<redis::Client, RedisFilterError> {
    redis::Client::build_with_tls(
        info,
        redis::TlsCertificates {
            client_tls: None,
            root_cert: Some(ca.to_vec()),
        },
    )
    .map_err(RedisFilterError::Redis)
}

#[cfg(not(feature = "tls"))]
fn tls_client(_: ConnectionInfo, _: &[u8]) -> Result<redis::Client, RedisFilterError> {
    Err(RedisFilterError::TlsUnavailable)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_fields_are_read_by_name() {
        let info = "# Server\r\nredis_version:7.0.15\r\nrun_id:abc\r\nrun_id_x:no\r\n";
        assert_eq!(info_field(info, "run_id"), Some("abc"));
        assert_eq!(info_field(info, "redis_version"), Some("7.0.15"));
        assert_eq!(info_field(info, "missing"), None);
    }
}
