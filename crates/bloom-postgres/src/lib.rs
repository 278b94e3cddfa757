//! A primary store on PostgreSQL: the database a fleet of machines shares, under
//! `bloom_store::FilteredStore` (one process) or `bloom_redis::SharedFilteredStore` (a fleet
//! sharing one filter in Redis).
//!
//! ```
//! use bloom_postgres::PostgresStore;
//! use bloom_store::{FilterOptions, FilteredStore, Lookup, PrimaryStore};
//!
//! # let server = bloom_postgres::testing::TempServer::start_with(&[("fsync", "off")])?;
//! # let params = server.params("postgres");
//! // params: "host=127.0.0.1 port=5432 user=app dbname=app" or a postgresql:// URL.
//! let store = PostgresStore::connect(&params)?;        // tables in the schema `bloom`
//! let (seen, _) = FilteredStore::open_and_recover(&store, FilterOptions::new(10_000, 0.01))?;
//! assert!(seen.insert("record-1")?);                    // committed, generation 1
//! assert_eq!(seen.contains("record-1")?, Lookup::Present);
//! assert!(!seen.contains("record-2")?.is_present());    // absent, usually without a query
//! assert_eq!(store.head()?.generation.get(), 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # What it keeps
//!
//! The semantics of `SqliteStore`, in one PostgreSQL schema of its own (`bloom` by default,
//! [`PostgresStore::connect_in`] for another), so it lives in an application's existing
//! database beside its tables; `docs/postgres-schema.md` documents every table:
//!
//! - a random **store identity**, written in the transaction that creates the tables: a
//!   database dropped and recreated gets a new one, a restored backup keeps its own;
//! - a **change log** whose `seq` is the generation (1, 2, 3, … without gaps), with the
//!   **history digest** of every generation on its row, and removals as changes of their
//!   own (what a counting filter's catch-up replays);
//! - **guards** (triggers, enabled `ALWAYS` so that they fire under
//!   `session_replication_role = replica` too) that refuse edits and deletions of the log
//!   and of the metadata, truncations, moves of the head by hand, and appends that do not
//!   extend the head;
//! - **checks at every open**: each table's columns (types, `NOT NULL`, defaults),
//!   constraints, indexes, triggers (their events, `WHEN`, functions and schema), rules, row
//!   security and inheritance, and each guard function's body and settings, are exactly
//!   this build's; then the whole log is replayed against the digest chain
//!   ([`PostgresStore::verify_history`]; [`Settings::verify_history`] turns it off), which
//!   catches rows rewritten by DDL or edited with the guards off. A store that fails is
//!   refused with [`PostgresStoreError::Damaged`];
//! - **the same store on every call**: every statement returns the identity of the store it
//!   ran on, so a store replaced under a running process (its database dropped and made
//!   again, its schema replaced by another store's) fails with
//!   [`PostgresStoreError::Replaced`] instead of being answered for or written with this
//!   store's history;
//! - a **versioned schema** ([`PostgresStore::SCHEMA_VERSION`], in `store_meta`): a store of
//!   a newer version is refused untouched, and a PostgreSQL schema that holds someone
//!   else's tables is never written to.
//!
//! # Many writers, on many machines
//!
//! The digest chain needs one order of appends. Every writing transaction (READ COMMITTED)
//! first takes the single row of `head` — the newest generation and its digest —
//! `FOR UPDATE`, and holds it until it commits: writers on every machine queue on that one
//! row lock, each extends exactly the head the one before it committed, and a statement-level
//! trigger moves the head to the newest appended row (refusing rows that do not follow it).
//! Why this lock rather than the alternatives:
//!
//! - **Gapless by construction.** A sequence hands out numbers outside the transaction, so
//!   a rolled-back or killed writer leaves a gap, and the chain would need a second
//!   serializing step anyway to know the digest before it.
//! - **The lock is the data.** The row that orders writers also holds what each writer needs
//!   first (the previous digest), read in the same step: no separate `MAX(seq)` query, no
//!   window between the lock and the read.
//! - **Failure frees it.** A row lock belongs to a transaction: a writer killed mid-batch,
//!   or a connection cut, is rolled back by the server and the next writer proceeds. A
//!   writer stopped inside its transaction (a paused process) loses it after
//!   [`Settings::idle_in_transaction_timeout`] (30 s), and a waiting writer gives up after
//!   [`Settings::lock_timeout`] (60 s) instead of hanging. A transaction-level advisory lock
//!   frees itself as well, but lives in a namespace shared with every application in the
//!   database (and must be taken with the right keys by every writer, including one by
//!   hand); the row lock is taken by anything that appends through the trigger.
//! - **The cost is one commit at a time.** Appends are serialized, including each commit's
//!   flush of the write-ahead log, so commits per second are bounded by the log's flush
//!   time, whatever the number of writers. Batches ([`PrimaryStore::insert_all`]) are the
//!   answer: one transaction and one flush for up to thousands of keys (the benchmarks in
//!   `benches/postgres_ratio.rs` measure both).
//!
//! Keys of up to 2,000 bytes are indexed as they are (the unique partial index `keys`),
//! longer ones by their SHA-256 (`long_keys`), so a key of any length fits. A batch is
//! appended in one statement that takes its keys for new (`ON CONFLICT DO NOTHING`): a key
//! already there before a new one leaves a gap, which the guard refuses (SQLSTATE
//! `BL001`), and the batch is written again after one query for the keys already there,
//! under the same lock.
//!
//! # One `FilteredStore` per store, and the store under it
//!
//! [`PrimaryStore::claim_wrapper`] takes a session-level advisory lock on a connection of its
//! own, held while the claim is: exclusive for a `FilteredStore` (a second one over the same
//! store, on any machine, is refused with `StoreError::InUse`), shared for the wrappers of a
//! filter shared through `bloom_redis::SharedFilteredStore` (any number of them, and no
//! `FilteredStore` beside them).
//!
//! The same connection holds the store's tables (`ACCESS SHARE`, in a transaction left open),
//! and a thread waits on its socket, so that the store cannot be replaced under a running
//! wrapper without the claim knowing first:
//!
//! - its session ended (the database dropped `WITH (FORCE)`, or renamed after its sessions
//!   were ended, a server restart): the claim is unconfirmed at once (the wrapper asks the
//!   store for every lookup) until the lock and the tables are taken again on a new session
//!   (at once when the store makes a new connection after a restart);
//! - someone waits for the tables (`DROP SCHEMA`, `pg_restore --clean`, `TRUNCATE`, `ALTER
//!   TABLE`, `VACUUM FULL`), or the store's names lead to other tables (a schema renamed
//!   away and another renamed into its place, which takes no lock: seen within 0.2 s): the
//!   claim turns unconfirmed first, lets the tables go (within 0.2 s), and takes them again
//!   by name once the change is done;
//! - each time, the store is checked under the tables: the same identity, and a history that
//!   still has the newest point this process saw. Otherwise the claim is lost for good, the
//!   wrapper bypasses its filter for good, and the store fails with
//!   [`PostgresStoreError::Replaced`], saying what was found; a lock another wrapper took
//!   meanwhile loses it too, and every call fails with [`PostgresStoreError::ClaimLost`].
//!   For an exclusive claim, history past the newest point seen is writes that did not pass
//!   through the wrapper: the claim is [`bloom_store::ClaimStatus::Behind`], and the wrapper
//!   asks the store for every lookup until a save or a rebuild takes them in.

