//! Crash test with real processes: a child inserts keys through `FilteredStore` into SQLite
//! and saves snapshots; the parent kills it with SIGKILL at random (seeded) moments, reopens,
//! and checks that every key in the database is reported present.
//!
//! This is a `harness = false` test: the same binary is the parent and, with `--crash-child`,
//! the child.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use bloom_store::{FilterOptions, FilteredStore, OpenOutcome, PrimaryStore, SqliteStore};

const SEED: u64 = 0x05EE_D0FB_100D;
const MAX_KILLS: u32 = 60;
const TIME_BUDGET: Duration = Duration::from_secs(4);

fn options() -> FilterOptions {
    FilterOptions::new(20_000, 0.01)
}

fn paths(dir: &Path) -> (PathBuf, PathBuf) {
    (dir.join("keys.sqlite"), dir.join("keys.bloom"))
}

/// The child: recover like a real app after a crash, then insert and snapshot until killed.
fn child(dir: &Path, round: u32) -> ExitCode {
    let (db, snapshot) = paths(dir);
    let store = SqliteStore::open(&db).expect("open database");
    let (filtered, _) =
        FilteredStore::open_and_recover(store, options(), Some(&snapshot)).expect("recover");
    for i in 0..200_000u32 {
        filtered
            .insert(&format!("round-{round}-key-{i}"))
            .expect("insert");
        if i % 25 == 24 {
            filtered.save_snapshot(&snapshot).expect("snapshot");
        }
    }
    ExitCode::SUCCESS
}

struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

#[derive(Default, Debug)]
struct Tally {
    kills: u32,
    keys_checked: u64,
    trusted: u32,
    caught_up: u32,
    bypassed: u32,
}

/// Reopens after a kill and checks every committed key. Returns an error naming a lost key.
fn check(dir: &Path, tally: &mut Tally) -> Result<(), String> {
    let (db, snapshot) = paths(dir);
    let store = SqliteStore::open(&db).map_err(|e| e.to_string())?;
    let mut keys = Vec::new();
    store
        .keys_since(0, &mut |k| keys.push(k.to_vec()))
        .map_err(|e| e.to_string())?;
    let (filtered, outcome) =
        FilteredStore::open(store, options(), Some(&snapshot)).map_err(|e| e.to_string())?;
    match outcome {
        OpenOutcome::Trusted => tally.trusted += 1,
        OpenOutcome::CaughtUp { .. } => tally.caught_up += 1,
        OpenOutcome::NeedsRebuild(_) => tally.bypassed += 1,
    }
    for key in &keys {
        let lookup = filtered.contains_bytes(key).map_err(|e| e.to_string())?;
        if !lookup.is_present() {
            return Err(format!(
                "key {:?} is in the database but was reported {lookup:?} after {outcome:?}",
                String::from_utf8_lossy(key)
            ));
        }
    }
    tally.keys_checked += keys.len() as u64;
    Ok(())
}

fn parent() -> Result<Tally, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut rng = SplitMix(SEED);
    let mut tally = Tally::default();
    let start = Instant::now();
    while tally.kills < MAX_KILLS && start.elapsed() < TIME_BUDGET {
        let mut child = Command::new(&exe)
            .arg("--crash-child")
            .arg(dir.path())
            .arg(tally.kills.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| e.to_string())?;
        std::thread::sleep(Duration::from_millis(5 + rng.next() % 60));
        // On Unix, `kill` sends SIGKILL: no destructor, no flush, no cleanup runs.
        child.kill().map_err(|e| e.to_string())?;
        child.wait().map_err(|e| e.to_string())?;
        tally.kills += 1;
        check(dir.path(), &mut tally)?;
    }
    Ok(tally)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|a| a == "--crash-child") {
        let dir = PathBuf::from(&args[at + 1]);
        let round = args[at + 2].parse().unwrap_or(0);
        return child(&dir, round);
    }
    match parent() {
        Ok(t) if t.kills >= 10 && t.keys_checked > 0 && t.trusted + t.caught_up > 0 => {
            println!(
                "crash test: {} SIGKILLs, {} keys checked after reopening, opens: {} trusted, \
                 {} caught up, {} bypassed; no committed key reported absent",
                t.kills, t.keys_checked, t.trusted, t.caught_up, t.bypassed
            );
            println!("crash: 1 passed, 0 failed");
            ExitCode::SUCCESS
        }
        Ok(t) => {
            eprintln!("crash test did not exercise enough: {t:?}");
            println!("crash: 0 passed, 1 failed");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("crash test failed: {e}");
            println!("crash: 0 passed, 1 failed");
            ExitCode::FAILURE
        }
    }
}
