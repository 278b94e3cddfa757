//! The crash and history probe for PostgreSQL, with real processes and real servers.
//!
//! **Writers.** Three writer processes share one PostgreSQL database and one Redis filter
//! through `SharedFilteredStore`, inserting batches of 1, 16 and 64 keys and printing each
//! acknowledged batch. The parent SIGKILLs one of them after a seeded number of
//! acknowledgements (an event, not a clock) and starts it again; between kills it stops
//! PostgreSQL with `pg_ctl stop -m immediate` and starts it again, kills Redis (the filter is
//! lost, and the writers rebuild it), and takes a `pg_dump`. After every kill and every fault
//! it checks, through a wrapper of its own, every key the database holds and every key a
//! writer was told was committed.
//!
//! **History.** Then it damages the history under `FilteredStore` snapshots and the shared
//! filter: it restores the older dump (the filter and the snapshot are newer than the store),
//! writes past the point the snapshot covered (another history at the same generations),
//! drops and recreates the database (another store), and points two fleets' snapshots and
//! filters at each other's databases, checking every committed key after each.
//!
//! A key that a writer was told was committed must be in the database (nothing acknowledged
//! is lost), and no key in the database may be reported absent. The figures are printed.
//!
//! A `harness = false` test: with `--writer`, the binary is a writer.

use std::collections::{BTreeMap, HashSet};
use std::io::{BufRead as _, Write as _};
use std::path::Path;
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use bloom_core::{FilterConfig, FilterParams, KeyEncoding, Layout};
use bloom_postgres::PostgresStore;
use bloom_postgres::testing::TempServer;
use bloom_redis::{RedisFilter, RedisTarget, SharedError, SharedFilteredStore, SharedOpen};
use bloom_store::{BypassReason, FilterOptions, FilteredStore, Lookup, OpenOutcome, PrimaryStore};
use bloom_testing::keys::SplitMix;
use bloom_testing::redis::RedisServer;

const SEED: u64 = 0x9057_C4A5_4B10;
const WRITERS: usize = 3;
const KILLS: u32 = 12;
/// A writer that prints nothing for this long has stalled (a bound against a hang).
const STALL: Duration = Duration::from_secs(120);
/// The whole probe fails if it takes longer: something blocked.
const WATCHDOG: Duration = Duration::from_secs(600);
const FILTER: &str = "probe";
/// Longer than a writer stalls between setting a key's bits and committing it, on a busy
/// machine too (see `SharedFilteredStore::open_with_grace`).
const GRACE: Duration = Duration::from_secs(2);
/// New keys per writer process (then it re-sends keys already there).
const PER_WRITER: u64 = 4000;

/// The PostgreSQL server's process, for the watchdog to stop it.
static SERVER_PID: AtomicU32 = AtomicU32::new(0);

fn config() -> FilterConfig {
    FilterConfig::new(FilterParams::planned(Layout::sharded(8).unwrap(), 50_000, 0.01).unwrap())
}

fn options() -> FilterOptions {
    FilterOptions::new(50_000, 0.01)
}

/// An error as the probe reports it.
fn text(error: impl std::fmt::Display) -> String {
    error.to_string()
}

/// The shared filter `name` over `store`, with the probe's grace period.
fn open_shared<S: PrimaryStore>(
    store: S,
    target: &RedisTarget,
    name: &str,
) -> Result<(SharedFilteredStore<S>, SharedOpen), String> {
    SharedFilteredStore::open_with_grace(store, target.clone(), name, KeyEncoding::Nfc, GRACE)
        .map_err(text)
}

/// Drops the database `db` and makes it again, empty.
fn recreate(server: &TempServer, db: &str) -> Result<(), String> {
    server.drop_database(db).map_err(text)?;
    server.create_database(db).map_err(text)
}

/// Prints a line for the parent; `false` once the parent is gone (its pipe closed).
fn say(line: &str) -> bool {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").and_then(|()| out.flush()).is_ok()
}

/// Whether the parent died (this writer was handed to init): then it stops.
fn orphaned() -> bool {
    std::os::unix::process::parent_id() == 1
}