//! # Connections
//!
//! The store keeps a bounded pool of connections ([`Settings::max_connections`], 10 by
//! default, plus one for a wrapper's claim): a caller that finds every connection in use
//! waits for one, up to [`Settings::pool_timeout`] (30 s), then fails with
//! [`PostgresStoreError::PoolExhausted`]; a server at its own limit refuses with
//! [`PostgresStoreError::ServerFull`]; neither is reported unreachable. The pool reconnects
//! after a server restart; an error is returned, never retried behind the
//! caller's back, so a write either committed or is reported failed (a connection lost
//! during `COMMIT` is reported failed, and the key may be there: inserting it again is
//! harmless; a call that fails on an idle connection found dead before it began to write is
//! run again once on a new one). Every session pins `search_path` to the catalog.
//! Connections go to the primary only (`target_session_attrs=read-write`: a
//! standby would answer from a past state). A port that does not answer as PostgreSQL does
//! within the connect timeout fails the connection ([`PostgresStoreError::Unreachable`])
//! instead of hanging; a host that stops acknowledging fails a call after
//! `tcp_user_timeout` (30 s). A server process that is stopped (`SIGSTOP`) while its host
//! still acknowledges holds a call until it resumes, as with libpq. TLS is not offered:
//! connect over loopback, a private network or a local proxy. Passwords given in the
//! parameters are never part of an error or of `Debug`.

//! # From async code
//!
//! Every call, the connection and the drop work inside a tokio runtime (current-thread or
//! multi-thread) as they do outside: the `postgres` client runs a runtime of its own, which
//! tokio will not start inside another, so there such a call runs on a thread of its own.
//! It still blocks the task that makes it. From a service, put the wrapper behind
//! `bloom_store::Coalesced`: its calls are `async`, callers' single keys are gathered into
//! batches (one transaction for many callers), and the store is used from plain threads.
//!
//! # Tests and examples
//!
//! With the feature `testing`, [`testing::TempServer`] starts a throwaway PostgreSQL (Debian's
//! `initdb` and `postgres`) in a temporary directory, on 127.0.0.1 and a random port.

#![forbid(unsafe_code)]

mod claim;
mod connect;
mod error;
mod guard;
mod pool;
mod primary;
mod runtime;
mod schema;
mod statements;
mod store;
#[cfg(feature = "testing")]
pub mod testing;
mod values;

pub use error::PostgresStoreError;
pub use store::{DEFAULT_NAMESPACE, PostgresStore, Settings};

/// The client crate, for building a [`postgres::Config`] by hand.
pub use postgres;

#[cfg(doc)]
use bloom_store::PrimaryStore;
