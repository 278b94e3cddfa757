//! Check-then-confirm membership over a primary store.
//!
//! The primary store holds the truth; the Bloom filter only saves store lookups. A
//! [`FilteredStore`] answers "absent" from the filter alone only while the filter is trusted,
//! confirms every "maybe" in the store, and bypasses a filter that is missing, corrupt,
//! incompatible, of another store or of another history, or being rebuilt. A filter failure
//! may slow lookups; it never loses a record: **a key committed to the primary store is never
//! reported absent.**
//!
//! ```
//! use bloom_store::{FilterOptions, FilteredStore, Lookup, MemoryStore, OpenOutcome};
//!
//! let dir = tempfile::tempdir()?;
//! let snapshot = dir.path().join("seen.bloom");
//! let (seen, outcome) = FilteredStore::open_and_recover(
//!     MemoryStore::new(),
//!     FilterOptions::new(10_000, 0.01).with_snapshot(&snapshot),
//! )?;
//! assert!(matches!(outcome, OpenOutcome::Rebuilt { .. })); // no snapshot yet: built, saved
//!
//! assert!(seen.insert("record-1")?);                         // new
//! assert_eq!(seen.contains("record-1")?, Lookup::Present);   // confirmed by the store
//! assert!(!seen.contains("record-2")?.is_present());         // absent, usually without I/O
//!
//! seen.save_snapshot(&snapshot)?;                            // bound to the store's history
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! [`MemoryStore`] is for tests and examples; with the `sqlite` feature, `SqliteStore` keeps
//! keys in an embedded SQLite database. Any database can be a [`PrimaryStore`].
//!
//! # Deletion
//!
//! [`FilteredStore::remove`] deletes a key from the store, then from the filter. With a
//! counting filter ([`FilterOptions::with_counting`]) the filter forgets the key; a plain
//! filter keeps its bits (a stale "maybe" that the store refutes), counts them in
//! [`Metrics::stale_removals`], and is rebuilt once its estimated false-positive rate passes
//! the target.
//!
//! ```
//! use bloom_store::{FilterOptions, FilteredStore, Lookup, MemoryStore};
//!
//! let options = FilterOptions::new(10_000, 0.01).with_counting(true);
//! let (seen, _) = FilteredStore::open_and_recover(MemoryStore::new(), options)?;
//! seen.insert("session-1")?;
//! assert!(seen.remove("session-1")?);                   // gone from the store, then the filter
//! assert!(!seen.remove("session-1")?);                  // nothing left to remove
//! assert!(!seen.contains("session-1")?.is_present());   // absent (by the filter, unless a
//!                                                       // false positive)
//! assert_eq!(seen.metrics().removals, 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! A counting filter is exact about removals across crashes and restarts: the store's
//! history records every removal as a change (with its own generation and a digest step), a
//! crash between the store's removal and the filter's leaves only a stale "maybe", and the
//! next open replays the removals made since the snapshot. It costs four times the bytes of a
//! plain filter for the same rate (4-bit counters, placed as the standard layout places bits:
//! about 38 bits per key at 1%).
//!
//! # Operations
//!
//! What the library guarantees, and what an operator has to do.
//!
//! **Guaranteed.** A committed key is never reported absent, whatever happens to the
//! snapshot file or to the database's history: a crash at any point, a power loss that rolls
//! back the newest commits, a database restored from a backup, deleted and recreated, or
//! copied to another machine, and a snapshot file that is stale, truncated, corrupt, of
//! another store, replaced by a named pipe, a directory or a link. Each of these makes the
//! snapshot untrusted (the [`BypassReason`] says which); lookups then go to the store until a
//! rebuild, and [`FilteredStore::open_and_recover`] rebuilds at once and writes a fresh
//! snapshot. A snapshot refused because of the store's history (another store, newer than the
//! store, another history) never becomes trusted later: it is bound to a history the store no
//! longer has. One refused for the options (rules, encoding, salt) is trusted again once the
//! options match it.
//!
//! **Backups and restores.** Back up the database as you normally would; the snapshot need
//! not be backed up (it is rebuilt from the database when it does not match). A SQLite
//! database is in WAL mode: while it is open, recent commits live in `keys.sqlite-wal`, so a
//! copy of `keys.sqlite` alone misses them. Back up a live database with SQLite's backup API
//! (`sqlite3 keys.sqlite ".backup copy.sqlite"`, rusqlite's `backup` module) or
//! `VACUUM INTO 'copy.sqlite'`, or copy the file only after every handle closed: closing a
//! [`SqliteStore`] checkpoints the log into the file and truncates it. After restoring
//! the database, start the application as usual: the snapshot no longer matches the
//! restored history and is replaced by a rebuild. Restoring a snapshot file together with the
//! database it was saved from is fine too: they match, and the snapshot is trusted.
//!
//! **Copying to another machine.** Copy the database, and the snapshot with it if you want to
//! skip the first rebuild. A copy keeps the store's identity; once the two copies receive
//! different writes, a snapshot of one is refused by the other.
//!
//! **Deleting the database.** A new database gets a new identity, so every old snapshot is
//! refused ([`BypassReason::OtherStore`]) and rebuilt over; nothing needs deleting by hand.
//!
//! **Writes behind the wrapper's back.** Every write must go through
//! [`FilteredStore::insert`] and [`FilteredStore::remove`]: a key written by another program
//! is not in the filter until the next save or rebuild takes it in. When the store sees such
//! writes (SQLite's watcher, PostgreSQL's claim when it checks the store again), the claim is
//! [`ClaimStatus::Behind`]: every lookup asks the store until that save or rebuild. Writes
//! made through the wrapper's own store handle (`wrapper.store().insert(..)`) or seen only
//! after the wrapper's next commit are not told apart from its own: they wait for the next
//! save as before. **One wrapper per
//! database**: a second `FilteredStore` over a store another one holds, in this process or
//! another, is refused with [`StoreError::InUse`] ([`PrimaryStore::claim_wrapper`]: for
//! SQLite an exclusive lock on `DATABASE-bloom.lock`, freed when the wrapper is dropped or
//! its process dies), since it would answer "absent" for the first one's keys. Processes
//! that share one database share one filter through `bloom-redis` instead (shared claims,
//! refused beside a `FilteredStore`).
//!
//! **The database replaced under a running process** (another file moved over it, deleted
//! and made again, a backup or a copy written over it, the lock removed; for PostgreSQL the
//! database dropped, renamed or restored into): the claim stops holding as the change
//! happens, the wrapper asks the store for every lookup, and once the store is found to be
//! another one (or its history to have gone back or another way) the wrapper is bypassed for
//! good ([`BypassReason::ClaimLost`], [`FilteredStore::claim_status`]) and the store's calls
//! fail: drop the wrapper and open the store again. Saved snapshots stay
//! correct regardless: a save first takes in every change committed since the filter last
//! caught up with the store (for a counting filter, exactly the changes it did not make
//! itself, removals included). A counting filter asked to remove a key it never counted (one
//! inserted behind its back since the last save) leaves the key's counts for that save,
//! which takes in the insert and the removal in order; counts that cannot explain a removal
//! at all bypass the filter ([`BypassReason::CountsDiverged`]) until a rebuild.
//!
//! **The key encoding** is recorded in the store at its first open; opening it with another
//! encoding is refused ([`OptionsError::EncodingMismatch`]), since its keys could not be
//! compared. SQLite databases also guard their change log: a row is never edited or deleted
//! (a removal only marks the insert it undoes), so an edit by hand fails instead of breaking
//! the history that snapshots are checked against; a row appended by hand is a write behind
//! the wrapper's back, and one that skips generations makes the store refuse to read its
//! history. A database of a newer schema is refused untouched; one of an earlier schema is
//! upgraded in place on its first open with write access (see `docs/sqlite-schema.md`).
//!
//! **Your own database.** `SqliteStore` lives beside an application's tables (everything it
//! makes is named `bloom_…`) and takes a connection the application opened
//! (`SqliteStore::from_connection`). To keep the truth in a table of your own instead,
//! implement [`PrimaryStore`] over it: the `own_table` example does it for a `users` table,
//! with the identity and the history digests kept in two small tables beside it, and
//! [`FilteredStore::insert_with`] for the application's own inserts.
//!
//! **Batches.** [`FilteredStore::insert_all`] and [`FilteredStore::contains_each`] take many
//! keys at once: one probe pass over the filter, and one store commit (one SQLite
//! transaction) or one store read for the batch, with the guarantees of single keys.
//!
//! **Disk and memory.** A snapshot is as large as the filter (about 1.2 bytes per key at 1%);
//! saving it streams the bits to a temporary file next to it (no copy in memory), and a
//! writer killed mid-save leaves a `.NAME.PID.N.tmp` file that the next save removes. A
//! rebuild holds two filters until it switches. `max_snapshot_bytes` bounds both the
//! snapshots read and the filters a growth rebuild makes
//! ([`Metrics::capacity_limited`] says when growth stopped there).
//!
//! **Capacity.** A filter planned for `capacity` keys at a rate records that plan in its
//! snapshots. [`Metrics`] says how it stands: [`Metrics::remaining_capacity`], and
//! [`Metrics::over_capacity`] once its estimated items pass the capacity or its predicted
//! false-positive rate passes [`Metrics::false_positive_rate_limit`] (the target plus the
//! estimate's noise, as `bloom inspect` judges the snapshot). Past its plan a filter still
//! never reports a committed key absent; it only sends more lookups to the store, until
//! [`FilteredStore::rebuild`] grows it.
//!
//! **Secrets.** A salted snapshot contains its salt: keep it as private as the salt. The
//! salt is never printed by `Debug`.

