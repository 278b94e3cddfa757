//! The fleet main job: several writer processes share one PostgreSQL database and one Bloom
//! filter in Redis through `SharedFilteredStore`, while Redis and PostgreSQL each restart.
//!
//! 1. Starts its own PostgreSQL (`initdb` in a temporary directory, 127.0.0.1, a random port)
//!    and Redis (no persistence), and creates the shared filter.
//! 2. Starts four writer processes (this program with `--writer`). Each ingests a feed of
//!    records that overlaps the others' (a record may arrive at any machine): a batch of 500
//!    is looked up through the shared filter at once (a record it calls absent is new
//!    without a database query; a "maybe" is confirmed by PostgreSQL), and the new records
//!    are committed in one transaction, their bits set in Redis first.
//! 3. A third of the way in, Redis restarts empty: the filter is lost, lookups go to
//!    PostgreSQL, inserts are refused (a committed key without bits would be answered absent
//!    by the others) until a writer rebuilds the filter from the database. Two thirds of the
//!    way in, PostgreSQL stops as in a crash (`pg_ctl stop -m immediate`) and starts again:
//!    writers retry until it is back.
//! 4. Each writer then checks every record the database holds through its own wrapper, and
//!    reports its view. The program prints the lookups the filter avoided, the false-positive
//!    rate observed against the rate predicted, and the proof that no committed record was
//!    reported new.
//!
//! `cargo run --release -p bloom-postgres --example fleet`. Needs Debian's `postgresql` and
//! `redis-server`; without them it says how to install them.

use std::io::{BufRead as _, Write as _};
use std::process::{Child, ChildStdin, Command, ExitCode, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use bloom_core::{FilterConfig, FilterParams, KeyEncoding, Layout};
use bloom_postgres::PostgresStore;
use bloom_postgres::testing::{self, TempServer};
use bloom_redis::{RedisFilter, RedisTarget, SharedError, SharedFilteredStore};
use bloom_store::{DatasetGeneration, Lookup, PrimaryStore};
use bloom_testing::keys::SplitMix;
use bloom_testing::redis::RedisServer;

const WRITERS: u64 = 4;
const BATCHES: u64 = 30;
const BATCH: u64 = 500;
/// Record ids are drawn from this many: the feeds overlap.
const DISTINCT: u64 = 40_000;
const CAPACITY: u64 = 50_000;
const FILTER: &str = "fleet-records";
/// How long a rebuilt filter waits for inserts in flight before it scans the database.
const GRACE: Duration = Duration::from_millis(200);

fn config() -> FilterConfig {
    FilterConfig::new(
        FilterParams::planned(Layout::sharded(16).expect("16 shards"), CAPACITY, 0.01)
            .expect("a plan"),
    )
}

fn open(params: &str, redis: &str) -> Result<SharedFilteredStore<PostgresStore>, String> {
    let store = PostgresStore::connect(params).map_err(|e| e.to_string())?;
    let target = RedisTarget::single(redis).with_timeout(Duration::from_secs(10));
    SharedFilteredStore::open_with_grace(store, target, FILTER, KeyEncoding::Nfc, GRACE)
        .map(|(shared, _)| shared.with_reattach_every(Duration::from_millis(200)))
        .map_err(|e| e.to_string())
}

/// Whether the parent died (this writer was handed to init): then it stops.
fn orphaned() -> Result<(), String> {
    if std::os::unix::process::parent_id() == 1 {
        Err("the example that started this writer is gone".into())
    } else {
        Ok(())
    }
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}").and_then(|()| out.flush());
}

