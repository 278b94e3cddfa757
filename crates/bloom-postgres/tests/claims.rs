//! Wrappers of both kinds over one store: a `FilteredStore` (an exclusive claim) never opens
//! beside another wrapper, and a shared filter's wrappers (`SharedFilteredStore`, shared
//! claims) open together but never beside a `FilteredStore`, whose own filter would answer
//! "absent" for their keys. Every pair, in both orders, in one process and across processes,
//! over SQLite, PostgreSQL and (in one process) memory; a claim given back (the wrapper
//! dropped, its process ended) lets the other kind in.
//!
//! A `harness = false` test: with `--hold KIND STORE TARGET`, the binary is a process that
//! holds a wrapper until its standard input closes.

use std::io::{BufRead as _, Write as _};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::Duration;

use bloom_core::KeyEncoding;
use bloom_postgres::PostgresStore;
use bloom_postgres::testing::TempServer;
use bloom_redis::{RedisTarget, SharedError, SharedFilteredStore};
use bloom_store::{
    FilterOptions, FilteredStore, Lookup, MemoryStore, PrimaryStore, SqliteStore, StoreError,
};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    /// A `FilteredStore`.
    Filtered,
    /// A `SharedFilteredStore`.
    Shared,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Self::Filtered => "filtered",
            Self::Shared => "shared",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        match text {
            "filtered" => Some(Self::Filtered),
            "shared" => Some(Self::Shared),
            _ => None,
        }
    }
}

/// A Redis that answers nothing (a closed port): a shared wrapper opens bypassed, its claim
/// taken all the same.
fn no_redis() -> RedisTarget {
    RedisTarget::single("redis://127.0.0.1:1").with_timeout(Duration::from_millis(200))
}

/// A wrapper held open, of either kind.
enum Held<S: PrimaryStore> {
    Filtered(Box<FilteredStore<S>>),
    Shared(Box<SharedFilteredStore<S>>),
}

impl<S: PrimaryStore> Held<S> {
    /// Looks a key up, so that the wrapper is used and not only opened.
    fn contains(&self, key: &str) -> Result<Lookup, String> {
        match self {
            Self::Filtered(w) => w.contains(key).map_err(|e| e.to_string()),
            Self::Shared(w) => w.contains(key).map_err(|e| e.to_string()),
        }
    }
}

/// Opens a wrapper of `kind`: `Ok(None)` when the store is in use by a wrapper it cannot
/// open beside.
fn open<S: PrimaryStore>(store: S, kind: Kind) -> Result<Option<Held<S>>, String> {
    match kind {
        Kind::Filtered => match FilteredStore::open(store, FilterOptions::new(1_000, 0.01)) {
            Ok((w, _)) => Ok(Some(Held::Filtered(Box::new(w)))),
            Err(StoreError::InUse) => Ok(None),
            Err(e) => Err(e.to_string()),
        },
        Kind::Shared => match SharedFilteredStore::open_with_grace(
            store,
            no_redis(),
            "claims",
            KeyEncoding::Nfc,
            Duration::ZERO,
        ) {
            Ok((w, _)) => Ok(Some(Held::Shared(Box::new(w)))),
            Err(SharedError::InUse) => Ok(None),
            Err(e) => Err(e.to_string()),
        },
    }
}

/// Whether a wrapper of `second` may open beside one of `first`.
fn may_share(first: Kind, second: Kind) -> bool {
    first == Kind::Shared && second == Kind::Shared
}

const PAIRS: [(Kind, Kind); 4] = [
    (Kind::Filtered, Kind::Filtered),
    (Kind::Filtered, Kind::Shared),
    (Kind::Shared, Kind::Filtered),
    (Kind::Shared, Kind::Shared),
];

/// Every pair in one process: the second opens exactly when both are shared, and opens
/// once the first is dropped.
fn in_one_process<S: PrimaryStore>(what: &str, store: impl Fn() -> S) -> Result<(), String> {
    for (first, second) in PAIRS {
        let held = open(store(), first)?.ok_or(format!("{what}: the first {first:?} refused"))?;
        held.contains("k")?;
        let beside = open(store(), second)?;
        if beside.is_some() != may_share(first, second) {
            return Err(format!(
                "{what}: a {second:?} beside a {first:?} in one process: opened {}",
                beside.is_some()
            ));
        }
        drop(beside);
        drop(held);
        let after = open(store(), second)?;
        if after.is_none() {
            return Err(format!(
                "{what}: a {second:?} refused once the {first:?} was dropped"
            ));
        }
    }
    Ok(())
}

/// A process holding a wrapper of `kind` over `store` (`sqlite PATH` or `postgres PARAMS`).
struct Holder {
    child: Child,
}

