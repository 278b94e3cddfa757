//! The main job: an offline-sync client on an embedded SQLite database, no setup needed.
//!
//! 1. Syncs a feed of records (duplicates and NFC/NFD spellings included) through a
//!    `FilteredStore`, a batch at a time: a record the filter calls absent is new without
//!    touching the database; a "maybe" is confirmed there; the new records of a batch are
//!    committed in one transaction.
//! 2. Saves a snapshot of the filter, recording the database generation it covers.
//! 3. "Restarts": reopens database and snapshot, catches up, and syncs a second feed.
//! 4. Damages the snapshot and restarts again: the filter is bypassed and rebuilt, never
//!    trusted.
//! 5. Restores the database from a backup that is older than the snapshot, as an operator
//!    would after a disk failure, syncs more records and "crashes" before saving: the stale
//!    snapshot no longer matches the database's history and is refused, never caught up
//!    from.
//! 6. Erases records, whose stale "maybe" the database refutes.
//! 7. Reports what the filter saved: store lookups avoided, and a store lookup timed against
//!    a filter probe.
//!
//! `cargo run --release -p bloom-store --example offline_sync [-- RECORDS]` (the example
//! always has the `sqlite` feature: the crate enables it for its own examples and tests).

use std::path::Path;
use std::time::{Duration, Instant};

use bloom_format::{DecodeOptions, Snapshot};
use bloom_store::{
    DatasetGeneration, FilterOptions, FilteredStore, Lookup, Metrics, OpenOutcome, PrimaryStore,
    SqliteStore,
};
use bloom_testing::keys::SplitMix;

/// Records synced per batch: one `contains_each`, then one transaction for the new ones.
const BATCH: usize = 1_000;

/// A feed from a small deterministic generator, so every run syncs the same records.
struct Feed(SplitMix);

impl Feed {
    fn next(&mut self) -> u64 {
        self.0.next()
    }

    /// `count` record ids drawn from `0..universe`: repeats are the duplicates a sync sees.
    fn records(&mut self, count: u64, universe: u64) -> Vec<String> {
        (0..count)
            .map(|_| {
                let id = self.next() % universe;
                // Some records arrive sometimes composed (NFC), sometimes decomposed (NFD):
                // the NFC key encoding makes both spellings the same key.
                match (id % 10, self.next() % 2) {
                    (0, 0) => format!("note-{id}-caf\u{e9}"),
                    (0, _) => format!("note-{id}-cafe\u{301}"),
                    _ => format!("record-{id}"),
                }
            })
            .collect()
    }
}

/// Lookups over the whole run, added up from each wrapper before it is dropped.
#[derive(Default)]
struct Totals {
    queries: u64,
    avoided: u64,
}

impl Totals {
    fn add(&mut self, store: &FilteredStore<SqliteStore>) {
        let m = store.metrics();
        self.queries += m.queries;
        self.avoided += m.lookups_avoided;
    }
}

#[derive(Default)]
struct SyncTally {
    records: u64,
    new: u64,
    duplicates: u64,
}

/// Syncs a feed a batch at a time: the records the store does not have are committed, one
/// transaction per batch; a record is a duplicate only when the store confirms it.
fn sync(
    store: &FilteredStore<SqliteStore>,
    feed: &[String],
) -> Result<SyncTally, Box<dyn std::error::Error>> {
    let mut tally = SyncTally::default();
    for batch in feed.chunks(BATCH) {
        tally.records += batch.len() as u64;
        let lookups = store.contains_each(batch)?;
        let unseen: Vec<&String> = batch
            .iter()
            .zip(&lookups)
            .filter(|(_, lookup)| !lookup.is_present())
            .map(|(record, _)| record)
            .collect();
        // A record twice in the batch (or in two spellings) is new once.
        let new = store.insert_all(&unseen)?.iter().filter(|&&n| n).count() as u64;
        tally.new += new;
        tally.duplicates += batch.len() as u64 - new;
    }
    Ok(tally)
}

fn print_tally(phase: &str, tally: &SyncTally, elapsed: Duration) {
    println!(
        "{phase}: {} records, {} new, {} duplicates skipped ({:.2} s, one transaction per {BATCH} records)",
        tally.records,
        tally.new,
        tally.duplicates,
        elapsed.as_secs_f64()
    );
}

fn print_metrics(m: &Metrics) {
    println!("  filter                    {}", m.mode);
    println!(
        "  lookups                   {} asked, {} answered by the filter alone ({:.1}%), {} sent to the database",
        m.queries,
        m.lookups_avoided,
        100.0 * m.lookups_avoided as f64 / m.queries.max(1) as f64,
        m.store_lookups
    );
    let observed = m
        .observed_false_positive_rate
        .map_or_else(|| "none yet".to_owned(), |r| format!("{r:.5}"));
    println!(
        "  false positives           {} (observed rate {observed}, predicted {:.5} at this fill)",
        m.false_positives, m.predicted_false_positive_rate
    );
    println!(
        "  size                      {} bits, {} positions per key, {:.1}% of bits set, about {:.0} keys of the {} planned ({} more fit){}",
        m.bits,
        m.hashes,
        100.0 * m.fill_ratio,
        m.estimated_items,
        m.capacity,
        m.remaining_capacity,
        if m.over_capacity {
            " (over capacity: a rebuild grows it)"
        } else {
            ""
        }
    );
}

