//! A service that answers "is this record new?" over HTTP, as a tokio service would: axum in
//! front, `Coalesced<SharedFilteredStore<PostgresStore>>` behind it, PostgreSQL as the primary
//! store and the shared filter in Redis.
//!
//! - `POST /records/{id}`: commits the record; `201 new` the first time, `200 seen` after.
//! - `GET /records/{id}`: `200 seen` or `404 not seen`; most "not seen" answers need no
//!   PostgreSQL query.
//! - `GET /metrics`: the wrapper's metrics for Prometheus (see docs/operations.md): its
//!   counts, the shared filter's standing (fill, predicted and measured false-positive
//!   rates, capacity left, trust), and the Redis and PostgreSQL latencies. Trust decisions
//!   and repairs are logged to standard error as `tracing` events.
//!
//! A failure says what it was and that retrying is safe (`503`): no answer is ever a guess.
//!
//! `cargo run --release -p bloom-postgres --example service` starts its own PostgreSQL and
//! Redis (temporary directories, 127.0.0.1, random ports), creates the filter on first start
//! (`open_or_create`), serves, and drives it with a load client: 500 connections, each
//! posting records of an overlapping feed and asking about records never posted. It prints
//! the requests per second, and checks that every record PostgreSQL holds is answered
//! `seen` (none reported new twice), then scrapes its own `/metrics`. `--serve` keeps serving
//! until the process is stopped, and prints the address.
//!
//! `cargo test -p bloom-postgres --example service` runs a smaller load and checks the
//! scrape's names and values against what the load did.

use std::collections::HashSet;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::TcpStream;

use bloom_core::{FilterConfig, FilterParams, Layout, Plan};
use bloom_postgres::testing::{self, TempServer};
use bloom_postgres::{PostgresStore, PostgresStoreError};
use bloom_redis::{RedisTarget, SharedError, SharedFilteredStore};
use bloom_store::coalesce::Options;
use bloom_store::{Coalesced, CoalescedError, PrimaryStore};
use bloom_testing::redis::RedisServer;

type Seen = Coalesced<SharedFilteredStore<PostgresStore>>;
type Failure = CoalescedError<SharedError<PostgresStoreError>>;

/// How hard the load client drives the service.
#[derive(Clone, Copy)]
struct Load {
    connections: u64,
    posts_per_connection: u64,
    gets_per_connection: u64,
    /// Record ids are drawn from this many: connections post overlapping records.
    distinct: u64,
}

/// The example's load.
const LOAD: Load = Load {
    connections: 500,
    posts_per_connection: 60,
    gets_per_connection: 20,
    distinct: 20_000,
};

/// The name of the shared filter: the `filter` label of its metrics.
const FILTER: &str = "records";

/// The shared filter: a million records at 1 %, with the plan recorded so that its
/// capacity gauges (and `bloom redis info`) can judge it.
fn plan() -> FilterConfig {
    FilterConfig::new(
        FilterParams::planned(Layout::sharded(16).expect("16 shards"), 1_000_000, 0.01)
            .expect("a plan"),
    )
    .with_plan(Plan::new(1_000_000, 0.01))
}

/// A failure, as an answer: what it was, and that retrying is safe.
fn unavailable(e: &Failure) -> (StatusCode, String) {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        format!("not answered ({e}); retrying is safe\n"),
    )
}

/// What the handlers share: the wrapper, and the metrics it records into.
#[derive(Clone)]
struct Service {
    seen: Seen,
    prometheus: PrometheusHandle,
    /// The last scrape and when it was made: scrapes run one at a time, and one made within
    /// a second of the last is answered from it, so that `/metrics` (no authentication here)
    /// cannot be used to load Redis.
    scraped: Arc<tokio::sync::Mutex<Option<(Instant, String)>>>,
}

async fn post_record(
    State(Service { seen, .. }): State<Service>,
    Path(id): Path<String>,
) -> (StatusCode, String) {
    match seen.insert(&id).await {
        Ok(true) => (StatusCode::CREATED, "new\n".into()),
        Ok(false) => (StatusCode::OK, "seen\n".into()),
        Err(CoalescedError::Key(e)) => (StatusCode::BAD_REQUEST, format!("{e}\n")),
        Err(e) => unavailable(&e),
    }
}

async fn get_record(
    State(Service { seen, .. }): State<Service>,
    Path(id): Path<String>,
) -> (StatusCode, String) {
    match seen.contains(&id).await {
        Ok(found) if found.is_present() => (StatusCode::OK, "seen\n".into()),
        Ok(_) => (StatusCode::NOT_FOUND, "not seen\n".into()),
        Err(CoalescedError::Key(e)) => (StatusCode::BAD_REQUEST, format!("{e}\n")),
        Err(e) => unavailable(&e),
    }
}

