//! `bloom.BloomFilter`: a filter (plain, counting or scalable) behind a read-write lock, so
//! that threads share it safely; the many-key forms and all file work release the GIL.

use std::path::PathBuf;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use bloom_core::{AnyFilter, Filter, KeyError};
use bloom_ffi::{Error, ErrorKind, FilterOptions};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::errors::{py_err, to_py};
use crate::keys::{self, Batch, OneKey};

/// A Bloom filter. See the module's documentation and `bloom.pyi`.
#[pyclass(frozen, module = "bloom", name = "BloomFilter")]
pub(crate) struct PyBloomFilter {
    filter: RwLock<AnyFilter>,
    /// The dataset generation it was loaded with (0 for a new filter).
    generation: u64,
}

impl PyBloomFilter {
    pub(crate) fn new(filter: AnyFilter, generation: u64) -> Self {
        Self {
            filter: RwLock::new(filter),
            generation,
        }
    }

    fn read(&self) -> PyResult<RwLockReadGuard<'_, AnyFilter>> {
        self.filter.read().map_err(|_| poisoned())
    }

    fn write(&self) -> PyResult<RwLockWriteGuard<'_, AnyFilter>> {
        self.filter.write().map_err(|_| poisoned())
    }
}

/// A lock left by a panic: the filter may be half-changed.
fn poisoned() -> PyErr {
    to_py(&Error::new(
        ErrorKind::Internal,
        "the filter was left half-changed by an internal error; load or build it again",
    ))
}

/// A refused key's exception, naming its position among the keys given.
fn refused(e: KeyError, index: Option<usize>) -> PyErr {
    let error = Error::from(e);
    to_py(&match index {
        Some(i) => error.context(format!("key {i}")),
        None => error,
    })
}

/// The index of the first byte key a text encoding refuses.
fn first_refused(filter: &AnyFilter, keys: &[&[u8]]) -> Option<usize> {
    let encoding = filter.config().encoding();
    keys.iter().position(|k| encoding.encode_bytes(k).is_err())
}

/// Inserts a chunk; how many keys changed the filter.
fn insert_batch(filter: &mut AnyFilter, batch: &Batch<'_>, offset: usize) -> PyResult<u64> {
    match batch {
        Batch::Text(keys) => Ok(filter.insert_all(keys.iter().copied())),
        Batch::Bytes(keys) => filter.insert_all(keys.iter().copied()).map_err(|e| {
            let at = first_refused(filter, keys).map(|i| i + offset);
            refused(e, at)
        }),
        Batch::Mixed(keys) => {
            let mut added = 0;
            for (i, key) in keys.iter().enumerate() {
                added += u64::from(match *key {
                    OneKey::Text(t) => filter.insert(t),
                    OneKey::Bytes(b) => {
                        filter.insert(b).map_err(|e| refused(e, Some(i + offset)))?
                    }
                });
            }
            Ok(added)
        }
    }
}

/// Answers a chunk, appending to `out`.
fn contains_batch(
    filter: &AnyFilter,
    batch: &Batch<'_>,
    offset: usize,
    out: &mut Vec<bool>,
) -> PyResult<()> {
    match batch {
        Batch::Text(keys) => out.extend(filter.contains_each(keys.iter().copied())),
        Batch::Bytes(keys) => {
            for (i, answer) in filter.contains_each(keys.iter().copied()).enumerate() {
                out.push(answer.map_err(|e| refused(e, Some(i + offset)))?);
            }
        }
        Batch::Mixed(keys) => {
            for (i, key) in keys.iter().enumerate() {
                out.push(match *key {
                    OneKey::Text(t) => filter.contains(t),
                    OneKey::Bytes(b) => filter
                        .contains(b)
                        .map_err(|e| refused(e, Some(i + offset)))?,
                });
            }
        }
    }
    Ok(())
}

