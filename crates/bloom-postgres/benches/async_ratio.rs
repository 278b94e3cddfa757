//! The fleet path from async code, in one run on one local PostgreSQL (PostgreSQL's default
//! settings: every commit flushed) and one Redis, started here, on a tokio multi-thread
//! runtime; each ratio is paired per round (subject and peer back to back) and reported as
//! the median of the rounds with their spread:
//!
//! - **Single-key inserts from 1,000 concurrent tasks** through
//!   `Coalesced<SharedFilteredStore<PostgresStore>>::insert` against the same wrapper fed by a
//!   hand-written channel that a writer thread drains into `insert_all` (target: at least 0.8
//!   of its throughput), and against one commit per key (`spawn_blocking` of the wrapper's
//!   `insert`; target: at least 10 times its throughput).
//! - **Absent-key lookups from 1,000 concurrent tasks** through `Coalesced::contains` against
//!   tokio-postgres point queries on the store's key index (the partial unique index `keys`,
//!   its predicate repeated so that the planner uses it) from the same number of tasks, over
//!   10 connections (target: at least 20 times faster).
//!
//! Run with `cargo bench -p bloom-postgres --bench async_ratio` (needs Debian's `postgresql`
//! and `redis-server`; about a minute).

use std::sync::Arc;
use std::time::{Duration, Instant};

use bloom_core::{FilterConfig, FilterParams, Layout};
use bloom_postgres::PostgresStore;
use bloom_postgres::testing::TempServer;
use bloom_redis::SharedFilteredStore;
use bloom_store::Coalesced;
use bloom_testing::bench::report;
use bloom_testing::redis::RedisServer;
use tokio::runtime::Runtime;
use tokio::sync::{mpsc, oneshot};

const TASKS: usize = 1_000;
const KEYS_PER_TASK: usize = 20;
const PER_KEY_COMMITS: usize = 2_000;
const LOOKUPS_PER_TASK: usize = 20;
const ROUNDS: usize = 5;

type Wrapper = SharedFilteredStore<PostgresStore>;

fn plan() -> FilterConfig {
    FilterConfig::new(
        FilterParams::planned(Layout::sharded(16).expect("16 shards"), 2_000_000, 0.01)
            .expect("a plan"),
    )
}

fn open(params: &str, redis: &RedisServer) -> Wrapper {
    let store = PostgresStore::connect(params).expect("the store");
    SharedFilteredStore::open_or_create_with_grace(
        store,
        redis.target(),
        "bench",
        plan(),
        Duration::from_millis(10),
    )
    .expect("the shared filter")
    .0
}

