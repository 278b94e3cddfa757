//! The main job: an offline-sync client on an embedded SQLite database, no setup needed.
//!
//! 1. Syncs a feed of records (duplicates included) through a `FilteredStore`: a record the
//!    filter calls absent is new without touching the database; a "maybe" is confirmed there.
//! 2. Saves a snapshot of the filter, recording the database generation it covers.
//! 3. "Restarts": reopens database and snapshot, catches up, and syncs a second feed.
//! 4. Damages the snapshot and restarts again: the filter is bypassed and rebuilt, never
//!    trusted.
//! 5. Restores the database from a backup that is older than the snapshot, as an operator
//!    would after a disk failure, syncs more records and "crashes" before saving: the stale
//!    snapshot no longer matches the database's history and is refused, never caught up
//!    from.
//! 6. Prints a report.
//!
//! `cargo run --release -p bloom-store --example offline_sync [-- RECORDS]` (the example
//! always has the `sqlite` feature: the crate enables it for its own examples and tests).

use std::path::Path;
use std::time::Instant;

use bloom_core::EncodedKey;
use bloom_format::{DecodeOptions, Snapshot};
use bloom_store::{
    DatasetGeneration, FilterOptions, FilteredStore, Lookup, Metrics, OpenOutcome, PrimaryStore,
    SqliteStore,
};

/// A small deterministic generator (SplitMix64), so every run syncs the same feed.
struct Feed(u64);

