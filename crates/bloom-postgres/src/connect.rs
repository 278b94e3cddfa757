//! Reaching a server: the preflight that it speaks PostgreSQL, the opening of the store's
//! tables, and the start of a writing transaction.

use std::time::Duration;

use postgres::{Client, IsolationLevel};

use bloom_format::StoreIdentity;
use bloom_store::HistoryPoint;

use crate::PostgresStoreError;
use crate::schema::{self, CREATE_LOCK_CLASS, Namespace};
use crate::values::{from_hex, point};

/// Pins name lookup to the system catalog, so that no function or operator the store's
/// SQL names unqualified (`octet_length`, `sha256`, `=`, the catalog's own) can be shadowed
/// by one of the same name in another schema of the `search_path`.
pub(crate) const SESSION_SEARCH_PATH: &str = "SET search_path = pg_catalog, pg_temp;";

/// Asks every TCP address the client may try (each `hostaddr`, or every address of each
/// host name) whether it speaks PostgreSQL (an `SSLRequest`, which a server answers with one
/// byte at once), within the connect timeout. The client's own timeout covers only the TCP
/// connection, and a listener that takes the connection and never answers (another service
/// on the port, a stalled proxy) would hang its startup without bound: such an address fails
/// the connection at once. An address that refuses the connection fails fast in the client
/// too, and is passed over; when no TCP address answers at all, that is the error.
pub(crate) fn preflight(config: &postgres::Config) -> Result<(), PostgresStoreError> {
    use std::io::{Read as _, Write as _};
    use std::net::{SocketAddr, ToSocketAddrs as _};
    let timeout = config
        .get_connect_timeout()
        .copied()
        .unwrap_or(Duration::from_secs(10));
    let ports = config.get_ports();
    let port_of = |i: usize| ports.get(i).or(ports.first()).copied().unwrap_or(5432);
    let mut targets: Vec<(String, Vec<SocketAddr>)> = Vec::new();
    if config.get_hostaddrs().is_empty() {
        for (i, host) in config.get_hosts().iter().enumerate() {
            if let postgres::config::Host::Tcp(name) = host {
                let port = port_of(i);
                let addresses = (name.as_str(), port)
                    .to_socket_addrs()
                    .map(Iterator::collect)
                    .unwrap_or_default();
                targets.push((format!("{name}:{port}"), addresses));
            }
        }
    } else {
        for (i, address) in config.get_hostaddrs().iter().enumerate() {
            let address = SocketAddr::new(*address, port_of(i));
            targets.push((address.to_string(), vec![address]));
        }
    }
    if targets.is_empty() {
        return Ok(()); // Unix sockets only: a local server.
    }
    let mut answered = false;
    let mut last = String::new();
    for (name, addresses) in &targets {
        for address in addresses {
            let Ok(mut stream) = std::net::TcpStream::connect_timeout(address, timeout) else {
                last = format!("{name}: nothing accepts connections at {address}");
                continue;
            };
            let asked = (|| -> std::io::Result<u8> {
                stream.set_read_timeout(Some(timeout))?;
                stream.set_write_timeout(Some(timeout))?;
                // Length 8, then the SSLRequest code 80877103.
                stream.write_all(&[0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f])?;
                let mut answer = [0u8];
                stream.read_exact(&mut answer)?;
                Ok(answer[0])
            })();
            match asked {
                Ok(b'N' | b'S') => answered = true,
                Ok(other) => {
                    return Err(PostgresStoreError::Unreachable(format!(
                        "{name} ({address}) answered {other:#04x}, not as PostgreSQL does"
                    )));
                }
                Err(e) => {
                    return Err(PostgresStoreError::Unreachable(format!(
                        "{name} ({address}) took the connection but did not answer as PostgreSQL does: {e}"
                    )));
                }
            }
        }
    }
    if answered {
        Ok(())
    } else {
        Err(PostgresStoreError::Unreachable(if last.is_empty() {
            "no address to connect to".into()
        } else {
            last
        }))
    }
}

/// A new session: the preflight, then the client's connection. A server that refuses it for
/// having as many clients as it allows is [`PostgresStoreError::ServerFull`], not unreachable.
pub(crate) fn connect(config: &postgres::Config) -> Result<Client, PostgresStoreError> {
    preflight(config)?;
    config.connect(postgres::NoTls).map_err(|e| {
        match e.as_db_error().filter(|db| db.code().code() == "53300") {
            Some(db) => PostgresStoreError::ServerFull(db.message().to_owned()),
            None => e.into(),
        }
    })
}

/// Starts the writing transaction and takes the head, in one round trip.
pub(crate) fn begin_holding_head(
    client: &mut Client,
    begin: &str,
    identity: StoreIdentity,
    namespace: &Namespace,
) -> Result<HistoryPoint, PostgresStoreError> {
    let missing = || PostgresStoreError::Damaged {
        what: "the head of the change log",
        detail: "missing".into(),
    };
    let row = crate::statements::timed("begin_holding_head", || client.simple_query(begin))?
        .into_iter()
        .find_map(|message| match message {
            postgres::SimpleQueryMessage::Row(row) => Some(row),
            _ => None,
        })
        .ok_or_else(missing)?;
    let seq: i64 = row
        .get(0)
        .and_then(|s| s.parse().ok())
        .ok_or_else(missing)?;
    let digest = row.get(1).and_then(from_hex).ok_or_else(missing)?;
    // Another store in its place (recreated, or restored from another's backup) is never
    // written with this one's history.
    if row.get(2).and_then(from_hex).as_deref() != Some(identity.to_bytes().as_slice()) {
        return Err(PostgresStoreError::Replaced {
            namespace: namespace.as_str().to_owned(),
            why: "a writing transaction found another store in its place".into(),
        });
    }
    point(identity, seq, &digest)
}

/// Reads the store's tables, creating them when there are none (under a transaction-level
/// advisory lock, so that processes opening a new store at once create it once), and checks
/// them. Returns the identity.
pub(crate) fn open_schema(
    client: &mut Client,
    ns: &Namespace,
) -> Result<StoreIdentity, PostgresStoreError> {
    // A name PostgreSQL would need quoted (a reserved word such as `user`) is refused: the
    // store's SQL writes it bare.
    let quoted: String = client
        .query_one("SELECT quote_ident($1)", &[&ns.as_str()])?
        .get(0);
    if quoted != ns.as_str() {
        return Err(PostgresStoreError::InvalidNamespace(ns.as_str().to_owned()));
    }
    {
        let mut tx = client
            .build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()?;
        let state = schema::read_state(&mut tx, ns)?;
        if state.is_created() {
            let identity = schema::check(&mut tx, ns, &state)?;
            tx.commit()?;
            return Ok(identity);
        }
    }
    let mut tx = client
        .build_transaction()
        .isolation_level(IsolationLevel::ReadCommitted)
        .start()?;
    tx.execute(
        "SELECT pg_advisory_xact_lock($1, hashtext($2))",
        &[&CREATE_LOCK_CLASS, &ns.as_str()],
    )?;
    let state = schema::read_state(&mut tx, ns)?;
    let identity = if state.is_created() {
        schema::check(&mut tx, ns, &state)?
    } else {
        schema::create(&mut tx, ns, &state)?
    };
    tx.commit()?;
    Ok(identity)
}
