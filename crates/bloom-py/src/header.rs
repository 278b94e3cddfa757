//! A snapshot header's values as a Python `dict`: what `inspect`, `verify` and
//! `BloomFilter.info` return.

use bloom_ffi::HeaderInfo;
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// A header as a `dict`.
pub(crate) fn header_dict<'py>(py: Python<'py>, info: &HeaderInfo) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    dict.set_item("format_version", info.format_version)?;
    dict.set_item("kind", info.kind)?;
    dict.set_item("bits", info.bits)?;
    dict.set_item("hashes", info.hashes)?;
    dict.set_item("rule", info.rule)?;
    dict.set_item("layout", info.layout)?;
    dict.set_item("encoding", info.encoding)?;
    dict.set_item("salted", info.salted)?;
    dict.set_item("dataset_generation", info.dataset_generation)?;
    dict.set_item("items", info.items)?;
    dict.set_item("payload_len", info.payload_len)?;
    dict.set_item("store_bound", info.store_bound)?;
    dict.set_item("plan_capacity", info.plan.map(|p| p.0))?;
    dict.set_item("plan_false_positive_rate", info.plan.map(|p| p.1))?;
    Ok(dict)
}
