//! A service that answers "is this record new?" over HTTP, as a tokio service would: axum in
//! front, `Coalesced<SharedFilteredStore<PostgresStore>>` behind it, PostgreSQL as the primary
//! store and the shared filter in Redis.
//!
//! - `POST /records/{id}`: commits the record; `201 new` the first time, `200 seen` after.
//! - `GET /records/{id}`: `200 seen` or `404 not seen`; most "not seen" answers need no
//!   PostgreSQL query.
//! - `GET /metrics`: what this process's wrapper counted.
//!
//! A failure says what it was and that retrying is safe (`503`): no answer is ever a guess.
//!
//! `cargo run --release -p bloom-postgres --example service` starts its own PostgreSQL and
//! Redis (temporary directories, 127.0.0.1, random ports), creates the filter on first start
//! (`open_or_create`), serves, and drives it with a load client: 500 connections, each
//! posting records of an overlapping feed and asking about records never posted. It prints
//! the requests per second, and checks that every record PostgreSQL holds is answered
//! `seen` (none reported new twice). `--serve` keeps serving until the process is stopped,
//! and prints the address.

use std::collections::HashSet;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::get;
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::TcpStream;

use bloom_core::{FilterConfig, FilterParams, Layout};
use bloom_postgres::testing::{self, TempServer};
use bloom_postgres::{PostgresStore, PostgresStoreError};
use bloom_redis::{RedisTarget, SharedError, SharedFilteredStore};
use bloom_store::coalesce::Options;
use bloom_store::{Coalesced, CoalescedError, PrimaryStore};
use bloom_testing::redis::RedisServer;

type Seen = Coalesced<SharedFilteredStore<PostgresStore>>;
type Failure = CoalescedError<SharedError<PostgresStoreError>>;

const CONNECTIONS: u64 = 500;
const POSTS_PER_CONNECTION: u64 = 60;
const GETS_PER_CONNECTION: u64 = 20;
/// Record ids are drawn from this many: connections post overlapping records.
const DISTINCT: u64 = 20_000;

fn plan() -> FilterConfig {
    FilterConfig::new(
        FilterParams::planned(Layout::sharded(16).expect("16 shards"), 1_000_000, 0.01)
            .expect("a plan"),
    )
}

/// A failure, as an answer: what it was, and that retrying is safe.
fn unavailable(e: &Failure) -> (StatusCode, String) {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        format!("not answered ({e}); retrying is safe\n"),
    )
}

async fn post_record(State(seen): State<Seen>, Path(id): Path<String>) -> (StatusCode, String) {
    match seen.insert(&id).await {
        Ok(true) => (StatusCode::CREATED, "new\n".into()),
        Ok(false) => (StatusCode::OK, "seen\n".into()),
        Err(CoalescedError::Key(e)) => (StatusCode::BAD_REQUEST, format!("{e}\n")),
        Err(e) => unavailable(&e),
    }
}

async fn get_record(State(seen): State<Seen>, Path(id): Path<String>) -> (StatusCode, String) {
    match seen.contains(&id).await {
        Ok(found) if found.is_present() => (StatusCode::OK, "seen\n".into()),
        Ok(_) => (StatusCode::NOT_FOUND, "not seen\n".into()),
        Err(CoalescedError::Key(e)) => (StatusCode::BAD_REQUEST, format!("{e}\n")),
        Err(e) => unavailable(&e),
    }
}

async fn metrics(State(seen): State<Seen>) -> (StatusCode, String) {
    match seen.run(|s| s.metrics()).await {
        Ok(m) => (StatusCode::OK, format!("{m:?}\n")),
        Err(e) => unavailable(&e),
    }
}

fn app(seen: Seen) -> Router {
    Router::new()
        .route("/records/{id}", get(get_record).post(post_record))
        .route("/metrics", get(metrics))
        .with_state(seen)
}

/// One keep-alive HTTP/1.1 connection of the load client.
struct Client {
    reader: BufReader<tokio::net::tcp::OwnedReadHalf>,
    writer: tokio::net::tcp::OwnedWriteHalf,
}

impl Client {
    async fn connect(address: std::net::SocketAddr) -> std::io::Result<Self> {
        let (read, writer) = TcpStream::connect(address).await?.into_split();
        Ok(Self {
            reader: BufReader::new(read),
            writer,
        })
    }

    /// The status and body of one request.
    async fn call(&mut self, method: &str, path: &str) -> std::io::Result<(u16, String)> {
        let request =
            format!("{method} {path} HTTP/1.1\r\nHost: service\r\nContent-Length: 0\r\n\r\n");
        self.writer.write_all(request.as_bytes()).await?;
        let mut line = String::new();
        self.reader.read_line(&mut line).await?;
        let status = line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| std::io::Error::other(format!("not an HTTP status line: {line:?}")))?;
        let mut length = 0usize;
        loop {
            line.clear();
            if self.reader.read_line(&mut line).await? == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().map_err(std::io::Error::other)?;
            }
        }
        // Bodies here are a line; a longer one is refused rather than read without bound.
        if length > 64 * 1024 {
            return Err(std::io::Error::other("response body too long"));
        }
        let mut body = vec![0; length];
        self.reader.read_exact(&mut body).await?;
        Ok((status, String::from_utf8_lossy(&body).into_owned()))
    }
}

/// What the load client was told.
#[derive(Default)]
struct Tally {
    new: AtomicU64,
    seen: AtomicU64,
    not_seen: AtomicU64,
    unavailable: AtomicU64,
}

