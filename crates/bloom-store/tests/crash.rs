//! Crash test with real processes and history damage.
//!
//! A child process recovers like a real app (`open_and_recover`), then inserts keys through
//! `FilteredStore` into SQLite and saves snapshots until the parent kills it with SIGKILL at
//! a random (seeded) moment. Between children, the parent damages what an operator's machine
//! can damage: it rolls the database back to a recent copy (a power loss), restores an older
//! backup, deletes the database, drops another store's snapshot in, or puts a named pipe, a
//! directory or a symbolic link at the snapshot path. After every kill and every damage it
//! reopens and checks that every key in the database is reported present.
//!
//! The whole run happens twice: with a plain filter, and with a counting filter whose child
//! also removes keys (its own and an earlier round's), so that a kill can land between a
//! removal's commit and its decrement, or in a save while removals wait. With a counting
//! filter no open may ever find the counts diverged from the store.
//!
//! Every third round inserts in batches (`insert_all`, one transaction each).
//!
//! This is a `harness = false` test: the same binary is the parent and, with `--crash-child`,
//! the child.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use bloom_core::EncodedKey;
use bloom_store::{
    BypassReason, DatasetGeneration, FilterOptions, FilteredStore, Lookup, OpenOutcome,
    PrimaryStore, SqliteStore,
};
use bloom_testing::keys::SplitMix;

const SEED: u64 = 0x05EE_D0FB_100D;
const MAX_KILLS: u32 = 80;
/// Rounds run whatever the time: enough for every kind of damage to happen once.
const MIN_KILLS: u32 = 3 * DAMAGES.len() as u32;
/// After [`MIN_KILLS`], rounds go on until [`MAX_KILLS`] or this much time.
const TIME_BUDGET: Duration = Duration::from_secs(8);
/// The whole run is stopped as a failure if it takes longer: an open that blocks on a named
/// pipe must fail the test, not hang CI. (A run takes about 20 s on an idle machine.)
const WATCHDOG: Duration = Duration::from_secs(600);
/// A child that prints nothing for this long has stalled.
const CHILD_STALL: Duration = Duration::from_secs(120);

/// Whether this process runs the counting round (set once, before anything else).
static COUNTING: AtomicBool = AtomicBool::new(false);

fn counting() -> bool {
    COUNTING.load(Ordering::SeqCst)
}

fn options() -> FilterOptions {
    FilterOptions::new(20_000, 0.01).with_counting(counting())
}

struct Paths {
    db: PathBuf,
    snapshot: PathBuf,
    /// Where a symbolic link at the snapshot path points.
    linked: PathBuf,
    /// Another store and its snapshot.
    other_db: PathBuf,
    other_snapshot: PathBuf,
    backups: PathBuf,
}

impl Paths {
    fn new(dir: &Path) -> Self {
        Self {
            db: dir.join("keys.sqlite"),
            snapshot: dir.join("keys.bloom"),
            linked: dir.join("linked").join("real.bloom"),
            other_db: dir.join("other.sqlite"),
            other_snapshot: dir.join("other.bloom"),
            backups: dir.join("backups"),
        }
    }
}

/// The child: recover like a real app after a crash, then insert and snapshot until killed.
/// Saving may fail while the parent has put something odd at the path; an app logs that and
/// goes on, and so does the child.
///
/// Even rounds recover with `open_and_recover` (rebuild and a fresh snapshot at once) and
/// save often. Odd rounds are a lazier app: `open`, a rebuild in memory if needed, and a save
/// only every 4000 inserts, so they are usually killed before their first save, with a
/// stale snapshot still on disk: the sequence that used to lose keys after a rollback.
fn child(dir: &Path, round: u32) -> ExitCode {
    let paths = Paths::new(dir);
    let store = SqliteStore::open(&paths.db).expect("open database");
    let eager = round.is_multiple_of(2);
    let filtered = if eager {
        FilteredStore::open_and_recover(store, options().with_snapshot(&paths.snapshot))
            .expect("recover")
            .0
    } else {
        let (filtered, outcome) =
            FilteredStore::open(store, options().with_snapshot(&paths.snapshot)).expect("open");
        if !outcome.is_trusted() {
            filtered.rebuild().expect("rebuild");
        }
        filtered
    };
    // The parent kills on events, not on a clock: it reads these lines.
    let progress = |line: &str| {
        use std::io::Write as _;
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{line}").and_then(|()| out.flush());
    };
    progress("recovered");
    let every = if eager { 25 } else { 4000 };
    // Every third round inserts in batches (one transaction each), so that kills land
    // inside batch commits too.
    let step = if round % 3 == 1 { 64 } else { 1 };
    for first in (0..200_000u32).step_by(step) {
        let keys: Vec<String> = (first..first + step as u32)
            .map(|i| format!("round-{round}-key-{i}"))
            .collect();
        if step == 1 {
            filtered.insert(&keys[0]).expect("insert");
        } else {
            filtered.insert_all(&keys).expect("insert_all");
        }
        if first % 64 < step as u32 {
            progress("progress");
        }
        for i in first..first + step as u32 {
            if counting() && i % 3 == 2 {
                filtered
                    .remove(&format!("round-{round}-key-{}", i - 1))
                    .expect("remove");
                if let Some(before) = round.checked_sub(1) {
                    filtered
                        .remove(&format!("round-{before}-key-{i}"))
                        .expect("remove");
                }
            }
            if i % every == every - 1 {
                let _ = filtered.save_snapshot(&paths.snapshot);
            }
        }
    }
    ExitCode::SUCCESS
}