/// Prometheus's scrape: the wrapper's `metrics()` sets the gauges of the shared filter's
/// standing (one round trip to Redis), then every metric is rendered.
async fn metrics(State(service): State<Service>) -> axum::response::Response {
    let mut scraped = service.scraped.lock().await;
    let body = match &*scraped {
        Some((at, body)) if at.elapsed() < std::time::Duration::from_secs(1) => body.clone(),
        _ => {
            // A Redis that cannot be read leaves the gauges as they were; the counters are
            // current.
            let _ = service.seen.run(|s| s.metrics()).await;
            let body = service.prometheus.render();
            *scraped = Some((Instant::now(), body.clone()));
            body
        }
    };
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], body).into_response()
}

fn app(service: Service) -> Router {
    Router::new()
        .route("/records/{id}", get(get_record).post(post_record))
        .route("/metrics", get(metrics))
        .with_state(service)
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
        // Bodies here are a line or a scrape; a longer one is refused rather than read
        // without bound.
        if length > 1 << 20 {
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
    load: Load,
    connection: u64,
    tally: Arc<Tally>,
) -> Result<Vec<String>, String> {
    let mut client = Client::connect(address).await.map_err(|e| e.to_string())?;
    let mut told_new = Vec::new();
    let mut state = connection.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for _ in 0..load.posts_per_connection {
        // xorshift: a reproducible feed per connection.
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let id = format!("record-{}", state % load.distinct);
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
    for i in 0..load.gets_per_connection {
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

/// What a load run found.
struct Report {
    /// Records the service answered `201 new` (each once).
    told_new: usize,
    /// Records PostgreSQL holds, each answered `seen` afterwards.
    committed: usize,
    /// Lookups of records never posted, answered `404 not seen`.
    not_seen: u64,
    /// `/metrics` after the load and the check.
    scrape: String,
}

/// Serves, and unless `serve_only`, drives `load` through the service, checks that every
/// committed record is answered seen, and scrapes `/metrics`. The metrics recorder must be
/// installed first: the wrapper registers its metrics as it opens.
async fn serve_and_load(
    params: String,
    redis: String,
    prometheus: PrometheusHandle,
    load: Load,
    serve_only: bool,
) -> Result<Report, String> {
    let target = RedisTarget::single(&redis);
    let (seen, opened) = Coalesced::open(
        {
            let params = params.clone();
            move || {
                let store = PostgresStore::connect(&params).map_err(SharedError::Store)?;
                SharedFilteredStore::open_or_create(store, target, FILTER, plan())
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
    let service = Service {
        seen: seen.clone(),
        prometheus,
        scraped: Arc::default(),
    };
    let server = tokio::spawn(axum::serve(listener, app(service)).into_future());
    println!("serving on http://{address}/records/{{id}} and http://{address}/metrics");
    if serve_only {
        server
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())?;
        return Err("the server stopped".into());
    }

    let tally = Arc::new(Tally::default());
    let started = Instant::now();
    let connections: Vec<_> = (0..load.connections)
        .map(|c| tokio::spawn(drive(address, load, c, Arc::clone(&tally))))
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
    let requests = load.connections * (load.posts_per_connection + load.gets_per_connection);
    let t = |n: &AtomicU64| n.load(Ordering::Relaxed);
    println!(
        "{requests} requests from {} connections in {elapsed:.2?}: {:.0} requests/s",
        load.connections,
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
    let (status, scrape) = check
        .call("GET", "/metrics")
        .await
        .map_err(|e| e.to_string())?;
    if status != 200 {
        return Err(format!("GET /metrics: {status} {scrape}"));
    }
    server.abort();
    Ok(Report {
        told_new: told_new.len(),
        committed: committed.len(),
        not_seen: t(&tally.not_seen),
        scrape,
    })
}

/// Installs the process's metrics recorder (Prometheus) and its event subscriber (to
/// standard error), before any wrapper opens.
fn observe() -> Result<PrometheusHandle, String> {
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_max_level(tracing::Level::INFO)
        .try_init();
    PrometheusBuilder::new()
        .install_recorder()
        .map_err(|e| format!("installing the Prometheus recorder: {e}"))
}

/// Starts PostgreSQL and Redis, and runs `serve_and_load` on a tokio runtime.
fn run(load: Load, serve_only: bool) -> Result<Report, String> {
    let prometheus = observe()?;
    let pg = TempServer::start().map_err(|e| e.to_string())?;
    let redis = RedisServer::start();
    println!(
        "PostgreSQL on 127.0.0.1:{}, Redis on 127.0.0.1:{}",
        pg.port(),
        redis.port
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(serve_and_load(
        pg.params("postgres"),
        redis.url(),
        prometheus,
        load,
        serve_only,
    ))
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
    match run(LOAD, serve_only) {
        Ok(report) => {
            let lines = report.scrape.lines().filter(|l| l.starts_with("bloom_"));
            println!(
                "scraped /metrics after {} records new, {} committed and {} lookups not seen ({} series):",
                report.told_new,
                report.committed,
                report.not_seen,
                lines.clone().count()
            );
            for line in lines.filter(|l| !l.contains("quantile")) {
                println!("  {line}");
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use bloom_store::telemetry::names;
    use bloom_testing::telemetry::Scrape;

    use super::*;

    #[test]
    fn a_scrape_after_the_workload_shows_the_documented_metrics_and_its_counts() {
        let load = Load {
            connections: 16,
            posts_per_connection: 30,
            gets_per_connection: 25,
            distinct: 200,
        };
        let report = run(load, false).unwrap();
        let scrape = Scrape(report.scrape.clone());
        let of = |name: &str| scrape.of(FILTER, name);
        let gets = (load.connections * load.gets_per_connection) as f64;
        assert_eq!(report.not_seen as f64, gets);
        // Queries: the load's lookups of records never posted, then one per committed record.
        assert_eq!(of(names::QUERIES), gets + report.committed as f64);
        assert_eq!(of(names::INSERTS), report.told_new as f64);
        assert_eq!(report.told_new, report.committed);
        // The filter answered every lookup: each one avoided, or asked the store.
        assert_eq!(
            of(names::LOOKUPS_AVOIDED) + of(names::STORE_LOOKUPS),
            of(names::QUERIES)
        );
        assert_eq!(
            of(names::STORE_LOOKUPS),
            report.committed as f64 + of(names::FALSE_POSITIVES),
            "a store lookup is a committed record or a false positive"
        );
        assert!(of(names::LOOKUPS_AVOIDED) > 0.0);
        // The shared filter's standing, read from Redis at the scrape.
        assert_eq!(of(names::TRUSTED), 1.0);
        assert_eq!(of(names::CAPACITY), 1_000_000.0);
        assert_eq!(of(names::TARGET_FALSE_POSITIVE_RATE), 0.01);
        assert!(
            (report.committed as f64 * 0.9..report.committed as f64 * 1.1)
                .contains(&of(names::ESTIMATED_ITEMS))
        );
        assert!(of(names::FILL_RATIO) > 0.0 && of(names::FILL_RATIO) < 0.01);
        assert!(of(names::PREDICTED_FALSE_POSITIVE_RATE) < 0.01);
        assert_eq!(of(names::OBSERVED_OVER_TARGET), 0.0);
        assert_eq!(of(names::OVER_CAPACITY), 0.0);
        // The capacity less the keys the filter counted (inserts that changed a bit).
        let remaining = of(names::REMAINING_CAPACITY);
        assert!(
            (1_000_000.0 - report.committed as f64..1_000_000.0).contains(&remaining),
            "{remaining}"
        );
        // Latencies: every Redis round trip and PostgreSQL statement is timed.
        let count = |name: &str, labels: &[(&str, &str)]| {
            let series = format!("{name}_count");
            scrape
                .value(&series, labels)
                .unwrap_or_else(|| panic!("no {series} in the scrape:\n{}", scrape.0))
        };
        assert!(count(names::REDIS_ROUND_TRIP_SECONDS, &[]) > 0.0);
        assert!(count(names::POSTGRES_QUERY_SECONDS, &[("operation", "append")]) > 0.0);
        assert!(count(names::POSTGRES_POOL_WAIT_SECONDS, &[]) > 0.0);
        // Every series is one bloom documents.
        for line in scrape.0.lines().filter(|l| l.starts_with("bloom_")) {
            let name = line.split(['{', ' ']).next().unwrap_or(line);
            let known = bloom_store::telemetry::METRICS.iter().any(|m| {
                name == m.name
                    || ["_sum", "_count", "_bucket"]
                        .iter()
                        .any(|suffix| name.strip_suffix(suffix) == Some(m.name))
            });
            assert!(known, "{line} is not a documented metric");
        }
    }
}
