//! Which node a command goes to: the one server, the Sentinels' master, or a cluster's slot
//! owner (the slot map refreshed from `CLUSTER SLOTS`).

use std::time::Instant;

use redis::{ConnectionAddr, ConnectionInfo, Value};

use crate::error::RedisFilterError;
use crate::node::text;
use crate::wire::{Commands, slot};

use super::discovery::{ask_sentinel, at, split_addr};
use super::{Topology, Transport, share_of};

impl Transport {
    /// The node of a single or Sentinel target, connected.
    pub(super) fn single_node(&mut self, deadline: Instant) -> Result<String, RedisFilterError> {
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
    pub(super) fn resolve_master(
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
    pub(super) fn refresh_slots(&mut self, deadline: Instant) -> Result<(), RedisFilterError> {
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
    pub(super) fn node_for(
        &mut self,
        key: &[u8],
        deadline: Instant,
    ) -> Result<String, RedisFilterError> {
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

    pub(super) fn connect_addr(
        &mut self,
        addr: &str,
        deadline: Instant,
    ) -> Result<String, RedisFilterError> {
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
}