/// The kinds of damage, applied between children.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Damage {
    /// The database loses its newest commits: restored from the most recent copy.
    Rollback,
    /// The database is restored from an older backup.
    RestoreOlder,
    /// The database is deleted; the next open creates a new one.
    Recreate,
    /// Another store's snapshot is copied over this one's.
    OtherStoresSnapshot,
    /// A named pipe at the snapshot path.
    Fifo,
    /// A directory at the snapshot path.
    Directory,
    /// A symbolic link at the snapshot path (to a file that may be stale or missing).
    Symlink,
}

const DAMAGES: [Damage; 7] = [
    Damage::Rollback,
    Damage::RestoreOlder,
    Damage::Recreate,
    Damage::OtherStoresSnapshot,
    Damage::Fifo,
    Damage::Directory,
    Damage::Symlink,
];

#[derive(Default, Debug)]
struct Tally {
    kills: u32,
    keys_checked: u64,
    removals_checked: u64,
    opens: BTreeMap<&'static str, u32>,
    damages: BTreeMap<String, u32>,
}

fn outcome_name(outcome: &OpenOutcome) -> &'static str {
    match outcome {
        OpenOutcome::Trusted { .. } => "trusted",
        OpenOutcome::CaughtUp { .. } => "caught up",
        OpenOutcome::Bypassed(reason) | OpenOutcome::Rebuilt { reason, .. } => match reason {
            BypassReason::NoSnapshot => "bypassed: no snapshot",
            BypassReason::Unreadable(_) => "bypassed: unreadable",
            BypassReason::NotBound => "bypassed: not bound",
            BypassReason::OtherStore { .. } => "bypassed: other store",
            BypassReason::NewerThanStore { .. } => "bypassed: newer than store",
            BypassReason::HistoryDiverged { .. } => "bypassed: history diverged",
            BypassReason::CountsDiverged { .. } => "bypassed: counts diverged",
            _ => "bypassed: other",
        },
        _ => "other",
    }
}

/// Reopens and checks every committed key. Returns an error naming a lost key.
fn check(paths: &Paths, tally: &mut Tally) -> Result<(), String> {
    let store = SqliteStore::open(&paths.db).map_err(|e| e.to_string())?;
    let mut keys = Vec::new();
    store
        .keys_since(DatasetGeneration::ZERO, &mut |k| keys.push(k.to_vec()))
        .map_err(|e| e.to_string())?;
    let mut removed = std::collections::BTreeSet::new();
    store
        .changes_since(DatasetGeneration::ZERO, &mut |c| {
            if c.kind == bloom_store::ChangeKind::Removed {
                removed.insert(c.key.to_vec());
            }
        })
        .map_err(|e| e.to_string())?;
    for key in &keys {
        removed.remove(key);
    }
    let (filtered, outcome) = FilteredStore::open(store, options().with_snapshot(&paths.snapshot))
        .map_err(|e| e.to_string())?;
    *tally.opens.entry(outcome_name(&outcome)).or_default() += 1;
    if matches!(
        outcome,
        OpenOutcome::Bypassed(BypassReason::CountsDiverged { .. })
    ) {
        return Err(format!(
            "the counting filter's counts diverged: {outcome:?}"
        ));
    }
    for key in &keys {
        let lookup = filtered
            .contains(&EncodedKey::from_encoded(key))
            .map_err(|e| e.to_string())?;
        if lookup != Lookup::Present {
            return Err(format!(
                "key {:?} is in the database but was reported {lookup:?} after {outcome:?}",
                String::from_utf8_lossy(key)
            ));
        }
    }
    tally.keys_checked += keys.len() as u64;
    // A trusted counting filter forgot the removed keys (all but its false positives).
    if counting() && outcome.is_trusted() && removed.len() >= 100 {
        let mut forgotten = 0usize;
        for key in &removed {
            let lookup = filtered
                .contains(&EncodedKey::from_encoded(key))
                .map_err(|e| e.to_string())?;
            forgotten += usize::from(lookup == Lookup::AbsentByFilter);
        }
        if forgotten * 10 < removed.len() * 9 {
            return Err(format!(
                "only {forgotten} of {} removed keys were forgotten after {outcome:?}",
                removed.len()
            ));
        }
        tally.removals_checked += removed.len() as u64;
    }
    Ok(())
}