/// One connection's feed: posts of overlapping records, then lookups of records never posted.
async fn drive(
    address: std::net::SocketAddr,
    connection: u64,
    tally: Arc<Tally>,
) -> Result<Vec<String>, String> {
    let mut client = Client::connect(address).await.map_err(|e| e.to_string())?;
    let mut told_new = Vec::new();
    let mut state = connection.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for _ in 0..POSTS_PER_CONNECTION {
        // xorshift: a reproducible feed per connection.
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let id = format!("record-{}", state % DISTINCT);
        let (status, body) = client
            .call("POST", &format!("/records/{id}"))
            .await
            .map_err(|e| e.to_string())?;
        match status {
            201 => {
                tally.new.fetch_add(1, Ordering::Relaxed);
                told_new.push(id);
            }
            200 => _ = tally.seen.fetch_add(1, Ordering::Relaxed),
            503 => _ = tally.unavailable.fetch_add(1, Ordering::Relaxed),
            other => return Err(format!("POST {id}: {other} {body}")),
        }
    }
    for i in 0..GETS_PER_CONNECTION {
        let id = format!("never-{connection}-{i}");
        let (status, body) = client
            .call("GET", &format!("/records/{id}"))
            .await
            .map_err(|e| e.to_string())?;
        match status {
            404 => _ = tally.not_seen.fetch_add(1, Ordering::Relaxed),
            503 => _ = tally.unavailable.fetch_add(1, Ordering::Relaxed),
            other => return Err(format!("GET {id}: {other} {body}")),
        }
    }
    Ok(told_new)
}

fn installed(program: &str) -> bool {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).any(|dir| dir.join(program).is_file())
}

async fn serve_and_load(params: String, redis: String, serve_only: bool) -> Result<(), String> {
    let target = RedisTarget::single(&redis);
    let (seen, opened) = Coalesced::open(
        {
            let params = params.clone();
            move || {
                let store = PostgresStore::connect(&params).map_err(SharedError::Store)?;
                SharedFilteredStore::open_or_create(store, target, "records", plan())
            }
        },
        Options::default(),
    )
    .await
    .map_err(|e| e.to_string())?;
    println!("{opened}");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| e.to_string())?;
    let address = listener.local_addr().map_err(|e| e.to_string())?;
    let server = tokio::spawn(axum::serve(listener, app(seen.clone())).into_future());
    println!("serving on http://{address}/records/{{id}}");
    if serve_only {
        return server
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string());
    }

    let tally = Arc::new(Tally::default());
    let started = Instant::now();
    let connections: Vec<_> = (0..CONNECTIONS)
        .map(|c| tokio::spawn(drive(address, c, Arc::clone(&tally))))
        .collect();
    let mut told_new = HashSet::new();
    for connection in connections {
        for id in connection.await.map_err(|e| e.to_string())?? {
            if !told_new.insert(id.clone()) {
                return Err(format!("{id} was reported new twice"));
            }
        }
    }
    let elapsed = started.elapsed();
    let requests = CONNECTIONS * (POSTS_PER_CONNECTION + GETS_PER_CONNECTION);
    let t = |n: &AtomicU64| n.load(Ordering::Relaxed);
    println!(
        "{requests} requests from {CONNECTIONS} connections in {elapsed:.2?}: {:.0} requests/s",
        requests as f64 / elapsed.as_secs_f64()
    );
    println!(
        "  posts: {} new, {} seen; lookups of records never posted: {} not seen; {} not answered (503)",
        t(&tally.new),
        t(&tally.seen),
        t(&tally.not_seen),
        t(&tally.unavailable)
    );
    let metrics = seen.run(|s| s.metrics()).await.map_err(|e| e.to_string())?;
    println!("  wrapper: {metrics:?}");

    // Every record PostgreSQL holds is answered seen, and was reported new once.
    let committed = seen
        .run(|s| {
            let mut keys = Vec::new();
            s.store()
                .keys_since(bloom_store::DatasetGeneration::ZERO, &mut |k| {
                    keys.push(String::from_utf8_lossy(k).into_owned());
                })
                .map(|_| keys)
        })
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    let mut check = Client::connect(address).await.map_err(|e| e.to_string())?;
    for id in &committed {
        let (status, _) = check
            .call("GET", &format!("/records/{id}"))
            .await
            .map_err(|e| e.to_string())?;
        if status != 200 {
            return Err(format!("{id} is committed but was answered {status}"));
        }
    }
    println!(
        "{} records committed in PostgreSQL: every one answered seen, {} reported new once, none twice",
        committed.len(),
        told_new.len()
    );
    server.abort();
    Ok(())
}

fn main() -> ExitCode {
    let serve_only = std::env::args().any(|a| a == "--serve");
    if testing::server_programs().is_none() || !installed("redis-server") {
        eprintln!(
            "this example starts its own PostgreSQL and Redis servers, and their programs are not installed; install them with\n    sudo apt-get install -y postgresql redis-server\n({})",
            testing::INSTALL_HINT
        );
        return ExitCode::FAILURE;
    }
    let servers = TempServer::start()
        .map_err(|e| e.to_string())
        .map(|pg| (pg, RedisServer::start()));
    let (pg, redis) = match servers {
        Ok(servers) => servers,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!(
        "PostgreSQL on 127.0.0.1:{}, Redis on 127.0.0.1:{}",
        pg.port(),
        redis.port
    );
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(serve_and_load(
        pg.params("postgres"),
        redis.url(),
        serve_only,
    ));
    drop(runtime);
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
