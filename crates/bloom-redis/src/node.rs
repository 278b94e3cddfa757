//! One connection to one Redis node, and who that node is: the process (`run_id`), its
//! replication history (`master_replid`, `master_replid2`), its role, its version, whether its
//! persistence makes an acknowledged write durable, and its cluster node id. Read once when
//! the connection is made: a restart or a failover ends the connection, and the next one reads
//! the node again.

use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use redis::{ConnectionAddr, ConnectionInfo, Value};

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
    /// The version of the `bloom` module it has loaded (`MODULE LIST`), if any.
    pub(crate) module: Option<i64>,
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

/// The most bytes one reply may take on the wire. The largest the filter asks for are an
/// export's 1 MiB `GETRANGE` and a batch's `BITFIELD` (4,096 keys of at most 64 positions:
/// about 1 MiB); a reply that runs past this is not one the filter asked for, and the
/// connection is dropped before it can hold more memory.
pub(crate) const MAX_REPLY_BYTES: usize = 2 << 20;

/// The byte stream to one node.
enum Stream {
    Tcp(TcpStream),
    #[cfg(unix)]
    Unix(std::os::unix::net::UnixStream),
    #[cfg(feature = "tls")]
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
}

impl Stream {
    fn set_timeouts(&self, timeout: Option<Duration>) -> io::Result<()> {
        match self {
            Self::Tcp(s) => s
                .set_read_timeout(timeout)
                .and(s.set_write_timeout(timeout)),
            #[cfg(unix)]
            Self::Unix(s) => s
                .set_read_timeout(timeout)
                .and(s.set_write_timeout(timeout)),
            #[cfg(feature = "tls")]
            Self::Tls(s) => s
                .get_ref()
                .set_read_timeout(timeout)
                .and(s.get_ref().set_write_timeout(timeout)),
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Self::Tcp(s) => s.read(buf),
            #[cfg(unix)]
            Self::Unix(s) => s.read(buf),
            #[cfg(feature = "tls")]
            Self::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Self::Tcp(s) => s.write(buf),
            #[cfg(unix)]
            Self::Unix(s) => s.write(buf),
            #[cfg(feature = "tls")]
            Self::Tls(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Self::Tcp(s) => s.flush(),
            #[cfg(unix)]
            Self::Unix(s) => s.flush(),
            #[cfg(feature = "tls")]
            Self::Tls(s) => s.flush(),
        }
    }
}

/// The stream, giving at most `left` more bytes to the reply being parsed.
struct Capped<'a> {
    stream: &'a mut Stream,
    left: usize,
}

impl Read for Capped<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.left == 0 {
            return Err(io::Error::other("reply over the size limit"));
        }
        let n = buf.len().min(self.left);
        let read = self.stream.read(&mut buf[..n])?;
        self.left -= read;
        Ok(read)
    }
}

/// A connection to one node: the stream, and the parser that keeps what it read past a reply.
pub(crate) struct Node {
    stream: Stream,
    parser: redis::Parser,
    pub(crate) identity: NodeIdentity,
}

/// An I/O error as a filter error: timeouts named as such.
fn io_error(error: io::Error, timeout: Duration) -> RedisFilterError {
    if matches!(
        error.kind(),
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
    ) {
        RedisFilterError::Timeout { timeout }
    } else {
        RedisFilterError::Redis(redis::RedisError::from(error))
    }
}

/// Opens the stream to the node `info` names, by `deadline`, and authenticates and selects the
/// database as its URL says.
fn open_stream(
    info: &ConnectionInfo,
    tls_ca: Option<&[u8]>,
    deadline: Instant,
    timeout: Duration,
) -> Result<Stream, RedisFilterError> {
    let tcp = |host: &str, port: u16| -> Result<TcpStream, RedisFilterError> {
        let mut last = None;
        let addrs = (host, port)
            .to_socket_addrs()
            .map_err(|e| io_error(e, timeout))?;
        for addr in addrs {
            match TcpStream::connect_timeout(&addr, remaining(deadline, timeout)?) {
                Ok(stream) => {
                    let _ = stream.set_nodelay(true);
                    return Ok(stream);
                }
                Err(e) => last = Some(e),
            }
        }
        Err(io_error(
            last.unwrap_or_else(|| io::Error::other(format!("{host} has no address"))),
            timeout,
        ))
    };
    let stream = match info.addr() {
        ConnectionAddr::Tcp(host, port) => Stream::Tcp(tcp(host, *port)?),
        ConnectionAddr::TcpTls {
            host,
            port,
            insecure,
            ..
        } => {
            if *insecure {
                return Err(RedisFilterError::TlsCa(
                    "#insecure is refused: certificates are always verified (--tls-ca FILE adds an authority)".into(),
                ));
            }
            tls_stream(host, tcp(host, *port)?, tls_ca)?
        }
        #[cfg(unix)]
        ConnectionAddr::Unix(path) => Stream::Unix(
            std::os::unix::net::UnixStream::connect(path).map_err(|e| io_error(e, timeout))?,
        ),
        #[allow(
            unreachable_patterns,
            reason = "the address kinds depend on redis's features"
        )]
        _ => {
            return Err(RedisFilterError::Protocol(
                "an address kind this build cannot reach".into(),
            ));
        }
    };
    Ok(stream)
}