impl Feed {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
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

#[derive(Default)]
struct SyncTally {
    records: u64,
    new: u64,
    duplicates: u64,
}

fn sync(
    store: &FilteredStore<SqliteStore>,
    feed: &[String],
) -> Result<SyncTally, Box<dyn std::error::Error>> {
    let mut tally = SyncTally::default();
    for record in feed {
        tally.records += 1;
        if store.contains(record)? == Lookup::Present {
            tally.duplicates += 1;
        } else {
            // "Absent" (from the filter, or confirmed by the store): new.
            store.insert(record)?;
            tally.new += 1;
        }
    }
    Ok(tally)
}

fn print_tally(phase: &str, tally: &SyncTally, seconds: f64) {
    println!(
        "{phase}: {} records, {} new, {} duplicates skipped ({seconds:.2} s)",
        tally.records, tally.new, tally.duplicates
    );
}

fn print_metrics(m: &Metrics) {
    println!("  mode                      {:?}", m.mode);
    println!("  queries                   {}", m.queries);
    println!(
        "  store lookups             {} ({} avoided, {:.1}% of queries)",
        m.store_lookups,
        m.lookups_avoided,
        100.0 * m.lookups_avoided as f64 / m.queries.max(1) as f64
    );
    println!(
        "  false positives           {} observed rate {} vs predicted {:.5} at the current fill",
        m.false_positives,
        m.observed_false_positive_rate
            .map_or_else(|| "n/a".to_owned(), |r| format!("{r:.5}")),
        m.predicted_false_positive_rate
    );
    println!(
        "  filter                    m = {}, k = {}, fill {:.3}, ~{:.0} items of capacity {}{}",
        m.bits,
        m.hashes,
        m.fill_ratio,
        m.estimated_items,
        m.capacity,
        if m.over_capacity {
            " (over capacity: rebuild to grow)"
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
        FilterOptions::new(capacity, 0.01),
        Some(snapshot),
    )?)
}

/// One line for an open outcome.
fn describe(outcome: &OpenOutcome) -> String {
    match outcome {
        OpenOutcome::Trusted { generation } => {
            format!("snapshot trusted (generation {generation})")
        }
        OpenOutcome::CaughtUp { from, to, keys, .. } => {
            format!("snapshot caught up from generation {from} to {to} ({keys} records)")
        }
        OpenOutcome::Bypassed(reason) => format!("bypassed: {reason}"),
        OpenOutcome::Rebuilt {
            reason,
            report,
            snapshot,
        } => format!(
            "not trusted ({reason}); rebuilt from {} records, fresh snapshot: {snapshot:?}",
            report.keys_scanned
        ),
        other => format!("{other:?}"),
    }
}

/// Counts the database's records that the wrapper reports as new (must be zero).
fn reported_new(store: &FilteredStore<SqliteStore>) -> Result<u64, Box<dyn std::error::Error>> {
    let mut keys = Vec::new();
    store
        .store()
        .keys_since(DatasetGeneration::ZERO, &mut |k| keys.push(k.to_vec()))?;
    let mut new = 0;
    for key in &keys {
        if !store
            .contains_encoded(&EncodedKey::from_encoded(key))?
            .is_present()
        {
            new += 1;
        }
    }
    println!(
        "  checked {} database records: {new} reported new (must be 0)",
        keys.len()
    );
    Ok(new)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let records: u64 = std::env::args().nth(1).map_or(Ok(50_000), |a| a.parse())?;
    let dir = std::env::temp_dir().join(format!("bloom-offline-sync-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let db = dir.join("records.sqlite");
    let snapshot = dir.join("records.bloom");
    let capacity = records * 2;
    let mut feed = Feed(2026);
    println!("offline sync demo in {}", dir.display());

    // 1. First run: no snapshot, so the filter is built from the (empty) database.
    let (store, outcome) = open(&db, &snapshot, capacity)?;
    println!("open #1: {}", describe(&outcome));
    let start = Instant::now();
    let tally = sync(&store, &feed.records(records, records))?;
    print_tally("sync #1", &tally, start.elapsed().as_secs_f64());
    print_metrics(&store.metrics());

    // 2. Snapshot.
    let generation = store.save_snapshot(&snapshot)?;
    println!("snapshot saved at generation {generation}");
    drop(store);

    // 3. Restart, recover, sync a second feed that overlaps the first.
    let (store, outcome) = open(&db, &snapshot, capacity)?;
    println!("open #2 (restart): {}", describe(&outcome));
    let start = Instant::now();
    let tally = sync(&store, &feed.records(records, records * 3 / 2))?;
    print_tally("sync #2", &tally, start.elapsed().as_secs_f64());
    print_metrics(&store.metrics());
    drop(store);

    // Restart without a new snapshot: the records synced since are caught up from the
    // database (keys after the snapshot's generation), then the filter is trusted again.
    let (store, outcome) = open(&db, &snapshot, capacity)?;
    println!(
        "open #3 (snapshot older than the database): {}",
        describe(&outcome)
    );
    let backup = dir.join("backup.sqlite");
    rusqlite::Connection::open(&db)?.execute("VACUUM INTO ?1", [backup.to_string_lossy()])?;
    println!(
        "  database backed up at generation {}",
        store.store().generation()?
    );
    sync(&store, &feed.records(records / 5, records * 2))?;
    store.save_snapshot(&snapshot)?;
    drop(store);

    // 4. A damaged snapshot is bypassed and rebuilt, never trusted.
    let mut bytes = std::fs::read(&snapshot)?;
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x40;
    std::fs::write(&snapshot, &bytes)?;
    let (store, outcome) = open(&db, &snapshot, capacity)?;
    println!(
        "open #4 (one flipped byte in the snapshot): {}",
        describe(&outcome)
    );
    let mut lost = reported_new(&store)?;
    drop(store);

    // 5. The database is restored from the backup, which is older than the snapshot. The
    //    app rebuilds in memory, syncs more records, and crashes before its next save.
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
    }
    std::fs::copy(&backup, &db)?;
    let (store, outcome) = FilteredStore::open(
        SqliteStore::open(&db)?,
        FilterOptions::new(capacity, 0.01),
        Some(&snapshot),
    )?;
    println!(
        "open #5 (database restored from an older backup): {}",
        describe(&outcome)
    );
    store.rebuild()?;
    sync(&store, &feed.records(records / 2, records * 4))?;
    println!("  synced more records, then crashed before saving a snapshot");
    drop(store);
    let (store, outcome) = open(&db, &snapshot, capacity)?;
    println!("open #6 (after the crash): {}", describe(&outcome));
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
        store.remove_encoded(&EncodedKey::from_encoded(key))?;
    }
    let mut confirmed_absent = 0;
    for key in &erased {
        if store.contains_encoded(&EncodedKey::from_encoded(key))? == Lookup::FalsePositive {
            confirmed_absent += 1;
        }
    }
    println!(
        "erased {} records: {confirmed_absent} read maybe and were confirmed absent by the database; stale removals {}",
        erased.len(),
        store.metrics().stale_removals
    );
    lost += reported_new(&store)?;
    let generation = store.save_snapshot(&snapshot)?;

    // 7. The snapshot header.
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