fn open(
    db: &Path,
    snapshot: &Path,
    capacity: u64,
) -> Result<(FilteredStore<SqliteStore>, OpenOutcome), Box<dyn std::error::Error>> {
    let store = SqliteStore::open(db)?;
    Ok(FilteredStore::open_and_recover(
        store,
        FilterOptions::new(capacity, 0.01).with_snapshot(snapshot),
    )?)
}

/// Counts the database's records that the wrapper reports as new (must be zero).
fn reported_new(store: &FilteredStore<SqliteStore>) -> Result<u64, Box<dyn std::error::Error>> {
    let mut keys = Vec::new();
    store
        .store()
        .keys_since(DatasetGeneration::ZERO, &mut |k| keys.push(k.to_vec()))?;
    let new = store
        .contains_each(
            keys.iter()
                .map(|k| bloom_core::EncodedKey::from_encoded(k.as_ref())),
        )?
        .iter()
        .filter(|lookup| !lookup.is_present())
        .count() as u64;
    println!(
        "  checked {} database records: {new} reported new (must be 0)",
        keys.len()
    );
    Ok(new)
}

/// Times a lookup in the database against a probe of the filter, on keys the store does not
/// have (what the filter answers alone).
fn time_lookups(
    store: &FilteredStore<SqliteStore>,
) -> Result<(Duration, Duration), Box<dyn std::error::Error>> {
    let absent: Vec<Vec<u8>> = (0..20_000)
        .map(|i| format!("never-synced-{i}").into_bytes())
        .collect();
    let db = store.store();
    let start = Instant::now();
    for key in &absent {
        db.contains(key)?;
    }
    let per_store_lookup = start.elapsed() / absent.len() as u32;
    let filter = store.filter_copy()?;
    let start = Instant::now();
    let maybes = filter
        .contains_each(
            absent
                .iter()
                .map(|k| bloom_core::EncodedKey::from_encoded(k.as_ref())),
        )
        .filter(|&maybe| maybe)
        .count();
    let per_probe = start.elapsed() / absent.len() as u32;
    std::hint::black_box(maybes);
    Ok((per_store_lookup, per_probe))
}

fn print_glossary() {
    println!("terms:");
    for (term, meaning) in [
        (
            "filter",
            "a Bloom filter of the database's records: \"absent\" is certain, \"maybe\" is asked of the database",
        ),
        (
            "generation",
            "the database's change counter: every new record and every erasure adds one",
        ),
        (
            "history digest",
            "a hash chain over every change up to a generation: two databases agree on it only if they had the same changes",
        ),
        (
            "snapshot",
            "the filter saved to a file with the generation and history digest it covers",
        ),
        (
            "trusted",
            "the snapshot matches the database's history: the filter answers \"absent\" alone",
        ),
        (
            "caught up",
            "the snapshot matches an earlier point of the history: the records since were added from the database",
        ),
        (
            "bypassed",
            "the filter cannot be trusted (missing, damaged, of another history): every lookup asks the database until a rebuild",
        ),
        (
            "false positive",
            "the filter said maybe, the database said no: a wasted lookup, never a wrong answer",
        ),
    ] {
        println!("  {term:<16} {meaning}");
    }
}