#![forbid(unsafe_code)]

mod claim;
pub mod coalesce;
mod confirm;
mod error;
mod filtered;
pub mod history;
mod kind;
mod load;
mod memory;
mod options;
mod outcome;
mod primary;
mod report;
#[cfg(feature = "sqlite")]
mod sqlite;
pub mod telemetry;

pub use bloom_format::{DatasetGeneration, HistoryDigest, StoreIdentity};
pub use claim::{ClaimKind, ClaimRefused, ClaimStatus, ClaimWatch, StoreClaim};
pub use coalesce::{Batched, Coalesced, CoalescedError};
pub use confirm::{Bits, LookupCounts, LookupTally, commit_absent, present_by_probe};
pub use error::StoreError;
pub use filtered::FilteredStore;
pub use history::{Change, ChangeKind, HistoryPoint, KeyGeneration, Removal};
pub use memory::{MemoryStore, MemoryStoreError};
pub use options::{FilterOptions, OptionsError, SaltPolicy};
pub use outcome::{
    BypassReason, Incompatibility, Lookup, Metrics, Mode, OpenOutcome, RebuildReport,
    SnapshotRefresh,
};
pub use primary::PrimaryStore;
#[cfg(feature = "sqlite")]
pub use sqlite::{LegacyKeys, SqliteStore, SqliteStoreError};