impl Holder {
    /// Starts it and waits until it says whether it holds the wrapper.
    fn start(kind: Kind, store: &[&str]) -> Result<(Self, bool), String> {
        let mut child = Command::new(std::env::current_exe().map_err(|e| e.to_string())?)
            .arg("--hold")
            .arg(kind.name())
            .args(store)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| e.to_string())?;
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().ok_or("no stdout")?)
            .read_line(&mut line)
            .map_err(|e| e.to_string())?;
        let held = match line.trim() {
            "held" => true,
            "refused" => false,
            other => return Err(format!("the holder said {other:?}")),
        };
        Ok((Self { child }, held))
    }

    /// Closes its standard input and waits for it to end (its claim given back).
    fn stop(mut self) -> Result<(), String> {
        drop(self.child.stdin.take());
        let status = self.child.wait().map_err(|e| e.to_string())?;
        if status.success() {
            Ok(())
        } else {
            Err(format!("the holder ended with {status}"))
        }
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Every pair across processes: another process holds the first wrapper; this one opens the
/// second (and a third process too), and opens it once the holder has ended.
fn across_processes<S: PrimaryStore>(
    what: &str,
    spec: &[&str],
    store: impl Fn() -> S,
) -> Result<(), String> {
    for (first, second) in PAIRS {
        let (holder, held) = Holder::start(first, spec)?;
        if !held {
            return Err(format!("{what}: the holder's {first:?} refused"));
        }
        let beside = open(store(), second)?.is_some();
        let (other, other_held) = Holder::start(second, spec)?;
        if beside != may_share(first, second) || other_held != may_share(first, second) {
            return Err(format!(
                "{what}: a {second:?} beside another process's {first:?}: opened here {beside}, in a third process {other_held}"
            ));
        }
        other.stop()?;
        holder.stop()?;
        if open(store(), second)?.is_none() {
            return Err(format!(
                "{what}: a {second:?} refused once the process holding a {first:?} ended"
            ));
        }
    }
    Ok(())
}

/// The holder process: `--hold KIND sqlite PATH` or `--hold KIND postgres PARAMS`.
fn hold(args: &[String]) -> ExitCode {
    let (Some(kind), Some(store), Some(at)) = (
        args.first().and_then(|k| Kind::parse(k)),
        args.get(1),
        args.get(2),
    ) else {
        eprintln!("usage: --hold filtered|shared sqlite PATH|postgres PARAMS");
        return ExitCode::FAILURE;
    };
    match store.as_str() {
        "sqlite" => match SqliteStore::open(at) {
            Ok(store) => hold_with(store, kind),
            Err(e) => fail(&e.to_string()),
        },
        _ => match PostgresStore::connect(at) {
            Ok(store) => hold_with(store, kind),
            Err(e) => fail(&e.to_string()),
        },
    }
}

fn fail(why: &str) -> ExitCode {
    eprintln!("holder: {why}");
    ExitCode::FAILURE
}

/// Opens a wrapper of `kind`, says whether it holds it, and keeps it until stdin closes.
fn hold_with<S: PrimaryStore>(store: S, kind: Kind) -> ExitCode {
    let held = match open(store, kind) {
        Ok(held) => held,
        Err(e) => return fail(&e),
    };
    let mut out = std::io::stdout();
    let _ = writeln!(out, "{}", if held.is_some() { "held" } else { "refused" });
    let _ = out.flush();
    let mut rest = String::new();
    let _ = std::io::stdin().read_line(&mut rest);
    drop(held);
    ExitCode::SUCCESS
}

fn run() -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let db = dir.path().join("claims.sqlite");
    drop(SqliteStore::open(&db).map_err(|e| e.to_string())?);
    let sqlite = || SqliteStore::open(&db).expect("the database opens");
    in_one_process("sqlite", sqlite)?;
    let path = db.to_str().ok_or("a path that is not UTF-8")?;
    across_processes("sqlite", &["sqlite", path], sqlite)?;

    let memory = MemoryStore::new();
    in_one_process("memory", || &memory)?;

    let server = TempServer::start_with(&[("fsync", "off")]).map_err(|e| e.to_string())?;
    let params = server.params("postgres");
    drop(PostgresStore::connect(&params).map_err(|e| e.to_string())?);
    let postgres = || PostgresStore::connect(&params).expect("the store opens");
    in_one_process("postgres", postgres)?;
    across_processes("postgres", &["postgres", &params], postgres)?;
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--hold") {
        return hold(&args[1..]);
    }
    // The test harness's own flags (a filter, --nocapture) are taken and ignored.
    match run() {
        Ok(()) => {
            println!(
                "claims: every pair of wrappers, in one process and across processes, over SQLite, PostgreSQL and memory"
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("claims: {e}");
            ExitCode::FAILURE
        }
    }
}