fn remove_db(db: &Path) {
    for suffix in ["", "-wal", "-shm"] {
        let mut path = db.as_os_str().to_owned();
        path.push(suffix);
        let _ = std::fs::remove_file(path);
    }
}

/// Clears whatever is at the snapshot path (file, pipe, directory or link).
fn clear_snapshot_path(path: &Path) {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => {
            let _ = std::fs::remove_dir_all(path);
        }
        Ok(_) => {
            let _ = std::fs::remove_file(path);
        }
        Err(_) => {}
    }
}

fn generation(db: &Path) -> Result<u64, String> {
    let store = SqliteStore::open(db).map_err(|e| e.to_string())?;
    Ok(store.generation().map_err(|e| e.to_string())?.get())
}

fn backup(paths: &Paths, n: usize) -> Result<PathBuf, String> {
    let target = paths.backups.join(format!("{n}.sqlite"));
    let conn = rusqlite::Connection::open(&paths.db).map_err(|e| e.to_string())?;
    conn.execute("VACUUM INTO ?1", [target.to_string_lossy().as_ref()])
        .map_err(|e| e.to_string())?;
    Ok(target)
}

fn damage(
    paths: &Paths,
    which: Damage,
    backups: &[PathBuf],
    rng: &mut SplitMix,
) -> Result<(), String> {
    let io = |e: std::io::Error| e.to_string();
    match which {
        Damage::Rollback | Damage::RestoreOlder => {
            let Some(copy) = (match which {
                Damage::Rollback => backups.last(),
                _ => backups.get(rng.next() as usize % backups.len().max(1)),
            }) else {
                return Ok(());
            };
            let before = generation(&paths.db)?;
            remove_db(&paths.db);
            std::fs::copy(copy, &paths.db).map_err(io)?;
            // An app that rebuilds in memory and commits past the lost generations, then
            // crashes before saving: the stale snapshot is now older than the store.
            let lost = before.saturating_sub(generation(&paths.db)?);
            let store = SqliteStore::open(&paths.db).map_err(|e| e.to_string())?;
            let (w, _) = FilteredStore::open(store, options().with_snapshot(&paths.snapshot))
                .map_err(|e| e.to_string())?;
            w.rebuild().map_err(|e| e.to_string())?;
            for i in 0..lost + 10 {
                let key = format!("after-{which:?}-{}-{i}", rng.next());
                w.insert(&key).map_err(|e| e.to_string())?;
            }
        }
        Damage::Recreate => remove_db(&paths.db),
        Damage::OtherStoresSnapshot => {
            clear_snapshot_path(&paths.snapshot);
            std::fs::copy(&paths.other_snapshot, &paths.snapshot).map_err(io)?;
        }
        Damage::Fifo => {
            clear_snapshot_path(&paths.snapshot);
            let status = Command::new("mkfifo")
                .arg(&paths.snapshot)
                .status()
                .map_err(io)?;
            if !status.success() {
                return Err("mkfifo failed".into());
            }
        }
        Damage::Directory => {
            clear_snapshot_path(&paths.snapshot);
            std::fs::create_dir(&paths.snapshot).map_err(io)?;
        }
        Damage::Symlink => {
            clear_snapshot_path(&paths.snapshot);
            std::os::unix::fs::symlink(&paths.linked, &paths.snapshot).map_err(io)?;
        }
    }
    Ok(())
}

/// The child's standard output, line by line, read by a thread of its own.
fn child_lines(child: &mut std::process::Child) -> Result<mpsc::Receiver<String>, String> {
    use std::io::BufRead as _;
    let stdout = child
        .stdout
        .take()
        .ok_or("the child has no standard output")?;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    Ok(rx)
}

/// Waits for the child to print `wanted` (a deadline only bounds a hang: a child that
/// exits or stalls fails the test).
fn wait_for_line(lines: &mpsc::Receiver<String>, wanted: &str) -> Result<(), String> {
    loop {
        match lines.recv_timeout(CHILD_STALL) {
            Ok(line) if line == wanted => return Ok(()),
            Ok(_) => {}
            Err(e) => return Err(format!("the child never printed {wanted:?}: {e}")),
        }
    }
}

