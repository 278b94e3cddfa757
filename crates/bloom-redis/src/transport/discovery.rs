//! Finding the nodes of a target: the URLs, the master a set of Sentinels names.

use std::time::{Duration, Instant};

use redis::{ConnectionAddr, ConnectionInfo, IntoConnectionInfo, Value};

use crate::error::RedisFilterError;
use crate::node::{Node, text};
use crate::wire::Commands;

use super::KindStr;

/// Asks one Sentinel for `master`'s address.
pub(super) fn ask_sentinel(
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

pub(super) fn at(template: &ConnectionInfo, host: &str, port: u16) -> ConnectionInfo {
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

pub(super) fn split_addr(addr: &str) -> Option<(&str, u16)> {
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