#[cfg(feature = "tls")]
fn tls_stream(
    host: &str,
    tcp: TcpStream,
    tls_ca: Option<&[u8]>,
) -> Result<Stream, RedisFilterError> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, ServerName};
    // `--tls-ca` pins the authority: its certificates instead of the system's roots.
    let mut roots = rustls::RootCertStore::empty();
    if tls_ca.is_none() {
        for cert in rustls_native_certs::load_native_certs().certs {
            let _ = roots.add(cert);
        }
    }
    if let Some(pem) = tls_ca {
        let mut added = 0;
        for cert in CertificateDer::pem_slice_iter(pem) {
            let cert =
                cert.map_err(|e| RedisFilterError::TlsCa(format!("not a PEM certificate: {e}")))?;
            roots
                .add(cert)
                .map_err(|e| RedisFilterError::TlsCa(format!("not a usable authority: {e}")))?;
            added += 1;
        }
        if added == 0 {
            return Err(RedisFilterError::TlsCa("holds no PEM certificate".into()));
        }
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| RedisFilterError::TlsCa(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = ServerName::try_from(host.to_owned())
        .map_err(|e| RedisFilterError::TlsCa(format!("{host} is not a server name: {e}")))?;
    let conn = rustls::ClientConnection::new(std::sync::Arc::new(config), name)
        .map_err(|e| RedisFilterError::TlsCa(e.to_string()))?;
    Ok(Stream::Tls(Box::new(rustls::StreamOwned::new(conn, tcp))))
}

#[cfg(not(feature = "tls"))]
fn tls_stream(_: &str, _: TcpStream, _: Option<&[u8]>) -> Result<Stream, RedisFilterError> {
    Err(RedisFilterError::TlsUnavailable)
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
        let mut node = Self::connect_plain(info, tls_ca, deadline, timeout)?;
        node.identity = node.read_identity(deadline, timeout, cluster)?;
        Ok(node)
    }

    /// Connects without reading who the node is (a Sentinel, asked for its master only):
    /// the stream, then `AUTH` and `SELECT` as the URL says.
    pub(crate) fn connect_plain(
        info: ConnectionInfo,
        tls_ca: Option<&[u8]>,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<Self, RedisFilterError> {
        let stream = open_stream(&info, tls_ca, deadline, timeout)?;
        let mut node = Self {
            stream,
            parser: redis::Parser::new(),
            identity: NodeIdentity {
                run_id: String::new(),
                replid: String::new(),
                replid2: String::new(),
                master: false,
                version: (0, 0, 0),
                aof_always: false,
                aof_enabled: false,
                node_id: None,
                module: None,
            },
        };
        let settings = info.redis_settings();
        let mut hello = crate::wire::Commands::new();
        let db = settings.db().to_string();
        match (settings.username(), settings.password()) {
            (Some(user), Some(password)) => {
                hello.push(&[b"AUTH", user.as_bytes(), password.as_bytes()]);
            }
            (None, Some(password)) => hello.push(&[b"AUTH", password.as_bytes()]),
            _ => {}
        }
        if settings.db() != 0 {
            hello.push(&[b"SELECT", db.as_bytes()]);
        }
        if hello.len() > 0 {
            for reply in node.round_trip(&hello, deadline, timeout)? {
                if let Value::ServerError(e) = reply {
                    // The server's words (WRONGPASS, NOPERM, ...), never what was sent.
                    return Err(RedisFilterError::Server {
                        code: e.code().to_owned(),
                        detail: e.details().unwrap_or_default().to_owned(),
                    });
                }
            }
        }
        Ok(node)
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
        commands.push(&[b"MODULE", b"LIST"]);
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
        // MODULE LIST may be refused too (an ACL without `+module|list`): then the plain
        // commands are used.
        let module = replies.get(4).and_then(crate::module::version_in);
        let node_id = if cluster {
            replies.get(5).and_then(text).filter(|id| !id.is_empty())
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
            module,
        })
    }

    /// Bounds the socket's reads and writes by `deadline`.
    pub(crate) fn bound(
        &self,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<(), RedisFilterError> {
        let left = remaining(deadline, timeout)?;
        self.stream
            .set_timeouts(Some(left))
            .map_err(|e| io_error(e, timeout))
    }

    /// Sends encoded commands (no reply read).
    pub(crate) fn send(&mut self, bytes: &[u8], timeout: Duration) -> Result<(), RedisFilterError> {
        self.stream
            .write_all(bytes)
            .and_then(|()| self.stream.flush())
            .map_err(|e| io_error(e, timeout))
    }

    /// Reads one reply (a server error is a reply, not an error), of at most
    /// [`MAX_REPLY_BYTES`] on the wire.
    pub(crate) fn recv(&mut self, timeout: Duration) -> Result<Value, RedisFilterError> {
        let mut capped = Capped {
            stream: &mut self.stream,
            left: MAX_REPLY_BYTES,
        };
        let parsed = self.parser.parse_value(&mut capped);
        if capped.left == 0 && parsed.is_err() {
            return Err(RedisFilterError::Protocol(format!(
                "a reply over {} MiB, which no command of the filter asks for",
                MAX_REPLY_BYTES >> 20
            )));
        }
        parsed.map_err(|e| redis_error(e, timeout))
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