/// A writer: connects (waiting out a restarting server), opens the shared filter, and inserts
/// its keys batch after batch, retrying a failed batch (and rebuilding a lost filter).
fn writer(params: &str, redis: &str, name: &str) -> ExitCode {
    let target = RedisTarget::single(redis).with_timeout(Duration::from_secs(10));
    let shared = loop {
        let opened = PostgresStore::connect(params)
            .map_err(text)
            .and_then(|store| open_shared(store, &target, FILTER));
        match opened {
            Ok((shared, _)) => break shared,
            Err(_) if orphaned() => return ExitCode::FAILURE,
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    let mut next = 0u64;
    loop {
        if orphaned() {
            return ExitCode::FAILURE;
        }
        // Past its share of new keys, a writer sends its last batch again (every key there
        // already): the parent's events go on, the store stops growing.
        let size = if next >= PER_WRITER {
            16
        } else {
            [1, 16, 64][usize::try_from(next % 3).unwrap_or(0)]
        };
        let first = next.min(PER_WRITER);
        // Each batch after the first begins with a key of the batch before (already in the
        // store): a batch led by keys already there must still commit its new ones.
        let lead = first.checked_sub(1).map(|i| format!("{name}-{i}"));
        let keys: Vec<String> = lead
            .into_iter()
            .chain((first..first + size).map(|i| format!("{name}-{i}")))
            .collect();
        match shared.insert_all(&keys) {
            Ok(_) => {
                if !say(&format!("acked {name} {first} {size}")) {
                    return ExitCode::FAILURE;
                }
                if next < PER_WRITER {
                    next += size;
                }
            }
            Err(SharedError::Filter(_) | SharedError::NoFilter { .. }) => {
                let _ = shared.rebuild(config());
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(5)),
        }
    }
}

#[derive(Default)]
struct Tally {
    kills: u32,
    /// Checks of the filter's own bits (without a wrapper's catch-up), and the checks that
    /// wanted one (the others found the filter lost, unbound or of another history).
    raw_checks: u32,
    raw_wanted: u32,
    pg_crashes: u32,
    redis_losses: u32,
    checks: u32,
    keys_checked: u64,
    acked: u64,
    opens: BTreeMap<String, u32>,
}

impl Tally {
    fn open(&mut self, what: &str) {
        *self.opens.entry(what.to_owned()).or_default() += 1;
    }
}

fn outcome_name(outcome: &OpenOutcome) -> String {
    let reason = match outcome {
        OpenOutcome::Trusted { .. } => return "snapshot: trusted".into(),
        OpenOutcome::CaughtUp { .. } => return "snapshot: caught up".into(),
        OpenOutcome::Bypassed(reason) | OpenOutcome::Rebuilt { reason, .. } => reason,
        _ => return "snapshot: other".into(),
    };
    let why = match reason {
        BypassReason::NoSnapshot => "no snapshot",
        BypassReason::OtherStore { .. } => "other store",
        BypassReason::NewerThanStore { .. } => "newer than store",
        BypassReason::HistoryDiverged { .. } => "history diverged",
        _ => "other",
    };
    format!("snapshot: refused ({why}), rebuilt")
}

fn shared_name(outcome: &SharedOpen) -> String {
    match outcome {
        SharedOpen::Trusted { caught_up: 0, .. } => "shared filter: trusted".into(),
        SharedOpen::Trusted { .. } => "shared filter: trusted after catching up".into(),
        SharedOpen::Bypassed(why) if why.contains("another store") => {
            "shared filter: bypassed (another store)".into()
        }
        SharedOpen::Bypassed(why) if why.contains("history") => {
            "shared filter: bypassed (another history)".into()
        }
        SharedOpen::Bypassed(_) => "shared filter: bypassed (lost or unreachable)".into(),
        _ => "shared filter: other".into(),
    }
}

/// Every acknowledged key is in the database, and every key of the database is reported
/// present by a wrapper opened now on the shared filter `filter` (and, with `snapshot`, by a
/// `FilteredStore` that recovers from that file). With acknowledged keys (the writers'
/// phase, where every write goes through the shared filter), the filter's own bits are
/// checked too, before any wrapper's catch-up.
fn check(
    server: &TempServer,
    db: &str,
    redis: &RedisTarget,
    filter: &str,
    snapshot: Option<&Path>,
    acked: &HashSet<String>,
    tally: &mut Tally,
) -> Result<(), String> {
    // The writers' phase (with acknowledged keys) writes only through the shared filter.
    let raw_bits = !acked.is_empty();
    let store = PostgresStore::connect(&server.params(db)).map_err(text)?;
    let mut keys: Vec<Vec<u8>> = Vec::new();
    store
        .keys_since(bloom_store::DatasetGeneration::ZERO, &mut |k| {
            keys.push(k.to_vec())
        })
        .map_err(text)?;
    let held: HashSet<&[u8]> = keys.iter().map(Vec::as_slice).collect();
    if let Some(lost) = acked.iter().find(|k| !held.contains(k.as_bytes())) {
        return Err(format!(
            "{lost} was acknowledged as committed but is not in the database"
        ));
    }
    // The filter's own bits, before any wrapper catches it up: while it is bound to this
    // store's history, every committed key has its bits (writers set them before they
    // commit), or some process trusting it would answer "absent".
    // (Only where every write went through the shared filter: not in the history phase,
    // whose writes behind its back a wrapper takes in at attach.)
    if raw_bits {
        tally.raw_wanted += 1;
    }
    if raw_bits
        && let Ok(raw) = RedisFilter::open(redis, filter)
        && raw.check_shards().is_ok()
        && let Ok(header) = raw.header()
        && let Some(binding) = header.store
        && binding.identity == store.identity().map_err(text)?
        && store.history_at(header.dataset_generation).map_err(text)? == Some(binding.history)
    {
        for chunk in keys.chunks(4096) {
            let encoded: Vec<bloom_core::EncodedKey<'_>> = chunk
                .iter()
                .map(|k| bloom_core::EncodedKey::from_encoded(k))
                .collect();
            let bits = raw.contains_each(&encoded).map_err(text)?;
            if let Some((key, _)) = chunk.iter().zip(&bits).find(|(_, b)| !**b) {
                return Err(format!(
                    "{} is committed but has no bits in the shared filter it is bound to",
                    String::from_utf8_lossy(key)
                ));
            }
        }
        tally.raw_checks += 1;
    }
    let (shared, outcome) = open_shared(&store, redis, filter)?;
    tally.open(&shared_name(&outcome));
    let texts: Vec<String> = keys
        .iter()
        .map(|k| String::from_utf8_lossy(k).into_owned())
        .collect();
    for chunk in texts.chunks(4096) {
        let answers = shared.contains_each(chunk).map_err(text)?;
        if let Some((key, answer)) = chunk
            .iter()
            .zip(&answers)
            .find(|(_, a)| **a != Lookup::Present)
        {
            return Err(format!(
                "{key} is in the database but the shared filter's wrapper answered {answer:?}"
            ));
        }
    }
    // A FilteredStore never opens beside a shared filter's wrapper (its own filter would
    // answer "absent" for the shared wrappers' keys): the shared one goes first.
    drop(shared);
    if let Some(path) = snapshot {
        let (filtered, outcome) =
            FilteredStore::open_and_recover(&store, options().with_snapshot(path)).map_err(text)?;
        tally.open(&outcome_name(&outcome));
        for chunk in texts.chunks(4096) {
            let answers = filtered.contains_each(chunk).map_err(text)?;
            if answers.iter().any(|a| *a != Lookup::Present) {
                return Err("a key in the database was reported absent through a snapshot".into());
            }
        }
    }
    tally.checks += 1;
    tally.keys_checked += keys.len() as u64;
    Ok(())
}

struct Writer {
    child: Child,
    lines: mpsc::Receiver<String>,
}

/// A writer never outlives the probe, whatever fails.
impl Drop for Writer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn spawn_writer(server: &TempServer, redis: &RedisServer, name: &str) -> Result<Writer, String> {
    let mut child = Command::new(std::env::current_exe().map_err(text)?)
        .args(["--writer", &server.params("fleet"), &redis.url(), name])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(text)?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            if line.map(|l| tx.send(l)).is_err() {
                break;
            }
        }
    });
    Ok(Writer { child, lines })
}