/// One writer process: its feed, then, when the parent says so, its check of every record.
fn writer(params: &str, redis: &str, id: u64) -> Result<(), String> {
    let shared = loop {
        match open(params, redis) {
            Ok(shared) => break shared,
            Err(_) => {
                orphaned()?;
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    };
    let mut feed = SplitMix(0xF1EE7 + id);
    let (mut new, mut duplicates, mut raced) = (0u64, 0u64, 0u64);
    let (mut refused, mut retried, mut rebuilds) = (0u64, 0u64, 0u64);
    for batch in 0..BATCHES {
        let keys: Vec<String> = (0..BATCH)
            .map(|_| format!("record-{}", feed.next() % DISTINCT))
            .collect();
        loop {
            let answers = match shared.contains_each(&keys) {
                Ok(answers) => answers,
                Err(_) => {
                    orphaned()?;
                    retried += 1;
                    std::thread::sleep(Duration::from_millis(50));
                    continue;
                }
            };
            let fresh: Vec<&String> = keys
                .iter()
                .zip(&answers)
                .filter(|(_, a)| !a.is_present())
                .map(|(k, _)| k)
                .collect();
            match shared.insert_all(&fresh) {
                Ok(inserted) => {
                    let committed = inserted.iter().filter(|n| **n).count() as u64;
                    new += committed;
                    // A record repeated within the batch, or committed by another writer
                    // between this batch's lookup and its insert.
                    raced += fresh.len() as u64 - committed;
                    duplicates += keys.len() as u64 - fresh.len() as u64;
                    break;
                }
                Err(SharedError::Filter(_) | SharedError::NoFilter { .. }) => {
                    orphaned()?;
                    refused += 1;
                    if shared.rebuild(config()).is_ok() {
                        rebuilds += 1;
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(_) => {
                    orphaned()?;
                    retried += 1;
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
        }
        say(&format!("batch {batch}"));
    }
    // The parent adds up the leading number of each of these lines.
    say(&format!(
        "view {} writer {id}: {} records, {new} committed as new, {duplicates} answered present, {raced} found committed at insert (repeated in the batch or by another writer meanwhile); {} lookups answered by the filter alone; {refused} inserts refused while the filter was lost, {retried} calls retried while a server restarted, {rebuilds} rebuilds; the filter is {}",
        shared.lookups_avoided(),
        BATCHES * BATCH,
        shared.lookups_avoided(),
        if shared.is_trusted() {
            "trusted"
        } else {
            "bypassed"
        }
    ));
    say("done");
    let mut line = String::new();
    std::io::stdin()
        .read_line(&mut line)
        .map_err(|e| e.to_string())?;
    // Every record the database holds, through this process's wrapper.
    let mut committed = Vec::new();
    shared
        .store()
        .keys_since(DatasetGeneration::ZERO, &mut |k| {
            committed.push(String::from_utf8_lossy(k).into_owned());
        })
        .map_err(|e| e.to_string())?;
    let mut reported_new = 0;
    for chunk in committed.chunks(4096) {
        let answers = shared.contains_each(chunk).map_err(|e| e.to_string())?;
        reported_new += answers.iter().filter(|a| **a != Lookup::Present).count();
    }
    say(&format!(
        "verified {reported_new} writer {id}: {} committed records checked, {reported_new} reported new",
        committed.len()
    ));
    Ok(())
}

/// A writer process, killed if the example ends early.
struct Writer {
    child: Child,
    stdin: Option<ChildStdin>,
}

impl Drop for Writer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A writer's line `PREFIX COUNT TEXT`, as the count and the text.
fn counted(line: &str, prefix: &str) -> Option<(u64, String)> {
    let (count, text) = line.strip_prefix(prefix)?.split_once(' ')?;
    Some((count.parse().ok()?, text.to_owned()))
}

fn installed(program: &str) -> bool {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).any(|dir| dir.join(program).is_file())
}

fn run() -> Result<(), String> {
    if testing::server_programs().is_none() || !installed("redis-server") {
        return Err(format!(
            "this example starts its own PostgreSQL and Redis servers, and their programs are not installed; install them with\n    sudo apt-get install -y postgresql redis-server\n({})",
            testing::INSTALL_HINT
        ));
    }
    let mut pg = TempServer::start().map_err(|e| e.to_string())?;
    // Without persistence: a restart loses the filter.
    let mut redis = RedisServer::start();
    let params = pg.params("postgres");
    println!(
        "PostgreSQL on 127.0.0.1:{} (cluster in {}), Redis on 127.0.0.1:{}",
        pg.port(),
        pg.dir().display(),
        redis.port
    );
    let first = open(&params, &redis.url())?;
    first.rebuild(config()).map_err(|e| e.to_string())?;
    drop(first);
    println!(
        "shared filter {FILTER:?}: 16 shards planned for {CAPACITY} records at 1%; {WRITERS} writers, {BATCHES} batches of {BATCH} records each, ids drawn from {DISTINCT}\n"
    );

    let (lines_tx, lines) = mpsc::channel::<String>();
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut writers = Vec::new();
    for id in 0..WRITERS {
        let mut child = Command::new(&exe)
            .args(["--writer", &params, &redis.url(), &id.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| e.to_string())?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let tx = lines_tx.clone();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        writers.push(Writer {
            stdin: child.stdin.take(),
            child,
        });
    }
    drop(lines_tx);

    let total = WRITERS * BATCHES;
    let (mut batches, mut done, mut views, mut verified) = (0, 0, Vec::new(), Vec::new());
    while done < WRITERS {
        let line = lines.recv().map_err(|_| "a writer ended early")?;
        if line.starts_with("batch ") {
            batches += 1;
            if batches == total / 3 {
                redis.restart_empty();
                println!(
                    "[{batches}/{total} batches] Redis restarted empty: the shared filter is lost; lookups go to PostgreSQL and inserts are refused until a writer rebuilds it from the database"
                );
            } else if batches == 2 * total / 3 {
                pg.stop_immediate().map_err(|e| e.to_string())?;
                pg.start_again().map_err(|e| e.to_string())?;
                println!(
                    "[{batches}/{total} batches] PostgreSQL stopped as in a crash (pg_ctl stop -m immediate) and started again: writers retry until it is back; the filter stays bound to the same history"
                );
            }
        } else if let Some(view) = counted(&line, "view ") {
            views.push(view);
        } else if line == "done" {
            done += 1;
        }
    }
    println!("\nwhat each process saw:");
    let mut avoided = 0u64;
    for (count, view) in &views {
        println!("  {view}");
        avoided += count;
    }
    for writer in &mut writers {
        if let Some(mut stdin) = writer.stdin.take() {
            let _ = writeln!(stdin, "verify");
        }
    }
    while verified.len() < writers.len() {
        let line = lines
            .recv()
            .map_err(|_| "a writer ended before its check")?;
        if let Some(v) = counted(&line, "verified ") {
            verified.push(v);
        }
    }

    let store = PostgresStore::connect(&params).map_err(|e| e.to_string())?;
    let committed = store.key_count().map_err(|e| e.to_string())?;
    let looked_up = WRITERS * BATCHES * BATCH;
    println!(
        "\nlookups avoided: {avoided} of {looked_up} record lookups ({:.1}%) were answered \"new\" by the filter alone, without a PostgreSQL query",
        100.0 * avoided as f64 / looked_up as f64
    );
    let target = RedisTarget::single(redis.url()).with_timeout(Duration::from_secs(10));
    let filter = RedisFilter::open(&target, FILTER).map_err(|e| e.to_string())?;
    let probes: Vec<String> = (0..100_000).map(|i| format!("never-{i}")).collect();
    let positives = filter
        .contains_each(&probes)
        .map_err(|e| e.to_string())?
        .iter()
        .filter(|p| **p)
        .count();
    let predicted = filter
        .config()
        .params()
        .predicted_false_positive_rate(committed);
    println!(
        "false positives: {positives} of {} records never inserted were \"maybe\" ({:.4}), predicted {predicted:.4} for {committed} records",
        probes.len(),
        positives as f64 / probes.len() as f64,
    );
    println!("\nproof that no committed record was reported new:");
    let mut reported_new = 0u64;
    for (count, v) in &verified {
        println!("  {v}");
        reported_new += count;
    }
    if reported_new != 0 {
        return Err(format!(
            "{reported_new} committed records were reported new"
        ));
    }
    println!(
        "  {committed} records are committed in PostgreSQL; every process answered \"present\" for every one of them: 0 reported new"
    );
    drop(writers);
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|a| a == "--writer") {
        let arg = |i: usize| args.get(at + i).map_or("", String::as_str);
        return match writer(arg(1), arg(2), arg(3).parse().unwrap_or(0)) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("writer: {e}");
                ExitCode::FAILURE
            }
        };
    }
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
