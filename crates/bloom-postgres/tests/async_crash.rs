//! The fleet path from async code under faults, with real processes and real servers, beside
//! four busy loops.
//!
//! Two writer processes (this binary with `--writer`), each a tokio multi-thread runtime with
//! 1,000 tasks inserting single keys through one `Coalesced<SharedFilteredStore<PostgresStore>>`
//! opened with `open_or_create` on an empty Redis, print every answer (`new KEY` or
//! `seen KEY`). On events (a number of answers, never a clock), the parent:
//!
//! 1. saves Redis (an RDB of the filter as it is then);
//! 2. SIGKILLs a writer and starts it again (it inserts the same keys again: those committed
//!    must now be `seen`);
//! 3. stops PostgreSQL as in a crash (`pg_ctl stop -m immediate`) and starts it again;
//! 4. restarts Redis from the older RDB (the filter goes back under running writers);
//! 5. SIGKILLs the other writer and starts it again.
//!
//! Then every writer is stopped, and a wrapper of the parent's checks: every key a writer
//! was answered for is in the database, no key was answered `new` twice (across kills), and
//! every key in the database is answered present. A phase that makes no progress within its
//! deadline fails the test (a hang), as does a writer that panics.
//!
//! A `harness = false` test: with `--writer`, the binary is a writer.

use std::collections::{HashMap, HashSet};
use std::io::{BufRead as _, Write as _};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use bloom_core::{FilterConfig, FilterParams, Layout};
use bloom_postgres::PostgresStore;
use bloom_postgres::testing::TempServer;
use bloom_redis::{SharedError, SharedFilteredStore};
use bloom_store::coalesce::Options;
use bloom_store::{Coalesced, CoalescedError, Lookup, PrimaryStore};
use bloom_testing::redis::RedisServer;

const TASKS: u64 = 1_000;
/// How long a phase may go without an answer from the writers before the test fails.
const STALL: Duration = Duration::from_secs(120);
const NAME: &str = "records";

fn plan() -> FilterConfig {
    FilterConfig::new(
        FilterParams::planned(Layout::sharded(8).expect("8 shards"), 200_000, 0.01)
            .expect("a plan"),
    )
}

fn open(params: &str, url: &str) -> Result<SharedFilteredStore<PostgresStore>, String> {
    let store = PostgresStore::connect(params).map_err(|e| e.to_string())?;
    let target = bloom_redis::RedisTarget::single(url).with_timeout(Duration::from_secs(10));
    SharedFilteredStore::open_or_create_with_grace(
        store,
        target,
        NAME,
        plan(),
        Duration::from_millis(200),
    )
    .map(|(seen, _)| seen.with_reattach_every(Duration::from_millis(200)))
    .map_err(|e| e.to_string())
}

/// A writer process: `TASKS` tasks inserting `w{id}-{task}-{i}`, printing each answer.
fn writer(params: &str, url: &str, id: &str) -> ExitCode {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let (params, url, id) = (params.to_owned(), url.to_owned(), id.to_owned());
    runtime.block_on(async move {
        let seen = loop {
            let (p, u) = (params.clone(), url.clone());
            let opened = Coalesced::open(
                move || open(&p, &u).map(|seen| (seen, ())).map_err(Failed),
                Options::default(),
            )
            .await;
            match opened {
                Ok((seen, ())) => break seen,
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        };
        let (lines, printed) = mpsc::channel::<String>();
        std::thread::spawn(move || {
            let mut out = std::io::stdout().lock();
            for line in printed {
                if writeln!(out, "{line}").and_then(|()| out.flush()).is_err() {
                    std::process::exit(0);
                }
            }
        });
        let tasks: Vec<_> = (0..TASKS)
            .map(|task| {
                let (seen, lines, id) = (seen.clone(), lines.clone(), id.clone());
                tokio::spawn(async move {
                    let mut i = 0u64;
                    loop {
                        let key = format!("{id}-{task}-{i}");
                        match seen.insert(&key).await {
                            Ok(new) => {
                                let word = if new { "new" } else { "seen" };
                                if lines.send(format!("{word} {key}")).is_err() {
                                    return;
                                }
                                i += 1;
                            }
                            // Redis or PostgreSQL down, or the filter being repaired: the
                            // key was not committed, or was with its bits; try it again.
                            Err(CoalescedError::Batch(_) | CoalescedError::Stopped) => {
                                tokio::time::sleep(Duration::from_millis(20)).await;
                            }
                            Err(e) => panic!("{key}: {e}"),
                        }
                    }
                })
            })
            .collect();
        for task in tasks {
            if task.await.is_err() {
                std::process::exit(3);
            }
        }
    });
    ExitCode::SUCCESS
}

/// An opening's error, as text.
#[derive(Debug)]
struct Failed(String);

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Failed {}

struct Writer {
    child: Child,
}

/// A writer never outlives the test, whatever fails.
impl Drop for Writer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn spawn_writer(
    params: &str,
    url: &str,
    id: &str,
    answers: &mpsc::Sender<String>,
) -> Result<Writer, String> {
    let mut child = Command::new(std::env::current_exe().map_err(|e| e.to_string())?)
        .args(["--writer", params, url, id])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| e.to_string())?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let tx = answers.clone();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            if line.map(|l| tx.send(l)).is_err() {
                break;
            }
        }
    });
    Ok(Writer { child })
}