/// Takes the acknowledgements a writer printed so far (waiting for at least `wait_for`).
fn drain(writer: &Writer, wait_for: u64, acked: &mut HashSet<String>) -> Result<(), String> {
    let mut seen = 0;
    loop {
        let line = if seen < wait_for {
            writer
                .lines
                .recv_timeout(STALL)
                .map_err(|e| format!("a writer stalled: {e}"))?
        } else {
            match writer.lines.try_recv() {
                Ok(line) => line,
                Err(_) => return Ok(()),
            }
        };
        let fields: Vec<&str> = line.split(' ').collect();
        if let ["acked", name, first, size] = fields[..] {
            let first: u64 = first.parse().map_err(|_| line.clone())?;
            let size: u64 = size.parse().map_err(|_| line.clone())?;
            acked.extend((first..first + size).map(|i| format!("{name}-{i}")));
            seen += 1;
        }
    }
}

fn kill(mut writer: Writer, acked: &mut HashSet<String>) -> Result<(), String> {
    writer.child.kill().map_err(text)?;
    writer.child.wait().map_err(text)?;
    // What it printed before it died was acknowledged.
    while let Ok(line) = writer.lines.recv_timeout(STALL) {
        let fields: Vec<&str> = line.split(' ').collect();
        if let ["acked", name, first, size] = fields[..] {
            let (first, size): (u64, u64) = (first.parse().unwrap_or(0), size.parse().unwrap_or(0));
            acked.extend((first..first + size).map(|i| format!("{name}-{i}")));
        }
    }
    Ok(())
}

