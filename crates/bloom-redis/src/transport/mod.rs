//! How commands reach the nodes of a target: one server, a Redis Cluster (its slot map kept
//! here, `MOVED` and `ASK` followed inside pipelines), or the master a set of Sentinels names.
//! Every reply comes back with the connection that answered it, so that the filter can check
//! that node's identity against what its shards recorded.

mod discovery;
mod redirect;
mod rounds;
mod routes;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use redis::{ConnectionAddr, ConnectionInfo, Value};

use crate::error::RedisFilterError;
use crate::node::{Node, NodeIdentity, text};
use crate::wire::{Commands, slot};

pub(crate) use discovery::parse_urls;

/// How many times one command is sent again after a redirect or a busy cluster before the
/// operation gives up (its deadline usually ends it first).
const MAX_ATTEMPTS: u32 = 16;

/// How many times commands are routed again when their node cannot be reached (a cluster or
/// Sentinel failing over), about a second and a half in all.
const ROUTE_ATTEMPTS: u32 = 6;

/// Where a target's nodes are found.
pub(crate) enum Topology {
    Single(ConnectionInfo),
    Cluster(Vec<ConnectionInfo>),
    Sentinel {
        sentinels: Vec<ConnectionInfo>,
        master: String,
        /// How to reach the master once its address is known (credentials, TLS, db).
        template: ConnectionInfo,
    },
}

/// A live connection, named by a serial number that is never reused: a reply says which
/// connection answered it, and a connection made again (after a failure, to a restarted
/// server) is another one.
struct Live {
    serial: u64,
    node: Node,
}

/// The connections of one target.
pub(crate) struct Transport {
    topology: Topology,
    tls_ca: Option<Vec<u8>>,
    timeout: Duration,
    /// Connections by `host:port`.
    nodes: HashMap<String, Live>,
    /// The master of each cluster slot, by `host:port` (empty outside a cluster).
    slots: Vec<Option<String>>,
    next_serial: u64,
    /// The one node of a single or Sentinel target, by `host:port`.
    single: Option<String>,
    /// Pipelines begun and not ended, in the order they began.
    flights: Vec<(u64, Flight)>,
    next_flight: u64,
}

/// A pipeline on its way: its commands, the replies read so far, and what was sent and not
/// read yet.
pub(crate) struct Flight {
    commands: Commands,
    keys: Vec<Vec<u8>>,
    deadline: Instant,
    values: Vec<Option<Value>>,
    answered_by: Vec<u64>,
    /// (command, ASK target) still to send.
    pending: Vec<(usize, Option<String>)>,
    /// Sent, replies not read.
    exchanges: Vec<Exchange>,
    attempts: u32,
    wait: Duration,
    /// Why the pipeline failed (returned when it is ended).
    failed: Option<RedisFilterError>,
}

/// Commands sent to one node in one write.
struct Exchange {
    addr: String,
    /// The connection they went on.
    serial: u64,
    /// (command, sent after `ASKING`).
    list: Vec<(usize, bool)>,
    sent: Result<(), RedisFilterError>,
}

impl Flight {
    fn new(commands: Commands, keys: Vec<Vec<u8>>, deadline: Instant) -> Self {
        let n = commands.len();
        Self {
            commands,
            keys,
            deadline,
            values: vec![None; n],
            answered_by: vec![0; n],
            pending: (0..n).map(|i| (i, None)).collect(),
            exchanges: Vec::new(),
            attempts: 0,
            wait: Duration::from_millis(10),
            failed: None,
        }
    }

    fn key(&self, i: usize) -> &[u8] {
        self.keys.get(i).map_or(b"", Vec::as_slice)
    }
}

/// The replies of a pipeline, in command order, each with the serial of the connection that
/// answered it.
pub(crate) struct Replies {
    pub(crate) values: Vec<Value>,
    pub(crate) answered_by: Vec<u64>,
}

fn addr_of(info: &ConnectionInfo) -> String {
    match info.addr() {
        ConnectionAddr::Tcp(host, port) | ConnectionAddr::TcpTls { host, port, .. } => {
            format!("{host}:{port}")
        }
        ConnectionAddr::Unix(path) => path.display().to_string(),
        _ => String::new(),
    }
}