/// What the writers were told.
#[derive(Default)]
struct Told {
    /// Key → times answered new.
    new: HashMap<String, u32>,
    answered: HashSet<String>,
}

impl Told {
    /// Takes answers until `more` have come, failing after `STALL` without one.
    fn take(&mut self, answers: &mpsc::Receiver<String>, more: usize) -> Result<(), String> {
        for _ in 0..more {
            let line = answers
                .recv_timeout(STALL)
                .map_err(|_| format!("no writer answered for {STALL:?}: a hang"))?;
            let (word, key) = line.split_once(' ').ok_or_else(|| line.clone())?;
            if word == "new" {
                *self.new.entry(key.to_owned()).or_default() += 1;
            }
            self.answered.insert(key.to_owned());
        }
        Ok(())
    }
}

fn probe() -> Result<String, String> {
    let mut pg = TempServer::start_with(&[("fsync", "off")]).map_err(|e| e.to_string())?;
    let mut redis = RedisServer::start();
    let params = pg.params("postgres");
    let url = redis.url();
    let busy = Arc::new(AtomicBool::new(true));
    let loops: Vec<_> = (0..4)
        .map(|_| {
            let busy = Arc::clone(&busy);
            std::thread::spawn(move || {
                let mut x = 0u64;
                while busy.load(Ordering::Relaxed) {
                    x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                }
            })
        })
        .collect();
    let (tx, answers) = mpsc::channel();
    let mut writers = vec![
        spawn_writer(&params, &url, "a", &tx)?,
        spawn_writer(&params, &url, "b", &tx)?,
    ];
    let mut told = Told::default();
    let step = 3_000;
    told.take(&answers, step)?;
    if redis.cli(&["SAVE"]).trim() != "OK" {
        return Err("Redis did not save".into());
    }
    told.take(&answers, step)?;
    writers[0] = spawn_writer(&params, &url, "a", &tx)?; // the old one is SIGKILLed on drop
    told.take(&answers, step)?;
    pg.stop_immediate().map_err(|e| e.to_string())?;
    pg.start_again().map_err(|e| e.to_string())?;
    told.take(&answers, step)?;
    redis.restart(); // from the older RDB
    told.take(&answers, step)?;
    writers[1] = spawn_writer(&params, &url, "b", &tx)?;
    told.take(&answers, 2 * step)?;
    drop(writers);
    busy.store(false, Ordering::Relaxed);
    for busy_loop in loops {
        let _ = busy_loop.join();
    }
    // Answers printed before the kills.
    while let Ok(line) = answers.try_recv() {
        if let Some((word, key)) = line.split_once(' ') {
            if word == "new" {
                *told.new.entry(key.to_owned()).or_default() += 1;
            }
            told.answered.insert(key.to_owned());
        }
    }

    if let Some((key, n)) = told.new.iter().find(|(_, n)| **n > 1) {
        return Err(format!("{key} was answered new {n} times"));
    }
    let checker = open(&params, &url)?;
    let mut committed = Vec::new();
    checker
        .store()
        .keys_since(bloom_store::DatasetGeneration::ZERO, &mut |k| {
            committed.push(String::from_utf8_lossy(k).into_owned());
        })
        .map_err(|e| e.to_string())?;
    let in_store: HashSet<&str> = committed.iter().map(String::as_str).collect();
    if let Some(lost) = told
        .answered
        .iter()
        .find(|k| !in_store.contains(k.as_str()))
    {
        return Err(format!(
            "{lost} was answered for but is not in the database"
        ));
    }
    let answers = checker
        .contains_each(&committed)
        .map_err(|e: SharedError<_>| e.to_string())?;
    if let Some((key, answer)) = committed
        .iter()
        .zip(&answers)
        .find(|(_, a)| **a != Lookup::Present)
    {
        return Err(format!("{key} is committed but was answered {answer:?}"));
    }
    Ok(format!(
        "{} answers to 2,000 tasks in 2 writer processes through 2 SIGKILLs, a PostgreSQL crash and Redis put back to an older save, beside 4 busy loops: {} keys committed, all answered present, none answered new twice",
        told.answered.len(),
        committed.len()
    ))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|a| a == "--writer") {
        let arg = |i: usize| args.get(at + i).map_or("", String::as_str);
        return writer(arg(1), arg(2), arg(3));
    }
    // `cargo test` passes harness flags (and maybe a filter): run unless filtered out.
    if args
        .iter()
        .skip(1)
        .any(|a| !a.starts_with('-') && !"async_crash".contains(a.as_str()))
    {
        return ExitCode::SUCCESS;
    }
    match probe() {
        Ok(summary) => {
            println!("{summary}\nasync_crash: 1 passed, 0 failed");
            ExitCode::SUCCESS
        }
        Err(e) => {
            println!("async_crash: 0 passed, 1 failed: {e}");
            ExitCode::FAILURE
        }
    }
}