fn writers_phase(
    server: &mut TempServer,
    redis: &mut RedisServer,
    dump: &Path,
    tally: &mut Tally,
    acked: &mut HashSet<String>,
) -> Result<(), String> {
    let target = redis.target();
    // The filter, created and bound before the writers start.
    let store = PostgresStore::connect(&server.params("fleet")).map_err(text)?;
    let (first, _) = open_shared(store, &target, FILTER)?;
    first.rebuild(config()).map_err(text)?;
    drop(first);
    let mut rng = SplitMix(SEED);
    let mut generation = 0u32;
    let mut writers: Vec<(String, Writer)> = Vec::new();
    for w in 0..WRITERS {
        let name = format!("w{w}g0");
        writers.push((name.clone(), spawn_writer(server, redis, &name)?));
    }
    while tally.kills < KILLS {
        let victim = usize::try_from(rng.next() % WRITERS as u64).unwrap_or(0);
        let wait = 1 + rng.next() % 30;
        for (i, (_, writer)) in writers.iter().enumerate() {
            drain(writer, if i == victim { wait } else { 0 }, acked)?;
        }
        let (_, writer) = writers.remove(victim);
        kill(writer, acked)?;
        tally.kills += 1;
        generation += 1;
        let name = format!("w{victim}g{generation}");
        writers.insert(victim, (name.clone(), spawn_writer(server, redis, &name)?));
        match tally.kills % 4 {
            1 => {
                server.stop_immediate().map_err(text)?;
                server.start_again().map_err(text)?;
                SERVER_PID.store(server.pid().unwrap_or(0), Ordering::SeqCst);
                tally.pg_crashes += 1;
            }
            2 => {
                redis.restart_empty();
                tally.redis_losses += 1;
            }
            3 if !dump.exists() => server.dump("fleet", dump).map_err(text)?,
            _ => {}
        }
        check(server, "fleet", &target, FILTER, None, acked, tally)?;
    }
    for (_, writer) in writers {
        kill(writer, acked)?;
    }
    tally.acked = acked.len() as u64;
    check(server, "fleet", &target, FILTER, None, acked, tally)
}

/// Inserts `n` keys named `prefix-i` through a `FilteredStore` and saves its snapshot.
fn write_and_save(
    server: &TempServer,
    db: &str,
    prefix: &str,
    n: u32,
    snapshot: &Path,
) -> Result<(), String> {
    let store = PostgresStore::connect(&server.params(db)).map_err(text)?;
    let (filtered, _) =
        FilteredStore::open_and_recover(&store, options().with_snapshot(snapshot)).map_err(text)?;
    let keys: Vec<String> = (0..n).map(|i| format!("{prefix}-{i}")).collect();
    filtered.insert_all(&keys).map_err(text)?;
    filtered.save_snapshot(snapshot).map(drop).map_err(text)
}

