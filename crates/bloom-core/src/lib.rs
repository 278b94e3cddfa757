//! The bit math of bloom: Bloom filters whose answers are the same in every process, on every
//! machine and in every release.
//!
//! - [`FilterParams`] plans `m` (bits) and `k` (positions per key) from an item count and a
//!   false-positive rate, from bits per key, or takes them explicitly.
//! - [`KeyEncoding`] turns a key into a defined byte string (raw bytes, UTF-8, NFC, or NFC
//!   trimmed and lowercased), applied inside the library so callers cannot forget it.
//! - [`PositionRule`] turns those bytes into positions with a hash defined byte for byte
//!   (XXH3-64 or XXH3-128 where speed matters, the defaults; SHA-256 where keys may come
//!   from an adversary; XXH64 as Apache Parquet), never with `std::hash` or per-process
//!   random state. A secret [`Salt`] with
//!   [`PositionRule::Sha256Double`] makes positions unpredictable to an adversary.
//!   [`PositionRule::GuavaMitz64`] and [`PositionRule::GuavaMitz32`] answer exactly as
//!   Guava's `BloomFilter` does ([`FilterParams::for_guava`] sizes as Guava sizes).
//! - [`Layout`] places the positions: [`Layout::Standard`] spreads them over all `m` bits,
//!   [`Layout::Blocked512`] keeps a key's positions in one 64-byte cache line (one cache miss
//!   per probe, about 3 % more bits for the same rate at 1 %), and the split-block layouts
//!   set one bit in each of eight words of one block: [`Layout::SplitBlock256`] is Apache
//!   Parquet's filter bit for bit, [`Layout::SplitBlock512`] (one cache line, about 5 % more
//!   bits at 1 %) the fastest layout, and the default where it costs at most 10 % more bits
//!   than the standard one ([`default_rule_and_layout`]). [`FilterParams::planned`] plans
//!   with the layout's own false-positive formula.
//! - [`BloomFilter`] inserts, queries, combines and estimates; [`AtomicBloomFilter`] does the
//!   same through `&self` from many threads with no lost bits. Both take many keys at once
//!   (`insert_all`, `contains_each`) a batch at a time, which is faster per key than a loop
//!   of single calls and gives exactly the same answers.
//! - [`CountingBloomFilter`] keeps a 4-bit counter per position instead of a bit, so that
//!   keys can be removed (four times the space of a plain filter at the same rate), and
//!   projects to a plain [`BloomFilter`] for sharing.
//! - [`ScalableBloomFilter`] grows, a chain of stages whose compound rate stays under its
//!   target.
//! - [`Filter`] is what all four answer alike: configuration, estimates, the capacity
//!   verdict, snapshots. Import it with the filter type (`use bloom_core::{BloomFilter,
//!   Filter};`).
//!
//! `contains` returning `false` is definite. `true` only means *maybe*: confirm it in the
//! primary store (that is what `bloom-store` does) before treating a record as seen.
//!
//! ```
//! use bloom_core::{BloomFilter, Filter, FilterConfig, KeyEncoding, Layout, PositionRule};
//!
//! // The defaults at 1 %: the split-block-512 layout, xxh3-64 positions, NFC keys.
//! let config = FilterConfig::planned(10_000, 0.01)?;
//! assert_eq!(config.params().layout(), Layout::SplitBlock512);
//! assert_eq!(config.rule(), PositionRule::Xxh3_64);
//! assert_eq!(config.encoding(), KeyEncoding::Nfc);
//! let mut seen = BloomFilter::new(config)?;
//!
//! assert!(seen.insert("café"));          // new: some bit changed
//! assert!(!seen.insert("café"));         // again: nothing changed
//! assert!(seen.contains("cafe\u{301}")); // the NFD spelling is the same key under NFC
//! println!("estimated items: {:.1}", seen.estimated_items());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Snapshots: [`Filter::to_snapshot`] builds a `bloom_format::Snapshot` carrying every
//! parameter needed to answer identically elsewhere (or [`Filter::header`] and
//! [`Filter::for_each_payload_chunk`] stream one to a file); [`Filter::from_snapshot`] and
//! [`Filter::from_payload`] refuse any snapshot whose rules this build does not implement. This crate does no file or network
//! I/O; files are the business of `bloom-format` and `bloom-store`.

// No unsafe code but, each with its proof beside it: the calls of a plain filter's kernel
// functions compiled for AVX2, which a `Kernel` names only after the CPU was found to have it
// (`kernel/mod.rs`, `kernel/probes.rs`); the word array seen from its aligned first word
// (`bits/aligned.rs`); and the split-block kernels' block, found below the number of blocks
// (`position/split.rs`).
#![deny(unsafe_code)]

mod any;
mod atomic;
mod batch;
mod bits;
mod builder;
mod capacity;
mod config;
mod counting;
mod defaults;
mod encoding;
pub mod estimate;
mod filter;
mod kernel;
mod key;
mod layout;
mod lookup;
mod observed;
mod params;
mod plain;
mod position;
mod probe;
mod rates;
mod scalable;
mod shared_methods;
mod snapshot;

pub use any::{AnyContainsEach, AnyFilter};
pub use atomic::AtomicBloomFilter;
pub use batch::ContainsEach;
pub use bits::{AllocError, BitsError};
pub use bloom_format::{DatasetGeneration, Plan, UnicodeVersion};
/// What reading a filter from a snapshot names ([`Filter::read_file`],
/// [`Filter::read_snapshot`]), so that a crate can read one with bloom-core alone.
pub use bloom_format::{DecodeError, DecodeOptions, ReadError, SnapshotReader};
pub use builder::{BuildError, DEFAULT_FALSE_POSITIVE_RATE, FilterBuilder};
pub use capacity::{CHANCE_SIGMAS, Capacity};
pub use config::{
    ConfigError, CountingError, FilterConfig, IncompatibleFilters, KeyPlacer, Mismatch,
};
pub use counting::{COUNTER_MAX, CountingBloomFilter, RemoveError};
pub use defaults::{DEFAULT_LAYOUT_OVERHEAD, default_rule_and_layout};
pub use encoding::{EncodedKey, KeyEncoding, KeyError, UnicodeTables, UnknownNameError};
pub use filter::Filter;
pub use key::Key;
pub use layout::{BLOCK_BITS, Layout, MAX_SHARDS, SPLIT_BLOCK_HASHES};
pub use observed::{DRIFT_LOG_CHANCE, MIN_DRIFT_COUNT, ObservedRate};
pub use params::{FilterParams, MAX_BITS, MAX_HASHES, ParamsError};
pub use plain::BloomFilter;
pub use position::{PositionRule, Positions, RandomSaltError, Salt, SaltTooLong};
pub use scalable::{
    DEFAULT_GROWTH, DEFAULT_TIGHTENING, GrowthStop, ScalableBloomFilter, ScalableBuilder,
    ScalableError,
};
pub use snapshot::{ReadSnapshotError, SnapshotError};
