//! How commands reach the nodes of a target: one server, a Redis Cluster (its slot map kept
//! here, `MOVED` and `ASK` followed inside pipelines), or the master a set of Sentinels names.
//! Every reply comes back with the connection that answered it, so that the filter can check
//! that node's identity against what its shards recorded.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use redis::{ConnectionAddr, ConnectionInfo, IntoConnectionInfo, Value};

use crate::error::RedisFilterError;
use crate::node::{Node, NodeIdentity, PROBE, remaining, text};
use crate::wire::{Commands, slot};

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

/// Asks one Sentinel for `master`'s address.
fn ask_sentinel(
    info: ConnectionInfo,
    tls_ca: Option<&[u8]>,
    master: &str,
    deadline: Instant,
    timeout: Duration,
) -> Result<(String, u16), RedisFilterError> {
    let mut node = Node::connect_plain(info, tls_ca, deadline, timeout)?;
    let mut commands = Commands::new();
    commands.push(&[b"SENTINEL", b"get-master-addr-by-name", master.as_bytes()]);
    let reply = node.round_trip(&commands, deadline, timeout)?;
    match reply.first() {
        Some(Value::Array(parts)) if parts.len() == 2 => {
            let host = parts.first().and_then(text).unwrap_or_default();
            let port = parts
                .get(1)
                .and_then(text)
                .and_then(|p| p.parse::<u16>().ok())
                .unwrap_or(0);
            Ok((host, port))
        }
        Some(Value::Nil) => Err(RedisFilterError::Unavailable(format!(
            "no Sentinel knows a master named {master:?}"
        ))),
        _ => Err(RedisFilterError::Protocol(
            "a Sentinel gave no master address".into(),
        )),
    }
}

fn at(template: &ConnectionInfo, host: &str, port: u16) -> ConnectionInfo {
    let addr = match template.addr() {
        ConnectionAddr::TcpTls {
            insecure,
            tls_params,
            ..
        } => ConnectionAddr::TcpTls {
            host: host.to_owned(),
            port,
            insecure: *insecure,
            tls_params: tls_params.clone(),
        },
        _ => ConnectionAddr::Tcp(host.to_owned(), port),
    };
    template.clone().set_addr(addr)
}

fn split_addr(addr: &str) -> Option<(&str, u16)> {
    let (host, port) = addr.rsplit_once(':')?;
    Some((
        host.trim_start_matches('[').trim_end_matches(']'),
        port.parse().ok()?,
    ))
}

