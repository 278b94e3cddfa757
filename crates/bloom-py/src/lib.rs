//! The Python package `bloom` (built with maturin: `pip install ./crates/bloom-py`):
//! Bloom filters whose snapshots are verified before they are trusted, and which answer
//! every key exactly as the Rust reader (and the CLI, and the C ABI) does.
//!
//! The package is a thin front end: planning, keys, snapshots and error kinds are
//! bloom-ffi's, shared with the C ABI. Its API is in `bloom.pyi`; its tests are pytest's
//! (`tests/`, run by `cargo xtask test`).

mod errors;
mod filter;
mod header;
mod keys;
mod packed;
mod snapshots;
mod text;

use pyo3::prelude::*;

// The module needs the GIL (`gil_used`): a free-threaded Python turns it back on when the
// module is imported. Lists are read a chunk at a time under it, and `text.rs` reads a
// `str`'s state in place, which free-threaded 3.13 writes without atomics when it interns.
/// Bloom filters that are safe to persist and safe to trust.
#[pymodule(gil_used = true)]
fn bloom(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<filter::PyBloomFilter>()?;
    m.add_function(wrap_pyfunction!(snapshots::load, m)?)?;
    m.add_function(wrap_pyfunction!(snapshots::loads, m)?)?;
    m.add_function(wrap_pyfunction!(snapshots::inspect, m)?)?;
    m.add_function(wrap_pyfunction!(snapshots::verify, m)?)?;
    m.add_function(wrap_pyfunction!(snapshots::from_guava, m)?)?;
    m.add_function(wrap_pyfunction!(snapshots::from_parquet, m)?)?;
    m.add_function(wrap_pyfunction!(snapshots::from_parquet_blob, m)?)?;
    m.add("DEFAULT_MAX_BYTES", bloom_ffi::DEFAULT_MAX_PAYLOAD_BYTES)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    errors::register(m)
}