/// Keys per second: `TASKS` tasks, each calling `insert` on its keys one after the other.
fn per_task<F, Fut>(runtime: &Runtime, prefix: &str, per_task: usize, insert: F) -> f64
where
    F: Fn(String) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = bool> + Send,
{
    let started = Instant::now();
    runtime.block_on(async {
        let tasks: Vec<_> = (0..TASKS)
            .map(|t| {
                let insert = insert.clone();
                let prefix = prefix.to_owned();
                tokio::spawn(async move {
                    for i in 0..per_task {
                        assert!(insert(format!("{prefix}-{t}-{i}")).await);
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.expect("a task");
        }
    });
    (TASKS * per_task) as f64 / started.elapsed().as_secs_f64()
}

/// The hand-written peer: a channel a writer thread drains, up to 1,000 keys at a time, into
/// one `insert_all`, answering each sender.
fn channel_writer(wrapper: Arc<Wrapper>) -> mpsc::Sender<(String, oneshot::Sender<bool>)> {
    let (tx, mut rx) = mpsc::channel::<(String, oneshot::Sender<bool>)>(65_536);
    std::thread::spawn(move || {
        while let Some(first) = rx.blocking_recv() {
            let mut batch = vec![first];
            while batch.len() < 1_000 {
                match rx.try_recv() {
                    Ok(next) => batch.push(next),
                    Err(_) => break,
                }
            }
            let keys: Vec<&str> = batch.iter().map(|(k, _)| k.as_str()).collect();
            let answers = wrapper.insert_all(&keys).expect("insert_all");
            for ((_, reply), new) in batch.into_iter().zip(answers) {
                let _ = reply.send(new);
            }
        }
    });
    tx
}

fn main() {
    let pg = TempServer::start().expect("PostgreSQL (sudo apt-get install postgresql)");
    // With the bloom module (`BLOOM_REDIS_MODULE`, e.g. target/release/libbloom_redis_module.so):
    // one command per shard and batch instead of bit commands per key.
    let redis = match std::env::var_os("BLOOM_REDIS_MODULE") {
        Some(_) => RedisServer::start_with_module(&[]),
        None => RedisServer::start(),
    };
    println!(
        "Redis {} the bloom module",
        if std::env::var_os("BLOOM_REDIS_MODULE").is_some() {
            "with"
        } else {
            "without"
        }
    );
    let params = pg.params("postgres");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");

    let coalesced = Coalesced::new(open(&params, &redis)).expect("workers");
    let direct = Arc::new(open(&params, &redis));
    let channel = channel_writer(Arc::clone(&direct));
    // The lookups' peer: tokio-postgres, 10 connections, a prepared point query each.
    let (clients, statements) = runtime.block_on(async {
        let mut clients = Vec::new();
        let mut statements = Vec::new();
        for _ in 0..10 {
            let (client, connection) = tokio_postgres::connect(&params, tokio_postgres::NoTls)
                .await
                .expect("tokio-postgres");
            tokio::spawn(connection);
            statements.push(
                client
                    .prepare(
                        "SELECT 1 FROM bloom.changes WHERE key = $1::bytea AND kind = 1 \
                         AND removed_at IS NULL AND octet_length(key) <= 2000",
                    )
                    .await
                    .expect("prepare"),
            );
            clients.push(client);
        }
        (Arc::new(clients), Arc::new(statements))
    });

    let (mut vs_channel, mut vs_per_key, mut vs_queries) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        let seen = coalesced.clone();
        let ours = per_task(&runtime, &format!("c{round}"), KEYS_PER_TASK, move |key| {
            let call = seen.insert(&key);
            async move { call.await.expect("coalesced insert") }
        });
        let tx = channel.clone();
        let theirs = per_task(&runtime, &format!("h{round}"), KEYS_PER_TASK, move |key| {
            let tx = tx.clone();
            async move {
                let (reply, answer) = oneshot::channel();
                tx.send((key, reply)).await.expect("the writer");
                answer.await.expect("an answer")
            }
        });
        let wrapper = Arc::clone(&direct);
        let per_key = per_task(
            &runtime,
            &format!("k{round}"),
            PER_KEY_COMMITS / TASKS,
            move |key| {
                let wrapper = Arc::clone(&wrapper);
                async move {
                    tokio::task::spawn_blocking(move || wrapper.insert(&key))
                        .await
                        .expect("a blocking task")
                        .expect("insert")
                }
            },
        );
        vs_channel.push(ours / theirs);
        vs_per_key.push(ours / per_key);
        println!(
            "round {round}: coalesced {ours:.0} keys/s, channel + insert_all {theirs:.0}, one commit per key {per_key:.0}"
        );

        let seen = coalesced.clone();
        let ours = per_task(
            &runtime,
            &format!("never-c{round}"),
            LOOKUPS_PER_TASK,
            move |key| {
                let call = seen.contains(&key);
                async move { !call.await.expect("lookup").is_present() }
            },
        );
        let (c, s) = (Arc::clone(&clients), Arc::clone(&statements));
        let counter = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let theirs = per_task(
            &runtime,
            &format!("never-q{round}"),
            LOOKUPS_PER_TASK,
            move |key| {
                let (c, s) = (Arc::clone(&c), Arc::clone(&s));
                let i = counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % c.len();
                async move {
                    c[i].query_opt(&s[i], &[&key.as_bytes()])
                        .await
                        .expect("a point query")
                        .is_none()
                }
            },
        );
        vs_queries.push(ours / theirs);
        println!(
            "round {round}: coalesced lookups {ours:.0}/s, tokio-postgres point queries {theirs:.0}/s"
        );
    }
    println!();
    report(
        "1,000 tasks inserting: coalesced / channel + insert_all (throughput)",
        vs_channel,
    );
    report(
        "1,000 tasks inserting: coalesced / one commit per key (throughput)",
        vs_per_key,
    );
    report(
        "1,000 tasks, absent keys: coalesced / tokio-postgres queries",
        vs_queries,
    );
}