fn history_phase(
    server: &TempServer,
    redis: &RedisServer,
    dir: &Path,
    dump: &Path,
    tally: &mut Tally,
) -> Result<(), String> {
    let target = redis.target();
    let snapshot = dir.join("fleet.bloom");
    let none = HashSet::new();
    // A check of database `db` through the shared filter `filter` and the snapshot file.
    let judge = |db: &str, filter: &str, snapshot: &Path, tally: &mut Tally| {
        check(server, db, &target, filter, Some(snapshot), &none, tally)
    };
    // Keys written to `db` behind every filter's back.
    let behind = |db: &str, keys: &[&[u8]]| -> Result<(), String> {
        let store = PostgresStore::connect(&server.params(db)).map_err(text)?;
        store.insert_all(keys).map(drop).map_err(text)
    };
    write_and_save(server, "fleet", "before-restore", 500, &snapshot)?;
    judge("fleet", FILTER, &snapshot, tally)?;

    let old = dir.join("old.bloom");
    std::fs::copy(&snapshot, &old).map_err(text)?;
    let head = |server: &TempServer| -> Result<u64, String> {
        let store = PostgresStore::connect(&server.params("fleet")).map_err(text)?;
        Ok(store.head().map_err(text)?.generation.get())
    };
    let saved_at = head(server)?;

    // The older dump restored: the snapshot and the shared filter are newer than the store.
    recreate(server, "fleet")?;
    server.restore("fleet", dump).map_err(text)?;
    let restored_at = head(server)?;
    if restored_at >= saved_at {
        return Err(format!(
            "the dump ({restored_at}) is not older than the snapshot ({saved_at})"
        ));
    }
    judge("fleet", FILTER, &snapshot, tally)?;
    // Written past where the old snapshot was saved: other changes at its generations.
    let saved = dir.join("restored.bloom");
    let past = u32::try_from(saved_at - restored_at + 50).map_err(text)?;
    write_and_save(server, "fleet", "after-restore", past, &saved)?;
    judge("fleet", FILTER, &old, tally)?;
    behind("fleet", &[b"behind-1", b"behind-2"])?;
    judge("fleet", FILTER, &saved, tally)?;

    // Dropped and recreated, empty: another store.
    recreate(server, "fleet")?;
    behind("fleet", &[b"recreated-1", b"recreated-2"])?;
    judge("fleet", FILTER, &saved, tally)?;

    // Two fleets pointed at each other's databases, filters and snapshots.
    server.create_database("fleet_b").map_err(text)?;
    let snapshot_b = dir.join("fleet_b.bloom");
    write_and_save(server, "fleet_b", "b", 300, &snapshot_b)?;
    let store_b = PostgresStore::connect(&server.params("fleet_b")).map_err(text)?;
    let (shared_b, _) = open_shared(store_b, &target, "probe_b")?;
    shared_b.rebuild(config()).map_err(text)?;
    shared_b
        .insert_all(&["b-shared-1", "b-shared-2"])
        .map_err(text)?;
    drop(shared_b);
    write_and_save(server, "fleet", "a", 300, &snapshot)?;
    judge("fleet", "probe_b", &snapshot_b, tally)?;
    judge("fleet_b", FILTER, &snapshot, tally)?;
    Ok(())
}

fn probe() -> Result<Tally, String> {
    let mut server = TempServer::start_with(&[("fsync", "off")]).map_err(text)?;
    SERVER_PID.store(server.pid().unwrap_or(0), Ordering::SeqCst);
    server.create_database("fleet").map_err(text)?;
    let mut redis = RedisServer::start();
    let dir = tempfile::tempdir().map_err(text)?;
    let dump = dir.path().join("fleet.sql");
    let mut tally = Tally::default();
    let mut acked = HashSet::new();
    writers_phase(&mut server, &mut redis, &dump, &mut tally, &mut acked)?;
    history_phase(&server, &redis, dir.path(), &dump, &mut tally)?;
    Ok(tally)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|a| a == "--writer") {
        let arg = |i: usize| args.get(at + i).map_or("", String::as_str);
        return writer(arg(1), arg(2), arg(3));
    }
    std::thread::spawn(|| {
        std::thread::sleep(WATCHDOG);
        eprintln!("the PostgreSQL probe did not finish within {WATCHDOG:?}: something blocked");
        let pid = SERVER_PID.load(Ordering::SeqCst);
        if let Some(pid) = rustix::process::Pid::from_raw(i32::try_from(pid).unwrap_or(0)) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::QUIT);
        }
        println!("crash: 0 passed, 1 failed");
        std::process::exit(1);
    });
    match probe() {
        Ok(t)
            if t.kills == KILLS
                && t.pg_crashes > 0
                && t.redis_losses > 0
                && t.keys_checked > 0
                // Most checks of the writers' phase find the filter whole: only those right
                // after a Redis loss may not.
                && t.raw_checks * 2 > t.raw_wanted =>
        {
            println!(
                "PostgreSQL probe: {} writer SIGKILLs, {} `pg_ctl stop -m immediate`, {} Redis losses; {} acknowledged keys all in the database; {} checks of {} keys in all, none reported absent ({} of them also of the shared filter's own bits, of {} that could be: the others found it lost or not yet rebuilt); opens {:?}",
                t.kills,
                t.pg_crashes,
                t.redis_losses,
                t.acked,
                t.checks,
                t.keys_checked,
                t.raw_checks,
                t.raw_wanted,
                t.opens
            );
            println!("crash: 1 passed, 0 failed");
            ExitCode::SUCCESS
        }
        Ok(t) => {
            eprintln!(
                "the probe did not exercise enough: {} kills, {} crashes, {} losses",
                t.kills, t.pg_crashes, t.redis_losses
            );
            println!("crash: 0 passed, 1 failed");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("the PostgreSQL probe failed: {e}");
            println!("crash: 0 passed, 1 failed");
            ExitCode::FAILURE
        }
    }
}