#[pymethods]
impl PyBloomFilter {
    /// A new, empty filter planned for `expected_items` keys at `false_positive_rate`,
    /// with the builder's options; planned as `bloom build` plans it.
    #[new]
    #[pyo3(signature = (
        expected_items,
        false_positive_rate = 0.01,
        *,
        kind = "plain",
        rule = None,
        layout = None,
        encoding = "nfc",
        salt = None,
    ))]
    fn py_new(
        expected_items: u64,
        false_positive_rate: f64,
        kind: &str,
        rule: Option<&str>,
        layout: Option<&str>,
        encoding: &str,
        salt: Option<&[u8]>,
    ) -> PyResult<Self> {
        let mut options = FilterOptions::new(expected_items, false_positive_rate);
        options.kind = kind.parse().map_err(py_err)?;
        if let Some(rule) = rule {
            options.rule_named(rule).map_err(py_err)?;
        }
        if let Some(layout) = layout {
            options.layout_named(layout).map_err(py_err)?;
        }
        options.encoding_named(encoding).map_err(py_err)?;
        options
            .salt_bytes(salt.unwrap_or_default())
            .map_err(py_err)?;
        Ok(Self::new(bloom_ffi::create(&options).map_err(py_err)?, 0))
    }

    /// Inserts a key (`str` or `bytes`); whether it changed the filter (`False`: it may
    /// have been there already).
    fn insert(&self, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        let mut filter = self.write()?;
        match keys::one(key)? {
            OneKey::Text(t) => Ok(filter.insert(t)),
            OneKey::Bytes(b) => filter.insert(b).map_err(|e| refused(e, None)),
        }
    }

    /// Whether a key may have been inserted: `False` is definite, `True` means "maybe".
    fn contains(&self, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        let filter = self.read()?;
        match keys::one(key)? {
            OneKey::Text(t) => Ok(filter.contains(t)),
            OneKey::Bytes(b) => filter.contains(b).map_err(|e| refused(e, None)),
        }
    }

    fn __contains__(&self, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        self.contains(key)
    }

    /// Inserts every key of an iterable; how many changed the filter. The GIL is released
    /// while keys are hashed, a chunk at a time.
    fn insert_all(&self, py: Python<'_>, keys: &Bound<'_, PyAny>) -> PyResult<u64> {
        let mut added = 0u64;
        let mut offset = 0usize;
        keys::for_each_chunk(keys, |chunk| {
            let batch = Batch::of(chunk)?;
            added += py.detach(|| {
                let mut filter = self.write()?;
                insert_batch(&mut filter, &batch, offset)
            })?;
            offset += batch.len();
            Ok(())
        })?;
        Ok(added)
    }

    /// Whether each key of an iterable may have been inserted, in order. The GIL is
    /// released while keys are hashed, a chunk at a time.
    fn contains_all(&self, py: Python<'_>, keys: &Bound<'_, PyAny>) -> PyResult<Vec<bool>> {
        let mut answers = Vec::new();
        let mut offset = 0usize;
        keys::for_each_chunk(keys, |chunk| {
            let batch = Batch::of(chunk)?;
            py.detach(|| {
                let filter = self.read()?;
                contains_batch(&filter, &batch, offset, &mut answers)
            })?;
            offset += batch.len();
            Ok(())
        })?;
        Ok(answers)
    }

    /// Writes a snapshot to `path` atomically, recording `generation` (the generation of the
    /// primary store these bits fully cover; 0 for none).
    #[pyo3(signature = (path, generation = 0))]
    fn save(&self, py: Python<'_>, path: PathBuf, generation: u64) -> PyResult<()> {
        py.detach(|| {
            let filter = self.read()?;
            bloom_ffi::save(&filter, generation, &path).map_err(py_err)
        })
    }

    /// The snapshot as `bytes`, recording `generation`.
    #[pyo3(signature = (generation = 0))]
    fn to_bytes<'py>(&self, py: Python<'py>, generation: u64) -> PyResult<Bound<'py, PyBytes>> {
        let bytes = py.detach(|| {
            let filter = self.read()?;
            bloom_ffi::to_bytes(&filter, generation).map_err(py_err)
        })?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// The Guava stream of a filter of Guava's rules, which the JVM's
    /// `BloomFilter.readFrom` reads.
    fn to_guava<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let bytes = {
            let filter = self.read()?;
            bloom_ffi::to_guava(&filter).map_err(py_err)?
        };
        Ok(PyBytes::new(py, &bytes))
    }

    /// `"plain"`, `"counting"` or `"scalable"`.
    #[getter]
    fn kind(&self) -> PyResult<&'static str> {
        Ok(self.read()?.kind())
    }

    /// The dataset generation the filter was loaded with (0 for a new filter).
    #[getter]
    fn generation(&self) -> u64 {
        self.generation
    }

    /// What a snapshot of the filter would record, and its estimates: a `dict`.
    fn info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let filter = self.read()?;
        let dict = crate::header::header_dict(
            py,
            &bloom_ffi::HeaderInfo::of_filter(&filter, self.generation),
        )?;
        dict.set_item("items_inserted", filter.items_inserted())?;
        dict.set_item("fill_ratio", filter.fill_ratio())?;
        dict.set_item("estimated_items", filter.estimated_items())?;
        dict.set_item(
            "estimated_false_positive_rate",
            filter.estimated_false_positive_rate(),
        )?;
        dict.set_item("remaining_capacity", filter.remaining_capacity())?;
        dict.set_item("is_over_capacity", filter.is_over_capacity())?;
        Ok(dict)
    }

    fn __repr__(&self) -> PyResult<String> {
        let filter = self.read()?;
        let config = filter.config();
        Ok(format!(
            "<bloom.BloomFilter {} m={} k={} rule={} encoding={} items={}>",
            filter.kind(),
            filter.positions(),
            config.hashes(),
            config.rule(),
            config.encoding(),
            filter.items_inserted()
        ))
    }
}