/// Prints the error and its causes in words, as a program for people should.
fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            let mut source = e.source();
            while let Some(cause) = source {
                eprintln!("  caused by: {cause}");
                source = cause.source();
            }
            std::process::ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let records: u64 = match std::env::args().nth(1) {
        None => 50_000,
        Some(arg) => match arg.parse() {
            Ok(n) if n > 0 => n,
            _ => return Err(format!("RECORDS must be a positive number, not {arg:?}").into()),
        },
    };
    let dir = std::env::temp_dir().join(format!("bloom-offline-sync-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let db = dir.join("records.sqlite");
    let snapshot = dir.join("records.bloom");
    let capacity = records * 2;
    let mut feed = Feed(SplitMix(2026));
    let mut totals = Totals::default();
    println!("offline sync demo in {}", dir.display());
    print_glossary();

    // 1. First run: no snapshot, so the filter is built from the (empty) database.
    let (store, outcome) = open(&db, &snapshot, capacity)?;
    println!("open #1: {outcome}");
    let start = Instant::now();
    let tally = sync(&store, &feed.records(records, records))?;
    print_tally("sync #1", &tally, start.elapsed());
    print_metrics(&store.metrics());

    // 2. Snapshot.
    let generation = store.save_snapshot(&snapshot)?;
    println!("snapshot saved at generation {generation}");
    totals.add(&store);
    drop(store);

    // 3. Restart, recover, sync a second feed that overlaps the first.
    let (store, outcome) = open(&db, &snapshot, capacity)?;
    println!("open #2 (restart): {outcome}");
    let start = Instant::now();
    let tally = sync(&store, &feed.records(records, records * 3 / 2))?;
    print_tally("sync #2", &tally, start.elapsed());
    print_metrics(&store.metrics());
    totals.add(&store);
    drop(store);

    // Restart without a new snapshot: the records synced since are caught up from the
    // database (keys after the snapshot's generation), then the filter is trusted again.
    let (store, outcome) = open(&db, &snapshot, capacity)?;
    println!("open #3 (snapshot older than the database): {outcome}");
    let backup = dir.join("backup.sqlite");
    rusqlite::Connection::open(&db)?.execute("VACUUM INTO ?1", [backup.to_string_lossy()])?;
    println!(
        "  database backed up at generation {}",
        store.store().generation()?
    );
    sync(&store, &feed.records(records / 5, records * 2))?;
    store.save_snapshot(&snapshot)?;
    totals.add(&store);
    drop(store);

    // 4. A damaged snapshot is bypassed and rebuilt, never trusted.
    let mut bytes = std::fs::read(&snapshot)?;
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x40;
    std::fs::write(&snapshot, &bytes)?;
    let (store, outcome) = open(&db, &snapshot, capacity)?;
    println!("open #4 (one flipped bit in the snapshot): {outcome}");
    let mut lost = reported_new(&store)?;
    totals.add(&store);
    drop(store);

    // 5. The database is restored from the backup, which is older than the snapshot. The
    //    app rebuilds in memory, syncs more records, and crashes before its next save.
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
    }
    std::fs::copy(&backup, &db)?;
    let (store, outcome) = FilteredStore::open(
        SqliteStore::open(&db)?,
        FilterOptions::new(capacity, 0.01).with_snapshot(&snapshot),
    )?;
    println!("open #5 (database restored from an older backup): {outcome}");
    let report = store.rebuild()?;
    println!("  {report}");
    sync(&store, &feed.records(records / 2, records * 4))?;
    println!("  synced more records, then crashed before saving a snapshot");
    totals.add(&store);
    drop(store);
    let (store, outcome) = open(&db, &snapshot, capacity)?;
    println!("open #6 (after the crash): {outcome}");
    lost += reported_new(&store)?;
    print_metrics(&store.metrics());

    // 6. Erasure requests: records removed from the database. This plain filter keeps their
    //    bits, so each still reads "maybe" and the database answers absent (a counting filter,
    //    `FilterOptions::with_counting(true)`, would forget them, for four times the bits).
    let mut erased = Vec::new();
    store
        .store()
        .keys_since(DatasetGeneration::ZERO, &mut |key| {
            if erased.len() < (records / 10) as usize {
                erased.push(key.to_vec());
            }
        })?;
    for key in &erased {
        store.remove(&bloom_core::EncodedKey::from_encoded(key))?;
    }
    let refuted = store
        .contains_each(
            erased
                .iter()
                .map(|k| bloom_core::EncodedKey::from_encoded(k.as_ref())),
        )?
        .iter()
        .filter(|&&lookup| lookup == Lookup::FalsePositive)
        .count();
    println!(
        "erased {} records: {refuted} still read maybe and were confirmed absent by the database ({} stale removals in the filter)",
        erased.len(),
        store.metrics().stale_removals
    );
    lost += reported_new(&store)?;
    let generation = store.save_snapshot(&snapshot)?;

    // 7. What the filter saved, and the snapshot header.
    totals.add(&store);
    let (per_lookup, per_probe) = time_lookups(&store)?;
    println!(
        "what the filter saved: a database lookup took {:.1} µs, a filter probe {:.0} ns ({:.0}x faster);",
        per_lookup.as_secs_f64() * 1e6,
        per_probe.as_secs_f64() * 1e9,
        per_lookup.as_secs_f64() / per_probe.as_secs_f64().max(1e-12)
    );
    println!(
        "  in this run the filter answered {} of {} lookups alone, about {:.2} s of database lookups not made",
        totals.avoided,
        totals.queries,
        per_lookup.saturating_sub(per_probe).as_secs_f64() * totals.avoided as f64
    );
    let saved = Snapshot::read_file(&snapshot, &DecodeOptions::unlimited())?;
    println!("snapshot header (generation {generation}):");
    for line in saved.dump_header().lines() {
        println!("  {line}");
    }
    std::fs::remove_dir_all(&dir)?;
    if lost != 0 {
        return Err("a committed record was reported new".into());
    }
    Ok(())
}