/// `template` pointed at `host:port` (same credentials, TLS and database).
/// The deadline of one of `left` candidates asked in turn before `deadline`: an equal share
/// of what is left (the last gets all of it), so one that hangs leaves time for the others.
fn share_of(deadline: Instant, left: usize) -> Instant {
    let left = u32::try_from(left).unwrap_or(u32::MAX).max(1);
    let now = Instant::now();
    now + deadline.saturating_duration_since(now) / left
}

trait KindStr {
    fn kind_str(&self) -> String;
}

impl KindStr for redis::RedisError {
    /// The error's kind, without its detail (which may quote the URL).
    fn kind_str(&self) -> String {
        format!("{:?}", self.kind())
    }
}

impl Transport {
    pub(crate) fn new(topology: Topology, tls_ca: Option<Vec<u8>>, timeout: Duration) -> Self {
        Self {
            topology,
            tls_ca,
            timeout,
            nodes: HashMap::new(),
            slots: Vec::new(),
            next_serial: 1,
            single: None,
            flights: Vec::new(),
            next_flight: 1,
        }
    }

    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self.topology, Topology::Cluster(_))
    }

    fn connect(
        &mut self,
        info: ConnectionInfo,
        deadline: Instant,
    ) -> Result<String, RedisFilterError> {
        let addr = addr_of(&info);
        if self.nodes.contains_key(&addr) {
            return Ok(addr);
        }
        let cluster = self.is_cluster();
        let node = Node::connect(
            info,
            self.tls_ca.as_deref(),
            deadline,
            self.timeout,
            cluster,
        )?;
        let serial = self.next_serial;
        self.next_serial += 1;
        self.nodes.insert(addr.clone(), Live { serial, node });
        Ok(addr)
    }

    /// Drops a connection that failed: the next command to its node connects again (and
    /// reads the node's identity again).
    fn drop_node(&mut self, addr: &str) {
        self.nodes.remove(addr);
        if self.single.as_deref() == Some(addr) {
            self.single = None;
        }
    }

    /// One command routed by `key` (or to any node for `None`), redirects followed.
    pub(crate) fn query(
        &mut self,
        command: &[&[u8]],
        key: Option<&[u8]>,
        deadline: Instant,
    ) -> Result<(Value, u64), RedisFilterError> {
        let mut commands = Commands::new();
        commands.push(command);
        let keys = vec![key.unwrap_or(b"").to_vec()];
        let replies = self.pipeline(commands, keys, deadline)?;
        let value = replies.values.into_iter().next().unwrap_or(Value::Nil);
        let serial = replies.answered_by.first().copied().unwrap_or(0);
        Ok((value, serial))
    }

    /// One command on the connection `serial` (the one that made earlier writes), if it is
    /// still live: `WAIT` counts that connection's writes, and a check of what a node
    /// answered must reach the same node process.
    pub(crate) fn query_on(
        &mut self,
        serial: u64,
        command: &[&[u8]],
        deadline: Instant,
    ) -> Result<Value, RedisFilterError> {
        self.settle(deadline);
        let timeout = self.timeout;
        let Some((addr, live)) = self
            .nodes
            .iter_mut()
            .find(|(_, live)| live.serial == serial)
        else {
            return Err(RedisFilterError::NodeChanged);
        };
        let mut commands = Commands::new();
        commands.push(command);
        match live.node.round_trip(&commands, deadline, timeout) {
            Ok(mut values) => Ok(values.pop().unwrap_or(Value::Nil)),
            Err(e) => {
                let addr = addr.clone();
                self.drop_node(&addr);
                Err(e)
            }
        }
    }

    /// Sends every command (command `i` routed by `keys[i]`), reads every reply, and returns
    /// them in order. `MOVED` and `ASK` are followed, a busy cluster (`TRYAGAIN`,
    /// `CLUSTERDOWN`, `LOADING`) and a failed connection are retried, all within `deadline`;
    /// other error replies are returned as replies.
    pub(crate) fn pipeline(
        &mut self,
        commands: Commands,
        keys: Vec<Vec<u8>>,
        deadline: Instant,
    ) -> Result<Replies, RedisFilterError> {
        self.settle(deadline);
        let mut flight = Flight::new(commands, keys, deadline);
        self.send_round(&mut flight);
        self.complete(flight)
    }

    /// Sends a pipeline and returns before its replies are read, so that the next one can be
    /// on the wire while the server works on this one: [`Transport::end`] reads them. Any
    /// other use of the transport reads the replies of every pipeline begun first (each
    /// connection's replies come back in the order its commands went out).
    pub(crate) fn begin(
        &mut self,
        commands: Commands,
        keys: Vec<Vec<u8>>,
        deadline: Instant,
    ) -> u64 {
        let mut flight = Flight::new(commands, keys, deadline);
        // Routing may need a round trip of its own (the slot map, a new connection): the
        // replies of earlier pipelines are read first then.
        let cached = flight
            .pending
            .iter()
            .all(|&(i, _)| self.cached_route(flight.key(i)).is_some());
        if !cached {
            self.settle(deadline);
        }
        self.send_round(&mut flight);
        let id = self.next_flight;
        self.next_flight += 1;
        self.flights.push((id, flight));
        id
    }

    /// The replies of a pipeline [`Transport::begin`]: every reply read, redirects and
    /// retries followed, by `deadline` at the latest (a pipeline's own deadline is extended
    /// to it: its replies are waited for from when they are asked for, not from when it was
    /// sent).
    pub(crate) fn end(&mut self, id: u64, deadline: Instant) -> Result<Replies, RedisFilterError> {
        let at = self
            .flights
            .iter()
            .position(|(own, _)| *own == id)
            .ok_or_else(|| RedisFilterError::Protocol("a pipeline was lost".into()))?;
        // The replies of this pipeline and of those begun before it, not of later ones: they
        // are still being worked on.
        let mut flights = std::mem::take(&mut self.flights);
        for (_, flight) in flights.iter_mut().take(at + 1) {
            flight.deadline = flight.deadline.max(deadline);
            self.read_round(flight);
        }
        let (_, flight) = flights.remove(at);
        self.flights = flights;
        if !flight.pending.is_empty() && flight.failed.is_none() {
            // Commands to send again: no connection may have replies waiting then.
            self.settle(deadline);
        }
        self.complete(flight)
    }

    /// Forgets a pipeline begun and never ended (its caller gave up): its replies are read
    /// and dropped.
    pub(crate) fn abandon(&mut self, id: u64) {
        // Each by its own deadline: nobody waits for these.
        self.settle(Instant::now());
        self.flights.retain(|(own, _)| *own != id);
    }

    /// Reads the replies of every pipeline begun and not read yet, in the order they began:
    /// afterwards no connection has a reply waiting.
    ///
    /// Each is read by `deadline` at least (the deadline of what needs the connection now):
    /// replies are waited for from when they are asked for, not from when they were sent.
    fn settle(&mut self, deadline: Instant) {
        let mut flights = std::mem::take(&mut self.flights);
        for (_, flight) in &mut flights {
            flight.deadline = flight.deadline.max(deadline);
            self.read_round(flight);
        }
        self.flights = flights;
    }

    /// The node that serves `key` when that is known without asking and it is connected.
    fn cached_route(&self, key: &[u8]) -> Option<&str> {
        let addr = if self.is_cluster() {
            self.slots.get(usize::from(slot(key)))?.as_deref()?
        } else {
            self.single.as_deref()?
        };
        self.nodes.contains_key(addr).then_some(addr)
    }

    /// Whether another node may take over a node that cannot be reached.
    fn can_fail_over(&self) -> bool {
        !matches!(self.topology, Topology::Single(_))
    }

    /// Waits a little before trying again (doubling, within the deadline).
    fn pause(&self, wait: &mut Duration, deadline: Instant) {
        let left = deadline.saturating_duration_since(Instant::now());
        std::thread::sleep((*wait).min(left / 2));
        *wait = (*wait * 2).min(Duration::from_millis(500));
    }

    /// Every live connection's serial and identity.
    pub(crate) fn live(&self) -> Vec<(u64, NodeIdentity)> {
        self.nodes
            .values()
            .map(|live| (live.serial, live.node.identity.clone()))
            .collect()
    }

    /// The cluster's nodes as `CLUSTER NODES` lists them, from any node.
    pub(crate) fn cluster_nodes(&mut self, deadline: Instant) -> Result<String, RedisFilterError> {
        let (value, _) = self.query(&[b"CLUSTER", b"NODES"], None, deadline)?;
        text(&value).ok_or_else(|| RedisFilterError::Protocol("CLUSTER NODES gave no text".into()))
    }
}