/// Parses target URLs; the error never repeats them (they may carry passwords).
pub(crate) fn parse_urls(urls: &[String]) -> Result<Vec<ConnectionInfo>, RedisFilterError> {
    urls.iter()
        .enumerate()
        .map(|(i, url)| {
            url.as_str()
                .into_connection_info()
                .map_err(|e| RedisFilterError::InvalidUrl {
                    index: i + 1,
                    reason: e.kind_str(),
                })
        })
        .collect()
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

    /// The node of a single or Sentinel target, connected.
    fn single_node(&mut self, deadline: Instant) -> Result<String, RedisFilterError> {
        if let Some(addr) = &self.single
            && self.nodes.contains_key(addr)
        {
            return Ok(addr.clone());
        }
        let info = match &self.topology {
            Topology::Single(info) => info.clone(),
            Topology::Sentinel {
                sentinels,
                master,
                template,
            } => {
                let (sentinels, master, template) =
                    (sentinels.clone(), master.clone(), template.clone());
                self.resolve_master(&sentinels, &master, &template, deadline)?
            }
            Topology::Cluster(_) => {
                return Err(RedisFilterError::Protocol(
                    "a cluster has no single node".into(),
                ));
            }
        };
        let addr = self.connect(info, deadline)?;
        let is_master = self
            .nodes
            .get(&addr)
            .is_some_and(|live| live.node.identity.master);
        if matches!(self.topology, Topology::Sentinel { .. }) && !is_master {
            // The Sentinels named a node that is no master (yet): not one to write to.
            self.drop_node(&addr);
            return Err(RedisFilterError::Unavailable(
                "the node the Sentinels name as master is not a master (a failover in progress)"
                    .into(),
            ));
        }
        self.single = Some(addr.clone());
        Ok(addr)
    }

    /// Asks each Sentinel in turn for the master's address.
    fn resolve_master(
        &self,
        sentinels: &[ConnectionInfo],
        master: &str,
        template: &ConnectionInfo,
        deadline: Instant,
    ) -> Result<ConnectionInfo, RedisFilterError> {
        let mut last = None;
        for (i, sentinel) in sentinels.iter().enumerate() {
            // Each Sentinel gets its share of what is left, so that one that hangs (stopped,
            // or a black hole) leaves time to ask the others; the last gets all that is left.
            // The question runs on a thread of its own, given up on at its share's end (a
            // connection's setup is not always bounded by its timeout).
            let own_deadline = share_of(deadline, sentinels.len() - i);
            let share = own_deadline.saturating_duration_since(Instant::now());
            // A Sentinel has no databases: the URL's db is the master's, never SELECTed on a
            // Sentinel (its credentials are kept: Sentinels often share them).
            let settings = sentinel.redis_settings().clone().set_db(0);
            let info = sentinel.clone().set_redis_settings(settings);
            let (tls_ca, timeout, master_name) =
                (self.tls_ca.clone(), self.timeout, master.to_owned());
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let _ = tx.send(ask_sentinel(
                    info,
                    tls_ca.as_deref(),
                    &master_name,
                    own_deadline,
                    timeout,
                ));
            });
            let asked = match rx.recv_timeout(share) {
                Ok(answer) => answer,
                Err(_) => Err(RedisFilterError::Timeout { timeout }),
            };
            match asked {
                Ok((host, port)) => return Ok(at(template, &host, port)),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| RedisFilterError::Protocol("no Sentinel given".into())))
    }

    /// Reads the cluster's slot map from the first node that answers.
    fn refresh_slots(&mut self, deadline: Instant) -> Result<(), RedisFilterError> {
        let Topology::Cluster(seeds) = &self.topology else {
            return Ok(());
        };
        let template = seeds.first().cloned();
        let mut candidates: Vec<ConnectionInfo> = seeds.clone();
        if let Some(template) = &template {
            for addr in self.nodes.keys() {
                if let Some((host, port)) = split_addr(addr) {
                    candidates.insert(0, at(template, host, port));
                }
            }
        }
        let mut last = None;
        let count = candidates.len();
        for (i, info) in candidates.into_iter().enumerate() {
            // Each candidate gets its share of what is left (the last all of it): a seed that
            // hangs leaves time to ask the others.
            let deadline = share_of(deadline, count - i);
            let asked_host = match info.addr() {
                ConnectionAddr::Tcp(host, _) | ConnectionAddr::TcpTls { host, .. } => host.clone(),
                _ => String::new(),
            };
            let addr = match self.connect(info, deadline) {
                Ok(addr) => addr,
                Err(e) => {
                    last = Some(e);
                    continue;
                }
            };
            let mut commands = Commands::new();
            commands.push(&[b"CLUSTER", b"SLOTS"]);
            let reply = match self.nodes.get_mut(&addr) {
                Some(live) => live.node.round_trip(&commands, deadline, self.timeout),
                None => continue,
            };
            match reply {
                Ok(values) => match values.first() {
                    Some(Value::Array(ranges)) => {
                        let mut slots = vec![None; 16384];
                        for range in ranges {
                            let Value::Array(parts) = range else { continue };
                            let (
                                Some(Value::Int(start)),
                                Some(Value::Int(end)),
                                Some(Value::Array(master)),
                            ) = (parts.first(), parts.get(1), parts.get(2))
                            else {
                                continue;
                            };
                            let host = master.first().and_then(text).unwrap_or_default();
                            let host = if host.is_empty() {
                                asked_host.clone()
                            } else {
                                host
                            };
                            let Some(Value::Int(port)) = master.get(1) else {
                                continue;
                            };
                            let owner = format!("{host}:{port}");
                            for s in (*start).max(0)..=(*end).min(16383) {
                                if let Some(entry) = slots.get_mut(s as usize) {
                                    *entry = Some(owner.clone());
                                }
                            }
                        }
                        self.slots = slots;
                        return Ok(());
                    }
                    Some(Value::ServerError(e)) => {
                        last = Some(RedisFilterError::Protocol(format!(
                            "CLUSTER SLOTS was refused ({}): is this a cluster?",
                            e.code()
                        )));
                    }
                    _ => {
                        last = Some(RedisFilterError::Protocol(
                            "CLUSTER SLOTS gave no map".into(),
                        ))
                    }
                },
                Err(e) => {
                    self.drop_node(&addr);
                    last = Some(e);
                }
            }
        }
        Err(last.unwrap_or_else(|| RedisFilterError::Protocol("no cluster node given".into())))
    }

    /// The node that serves `key`, connected.
    fn node_for(&mut self, key: &[u8], deadline: Instant) -> Result<String, RedisFilterError> {
        if !self.is_cluster() {
            return self.single_node(deadline);
        }
        if self.slots.is_empty() {
            self.refresh_slots(deadline)?;
        }
        let s = usize::from(slot(key));
        let owner = match self.slots.get(s).cloned().flatten() {
            Some(owner) => owner,
            None => {
                self.refresh_slots(deadline)?;
                self.slots.get(s).cloned().flatten().ok_or_else(|| {
                    RedisFilterError::Unavailable(format!("no cluster node serves slot {s}"))
                })?
            }
        };
        self.connect_addr(&owner, deadline)
    }

    fn connect_addr(&mut self, addr: &str, deadline: Instant) -> Result<String, RedisFilterError> {
        if self.nodes.contains_key(addr) {
            return Ok(addr.to_owned());
        }
        let template = match &self.topology {
            Topology::Cluster(seeds) => seeds.first().cloned(),
            Topology::Single(info) => Some(info.clone()),
            Topology::Sentinel { template, .. } => Some(template.clone()),
        }
        .ok_or_else(|| RedisFilterError::Protocol("no node given".into()))?;
        let (host, port) = split_addr(addr)
            .ok_or_else(|| RedisFilterError::Protocol(format!("bad node address {addr}")))?;
        self.connect(at(&template, host, port), deadline)
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
        self.settle();
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
        self.settle();
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
            self.settle();
        }
        self.send_round(&mut flight);
        let id = self.next_flight;
        self.next_flight += 1;
        self.flights.push((id, flight));
        id
    }

    /// The replies of a pipeline [`Transport::begin`]: every reply read, redirects and
    /// retries followed.
    pub(crate) fn end(&mut self, id: u64) -> Result<Replies, RedisFilterError> {
        let at = self
            .flights
            .iter()
            .position(|(own, _)| *own == id)
            .ok_or_else(|| RedisFilterError::Protocol("a pipeline was lost".into()))?;
        // The replies of this pipeline and of those begun before it, not of later ones: they
        // are still being worked on.
        let mut flights = std::mem::take(&mut self.flights);
        for (_, flight) in flights.iter_mut().take(at + 1) {
            self.read_round(flight);
        }
        let (_, flight) = flights.remove(at);
        self.flights = flights;
        if !flight.pending.is_empty() && flight.failed.is_none() {
            // Commands to send again: no connection may have replies waiting then.
            self.settle();
        }
        self.complete(flight)
    }

    /// Forgets a pipeline begun and never ended (its caller gave up): its replies are read
    /// and dropped.
    pub(crate) fn abandon(&mut self, id: u64) {
        self.settle();
        self.flights.retain(|(own, _)| *own != id);
    }

    /// Reads the replies of every pipeline begun and not read yet, in the order they began:
    /// afterwards no connection has a reply waiting.
    fn settle(&mut self) {
        let mut flights = std::mem::take(&mut self.flights);
        for (_, flight) in &mut flights {
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

    /// Reads what a flight has sent, then sends (and reads) whatever must go again, until
    /// every command has its reply.
    fn complete(&mut self, mut flight: Flight) -> Result<Replies, RedisFilterError> {
        loop {
            self.read_round(&mut flight);
            if let Some(e) = flight.failed.take() {
                return Err(e);
            }
            if flight.pending.is_empty() {
                break;
            }
            self.send_round(&mut flight);
        }
        Ok(Replies {
            values: flight
                .values
                .into_iter()
                .map(|v| v.unwrap_or(Value::Nil))
                .collect(),
            answered_by: flight.answered_by,
        })
    }

    /// Routes the flight's pending commands and sends each node its share in one write (all
    /// nodes first, so that a cluster's nodes work at the same time). A failure is kept in
    /// the flight.
    fn send_round(&mut self, flight: &mut Flight) {
        if flight.failed.is_some() || flight.pending.is_empty() {
            return;
        }
        flight.attempts += 1;
        if flight.attempts > MAX_ATTEMPTS {
            flight.failed = Some(RedisFilterError::Unavailable(format!(
                "the cluster kept redirecting or refusing the commands after {MAX_ATTEMPTS} attempts"
            )));
            return;
        }
        let deadline = flight.deadline;
        let mut by_node: Vec<(String, Vec<(usize, bool)>)> = Vec::new();
        let mut failed_route = None;
        for &(i, ref ask) in &flight.pending {
            let addr = match ask {
                Some(target) => self.connect_addr(target, deadline),
                None => self.node_for(flight.key(i), deadline),
            };
            match addr {
                Ok(addr) => match by_node.iter_mut().find(|(a, _)| *a == addr) {
                    Some((_, list)) => list.push((i, ask.is_some())),
                    None => by_node.push((addr, vec![(i, ask.is_some())])),
                },
                Err(e) => failed_route = Some(e),
            }
        }
        if let Some(e) = failed_route {
            // A single server that refuses is down: say so at once. A cluster or a Sentinel
            // may be failing over: look again a few times, briefly.
            if !self.can_fail_over()
                || flight.attempts >= ROUTE_ATTEMPTS
                || remaining(deadline, self.timeout).is_err()
            {
                flight.failed = Some(e);
            } else {
                self.pause(&mut flight.wait, deadline);
                self.slots.clear();
            }
            return;
        }
        flight.pending.clear();
        let timeout = self.timeout;
        for (addr, list) in by_node {
            let Some(live) = self.nodes.get_mut(&addr) else {
                flight.pending.extend(list.iter().map(|&(i, _)| (i, None)));
                continue;
            };
            let mut bytes = Vec::new();
            for &(i, asking) in &list {
                if asking {
                    bytes.extend_from_slice(b"*1\r\n$6\r\nASKING\r\n");
                }
                bytes.extend_from_slice(flight.commands.get(i));
            }
            bytes.extend_from_slice(PROBE);
            let sent = live
                .node
                .bound(deadline, timeout)
                .and_then(|()| live.node.send(&bytes, timeout));
            flight.exchanges.push(Exchange {
                addr,
                serial: live.serial,
                list,
                sent,
            });
        }
    }

    /// Reads the replies of what a flight sent: a reply is kept, a redirect or a busy node
    /// puts its command back to be sent again, a failed connection is dropped and its
    /// commands go again to whoever serves their keys now.
    fn read_round(&mut self, flight: &mut Flight) {
        let deadline = flight.deadline;
        let timeout = self.timeout;
        let mut busy = false;
        let mut moved = false;
        // A Sentinel's master that is one no more: the Sentinels are asked again.
        let mut demoted = false;
        for exchange in std::mem::take(&mut flight.exchanges) {
            let Exchange {
                addr,
                serial,
                list,
                sent,
            } = exchange;
            let again = |flight: &mut Flight| {
                flight.pending.extend(list.iter().map(|&(i, _)| (i, None)));
            };
            // The connection failed (or was remade) since these commands went out.
            let Some(live) = self
                .nodes
                .get_mut(&addr)
                .filter(|live| live.serial == serial)
            else {
                moved = true;
                again(flight);
                continue;
            };
            let exchanged = sent.and_then(|()| {
                live.node.bound(deadline, timeout)?;
                let mut got = Vec::with_capacity(list.len());
                for &(_, asking) in &list {
                    if asking {
                        live.node.recv(timeout)?;
                    }
                    got.push(live.node.recv(timeout)?);
                }
                let probe = live.node.recv(timeout)?;
                Ok::<_, RedisFilterError>((got, live.node.identity.unchanged_in(&probe)))
            });
            match exchanged {
                Ok((_, false)) => {
                    // The node changed role or history under the connection (a failover on
                    // a live server): nothing it answered is kept. A new connection reads
                    // who it is now, and the filter judges that.
                    self.drop_node(&addr);
                    moved = true;
                    again(flight);
                }
                Ok((got, true)) => {
                    for (&(i, _), value) in list.iter().zip(got) {
                        match redirect(&value) {
                            // One server that became a replica: an error to report, not a
                            // place to go.
                            Some(Redirect::Moved)
                                if matches!(self.topology, Topology::Single(_)) =>
                            {
                                if let Some(slot) = flight.values.get_mut(i) {
                                    *slot = Some(value);
                                }
                                if let Some(by) = flight.answered_by.get_mut(i) {
                                    *by = serial;
                                }
                            }
                            Some(Redirect::Moved) => {
                                moved = true;
                                demoted = demoted || !self.is_cluster();
                                flight.pending.push((i, None));
                            }
                            Some(Redirect::Ask(target)) => flight.pending.push((i, Some(target))),
                            Some(Redirect::Busy) => {
                                busy = true;
                                flight.pending.push((i, None));
                            }
                            None => {
                                if let Some(slot) = flight.values.get_mut(i) {
                                    *slot = Some(value);
                                }
                                if let Some(by) = flight.answered_by.get_mut(i) {
                                    *by = serial;
                                }
                            }
                        }
                    }
                }
                Err(e) => {
                    // The connection is not trusted with anything more. A single server's
                    // connection may simply have died with a restart of the server: one new
                    // connection is tried (it reads the node again, so a restart is seen),
                    // not more.
                    self.drop_node(&addr);
                    if matches!(e, RedisFilterError::Timeout { .. })
                        || (!self.can_fail_over() && flight.attempts > 1)
                        || remaining(deadline, self.timeout).is_err()
                    {
                        if flight.failed.is_none() {
                            flight.failed = Some(e);
                        }
                    } else {
                        moved = true;
                    }
                    again(flight);
                }
            }
        }
        if moved {
            self.slots.clear();
        }
        if demoted && let Some(addr) = self.single.clone() {
            self.drop_node(&addr);
        }
        if flight.failed.is_none()
            && (busy || (moved && !flight.pending.is_empty() && flight.attempts > 1))
        {
            self.pause(&mut flight.wait, deadline);
        }
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

enum Redirect {
    Moved,
    Ask(String),
    Busy,
}

fn redirect(value: &Value) -> Option<Redirect> {
    let Value::ServerError(error) = value else {
        return None;
    };
    let target = || {
        error
            .details()
            .and_then(|d| d.split_whitespace().nth(1))
            .map(str::to_owned)
    };
    match error.code() {
        "MOVED" | "READONLY" => Some(Redirect::Moved),
        "ASK" => target().map(Redirect::Ask),
        "TRYAGAIN" | "CLUSTERDOWN" | "LOADING" | "MASTERDOWN" => Some(Redirect::Busy),
        _ => None,
    }
}
