//! A pipeline's rounds: sent to the nodes that own its keys, replies read back, `MOVED` and
//! `ASK` followed, failed nodes retried until the deadline.

use redis::Value;

use crate::error::RedisFilterError;
use crate::node::{PROBE, remaining};

use super::redirect::{Redirect, redirect};
use super::{Exchange, Flight, MAX_ATTEMPTS, ROUTE_ATTEMPTS, Replies, Topology, Transport};

impl Transport {
    /// Reads what a flight has sent, then sends (and reads) whatever must go again, until
    /// every command has its reply.
    pub(super) fn complete(&mut self, mut flight: Flight) -> Result<Replies, RedisFilterError> {
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
    pub(super) fn send_round(&mut self, flight: &mut Flight) {
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
    pub(super) fn read_round(&mut self, flight: &mut Flight) {
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
}