fn parent() -> Result<Tally, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let paths = Paths::new(dir.path());
    std::fs::create_dir_all(paths.linked.parent().unwrap_or(dir.path()))
        .map_err(|e| e.to_string())?;
    std::fs::create_dir_all(&paths.backups).map_err(|e| e.to_string())?;
    {
        // Another store, with its own snapshot, to be dropped in.
        let other = SqliteStore::open(&paths.other_db).map_err(|e| e.to_string())?;
        let (w, _) =
            FilteredStore::open_and_recover(other, options()).map_err(|e| e.to_string())?;
        for i in 0..300 {
            w.insert(&format!("other-{i}")).map_err(|e| e.to_string())?;
        }
        w.save_snapshot(&paths.other_snapshot)
            .map_err(|e| e.to_string())?;
    }
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut rng = SplitMix(SEED);
    let mut tally = Tally::default();
    let mut backups = Vec::new();
    let start = Instant::now();
    while tally.kills < MIN_KILLS || (tally.kills < MAX_KILLS && start.elapsed() < TIME_BUDGET) {
        // Every third round, damage something, cycling through every kind; otherwise a
        // path left odd by an earlier round is cleared so that normal rounds happen too.
        if tally.kills % 3 == 2 {
            let which = DAMAGES[(tally.kills / 3) as usize % DAMAGES.len()];
            damage(&paths, which, &backups, &mut rng)?;
            *tally.damages.entry(format!("{which:?}")).or_default() += 1;
            check(&paths, &mut tally).map_err(|e| format!("after {which:?}: {e}"))?;
        } else if std::fs::symlink_metadata(&paths.snapshot).is_ok_and(|m| !m.is_file()) {
            clear_snapshot_path(&paths.snapshot);
        }

        let mut child = Command::new(&exe)
            .arg("--crash-child")
            .arg(dir.path())
            .arg(tally.kills.to_string())
            .arg(if counting() { "counting" } else { "plain" })
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| e.to_string())?;
        let lines = child_lines(&mut child)?;
        // Every fourth round is killed as soon as it started, somewhere in its recovery
        // (where it lands does not matter). The others are killed after a seeded number of
        // progress lines (each 64 keys inserted), which lands the kill in the middle of
        // inserts, removals and saves whatever the machine's speed.
        if tally.kills % 4 == 3 {
            std::thread::yield_now();
        } else {
            wait_for_line(&lines, "recovered")?;
            for _ in 0..(rng.next() % 12) {
                wait_for_line(&lines, "progress")?;
            }
        }
        // On Unix, `kill` sends SIGKILL: no destructor, no flush, no cleanup runs.
        child.kill().map_err(|e| e.to_string())?;
        child.wait().map_err(|e| e.to_string())?;
        tally.kills += 1;
        check(&paths, &mut tally)?;
        if tally.kills.is_multiple_of(4) && paths.db.exists() {
            backups.push(backup(&paths, backups.len())?);
        }
    }
    // Killed saves leave temporary files; each save removes the stale ones, so at most the
    // last child's can remain.
    let name = ".keys.bloom.";
    let leftovers = std::fs::read_dir(dir.path())
        .map_err(|e| e.to_string())?
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(name))
        .count();
    if leftovers > 1 {
        return Err(format!("{leftovers} temporary snapshot files accumulated"));
    }
    Ok(tally)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|a| a == "--crash-child") {
        let dir = PathBuf::from(args.get(at + 1).map_or("", String::as_str));
        let round = args.get(at + 2).and_then(|r| r.parse().ok()).unwrap_or(0);
        COUNTING.store(
            args.get(at + 3).is_some_and(|m| m == "counting"),
            Ordering::SeqCst,
        );
        return child(&dir, round);
    }
    std::thread::spawn(|| {
        std::thread::sleep(WATCHDOG);
        eprintln!("crash test did not finish within {WATCHDOG:?}: something blocked");
        println!("crash: 0 passed, 1 failed");
        std::process::exit(1);
    });
    for mode in [false, true] {
        COUNTING.store(mode, Ordering::SeqCst);
        let name = if mode { "counting" } else { "plain" };
        match parent() {
            Ok(t)
                if t.kills >= MIN_KILLS
                    && t.keys_checked > 0
                    && (!mode || t.removals_checked > 0)
                    && t.damages.len() == DAMAGES.len() =>
            {
                println!(
                    "crash test ({name} filter): {} SIGKILLs, {} keys checked after reopening, {} removed keys checked forgotten; damages {:?}; opens {:?}; no committed key reported absent",
                    t.kills, t.keys_checked, t.removals_checked, t.damages, t.opens
                );
            }
            Ok(t) => {
                eprintln!("crash test ({name} filter) did not exercise enough: {t:?}");
                println!("crash: 0 passed, 1 failed");
                return ExitCode::FAILURE;
            }
            Err(e) => {
                eprintln!("crash test ({name} filter) failed: {e}");
                println!("crash: 0 passed, 1 failed");
                return ExitCode::FAILURE;
            }
        }
    }
    println!("crash: 1 passed, 0 failed");
    ExitCode::SUCCESS
}
