//! Check-then-confirm membership over a primary store.
//!
//! The primary store holds the truth; the Bloom filter only saves store lookups. A
//! [`FilteredStore`] answers "absent" from the filter alone only while the filter is trusted,
//! confirms every "maybe" in the store, and bypasses a filter that is missing, corrupt, stale,
//! incompatible or being rebuilt. A filter failure may slow lookups; it never loses a record:
//! **a key committed to the primary store is never reported absent.**
//!
//! ```
//! use bloom_store::{FilterOptions, FilteredStore, Lookup, MemoryStore, OpenOutcome};
//!
//! let dir = tempfile::tempdir()?;
//! let snapshot = dir.path().join("seen.bloom");
//! let (seen, outcome) =
//!     FilteredStore::open_and_recover(MemoryStore::new(), FilterOptions::new(10_000, 0.01), Some(&snapshot))?;
//! assert!(matches!(outcome, OpenOutcome::NeedsRebuild(_))); // no snapshot yet: rebuilt
//!
//! assert!(seen.insert("record-1")?);                         // new
//! assert_eq!(seen.contains("record-1")?, Lookup::Present);   // confirmed by the store
//! assert!(!seen.contains("record-2")?.is_present());         // absent, usually without I/O
//!
//! seen.save_snapshot(&snapshot)?;                            // records the store generation
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! [`MemoryStore`] is for tests and examples; with the `sqlite` feature, `SqliteStore` keeps
//! keys in an embedded SQLite database.

#![forbid(unsafe_code)]

mod filtered;
mod primary;
#[cfg(feature = "sqlite")]
mod sqlite;

pub use filtered::{
    BypassReason, FilterOptions, FilteredStore, Lookup, Metrics, Mode, OpenOutcome, RebuildReport,
    SaltPolicy, StoreError,
};
pub use primary::{MemoryStore, MemoryStoreError, PrimaryStore};
#[cfg(feature = "sqlite")]
pub use sqlite::SqliteStore;
