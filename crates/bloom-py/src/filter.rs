//! `bloom.BloomFilter`: bloom-ffi's `Handle` (a filter, and the header it was loaded with)
//! behind a read-write lock, so that threads share it safely. The many-key forms and all file
//! work release the GIL; nothing done without the GIL touches Python, so a thread waiting
//! for the lock while holding the GIL can never deadlock with one holding the lock.

use std::path::PathBuf;
use std::sync::{RwLock, TryLockError};

use bloom_ffi::{Error, ErrorKind, FilterOptions, Handle};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyTuple};

use crate::errors::{py_err, to_py};
use crate::keys::{self, Batch, OneKey};
use crate::packed::{self, Offsets};

/// A Bloom filter. See the module's documentation and `bloom.pyi`.
#[pyclass(frozen, module = "bloom", name = "BloomFilter")]
pub(crate) struct PyBloomFilter {
    handle: RwLock<Handle>,
}

/// A lock left by a panic: the filter may be half-changed.
fn poisoned() -> Error {
    Error::new(
        ErrorKind::Internal,
        "the filter was left half-changed by an internal error; load or build it again",
    )
}

impl PyBloomFilter {
    pub(crate) fn new(handle: Handle) -> Self {
        Self {
            handle: RwLock::new(handle),
        }
    }

    /// Runs `f` on the handle under the read lock: at once when it is free, else waiting
    /// with the GIL released.
    fn with_read<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&Handle) -> Result<T, Error> + Send,
    ) -> PyResult<T> {
        let result = match self.handle.try_read() {
            Ok(handle) => f(&handle),
            Err(TryLockError::WouldBlock) => py.detach(|| {
                self.handle
                    .read()
                    .map_err(|_| poisoned())
                    .and_then(|h| f(&h))
            }),
            Err(TryLockError::Poisoned(_)) => Err(poisoned()),
        };
        result.map_err(py_err(py))
    }

    /// Runs `f` on the handle under the write lock, as [`PyBloomFilter::with_read`].
    fn with_write<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut Handle) -> Result<T, Error> + Send,
    ) -> PyResult<T> {
        let result = match self.handle.try_write() {
            Ok(mut handle) => f(&mut handle),
            Err(TryLockError::WouldBlock) => py.detach(|| {
                self.handle
                    .write()
                    .map_err(|_| poisoned())
                    .and_then(|mut h| f(&mut h))
            }),
            Err(TryLockError::Poisoned(_)) => Err(poisoned()),
        };
        result.map_err(py_err(py))
    }
}

/// Inserts a chunk; how many keys changed the filter. Errors name the key's index in the
/// chunk.
fn insert_batch(handle: &mut Handle, batch: &Batch<'_>) -> Result<u64, Error> {
    match batch {
        Batch::Text(keys) => handle.insert_all(keys.iter().copied()),
        Batch::Copied(keys) => handle.insert_all(keys.keys()),
        Batch::Bytes(keys) => handle.insert_all(keys.iter().copied()),
        Batch::Packed(data, ends) => handle.insert_all(packed::slices(data, ends)),
        Batch::Mixed(keys) => {
            let mut added = 0;
            for (i, key) in keys.iter().enumerate() {
                let changed = match *key {
                    OneKey::Text(t) => handle.insert(t),
                    OneKey::Bytes(b) => handle.insert(b),
                };
                added += u64::from(changed.map_err(|e| e.at_key(i))?);
            }
            Ok(added)
        }
    }
}

/// Answers a chunk, appending to `out`. Errors name the key's index in the chunk.
fn contains_batch(handle: &Handle, batch: &Batch<'_>, out: &mut Vec<bool>) -> Result<(), Error> {
    match batch {
        Batch::Text(keys) => handle.contains_each(keys.iter().copied(), |m| out.push(m)),
        Batch::Copied(keys) => handle.contains_each(keys.keys(), |m| out.push(m)),
        Batch::Bytes(keys) => handle.contains_each(keys.iter().copied(), |m| out.push(m)),
        Batch::Packed(data, ends) => {
            handle.contains_each(packed::slices(data, ends), |m| out.push(m))
        }
        Batch::Mixed(keys) => {
            for (i, key) in keys.iter().enumerate() {
                let maybe = match *key {
                    OneKey::Text(t) => handle.contains(t),
                    OneKey::Bytes(b) => handle.contains(b),
                };
                out.push(maybe.map_err(|e| e.at_key(i))?);
            }
            Ok(())
        }
    }
}

/// Runs `each` (with the GIL released) on every chunk of `keys`; a key refused in a chunk
/// stops the call after the keys before it were handled, and its error names its index
/// among all the keys. `each`'s own errors name the index in the chunk: they are shifted.
fn for_each_batch(
    py: Python<'_>,
    keys: &Bound<'_, PyAny>,
    mut each: impl FnMut(&Batch<'_>) -> Result<(), Error> + Send,
) -> PyResult<()> {
    keys::many(keys)?;
    let mut offset = 0usize;
    keys::for_each_chunk(keys, |chunk| {
        let (batch, refused) = chunk.batch();
        run(py, &batch, offset, &mut each)?;
        if let Some((i, e)) = refused {
            return Err(keys::at_index(py, e, offset + i));
        }
        offset += chunk.len();
        Ok(())
    })
}

/// Runs `each` on `batch` with the GIL released; its errors' key indexes are moved by
/// `offset`, the batch's first key's index among all the keys.
fn run(
    py: Python<'_>,
    batch: &Batch<'_>,
    offset: usize,
    each: &mut (impl FnMut(&Batch<'_>) -> Result<(), Error> + Send),
) -> PyResult<()> {
    py.detach(|| each(batch))
        .map_err(|e| to_py(py, &e.shifted(offset)))
}

/// The keys packed in `data` and cut by `offsets` (`packed.rs`), checked with the GIL held:
/// `data` is `bytes`, which nothing can change, and the offsets are copied, so the keys can
/// be taken with the GIL released in one go.
fn packed<'a>(
    data: &'a Bound<'_, PyAny>,
    offsets: &Bound<'_, PyAny>,
) -> PyResult<(&'a [u8], Offsets)> {
    let data = data.cast::<PyBytes>().map_err(|_| {
        pyo3::exceptions::PyTypeError::new_err(format!(
            "data is bytes, which nothing can change while the GIL is released, not {} (pass bytes(data))",
            data.get_type()
                .name()
                .map_or_else(|_| "this".to_owned(), |name| name.to_string())
        ))
    })?;
    let offsets = Offsets::read(data.py(), offsets, data.as_bytes().len())?;
    Ok((data.as_bytes(), offsets))
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
        max_bytes = None,
    ))]
    #[allow(clippy::too_many_arguments)] // Python's keyword arguments
    fn py_new(
        py: Python<'_>,
        expected_items: u64,
        false_positive_rate: f64,
        kind: &str,
        rule: Option<&str>,
        layout: Option<&str>,
        encoding: &str,
        salt: Option<&[u8]>,
        max_bytes: Option<u64>,
    ) -> PyResult<Self> {
        let options = (|| {
            let mut options = FilterOptions::new(expected_items, false_positive_rate);
            options.kind = kind.parse()?;
            if let Some(rule) = rule {
                options.rule_named(rule)?;
            }
            if let Some(layout) = layout {
                options.layout_named(layout)?;
            }
            options.encoding_named(encoding)?;
            options.salt_bytes(salt.unwrap_or_default())?;
            options.max_payload_bytes = max_bytes.unwrap_or(0);
            Ok(options)
        })()
        .map_err(py_err(py))?;
        let handle = py.detach(|| Handle::create(&options)).map_err(py_err(py))?;
        Ok(Self::new(handle))
    }

    /// Inserts a key (`str` or `bytes`); whether it changed the filter (`False`: it may
    /// have been there already).
    fn insert(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        match keys::one(key)? {
            OneKey::Text(t) => self.with_write(py, |h| h.insert(t)),
            OneKey::Bytes(b) => self.with_write(py, |h| h.insert(b)),
        }
    }

    /// Whether a key may have been inserted: `False` is definite, `True` means "maybe".
    fn contains(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        match keys::one(key)? {
            OneKey::Text(t) => self.with_read(py, |h| h.contains(t)),
            OneKey::Bytes(b) => self.with_read(py, |h| h.contains(b)),
        }
    }

    fn __contains__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        self.contains(py, key)
    }

    /// Removes a key from a counting filter.
    fn remove(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        match keys::one(key)? {
            OneKey::Text(t) => self.with_write(py, |h| h.remove(t)),
            OneKey::Bytes(b) => self.with_write(py, |h| h.remove(b)),
        }
    }

    /// Inserts every key of an iterable; how many changed the filter. The GIL is released
    /// while keys are hashed, a chunk at a time.
    fn insert_all(&self, py: Python<'_>, keys: &Bound<'_, PyAny>) -> PyResult<u64> {
        let mut added = 0u64;
        for_each_batch(py, keys, |batch| {
            let mut handle = self.handle.write().map_err(|_| poisoned())?;
            added += insert_batch(&mut handle, batch)?;
            Ok(())
        })?;
        Ok(added)
    }

    /// Whether each key of an iterable may have been inserted, in order. The GIL is
    /// released while keys are hashed, a chunk at a time.
    fn contains_all(&self, py: Python<'_>, keys: &Bound<'_, PyAny>) -> PyResult<Vec<bool>> {
        let mut answers = Vec::new();
        for_each_batch(py, keys, |batch| {
            let handle = self.handle.read().map_err(|_| poisoned())?;
            contains_batch(&handle, batch, &mut answers)
        })?;
        Ok(answers)
    }

    /// Inserts the keys packed in `data`, cut by `offsets` (key `i` is
    /// `data[offsets[i]:offsets[i + 1]]`, as in an Arrow array); how many changed the filter.
    /// The GIL is released while keys are hashed, once for the whole call, and the filter is
    /// locked for the whole call: a save from another thread sees all of it or none.
    fn insert_packed(
        &self,
        py: Python<'_>,
        data: &Bound<'_, PyAny>,
        offsets: &Bound<'_, PyAny>,
    ) -> PyResult<u64> {
        let (data, offsets) = packed(data, offsets)?;
        py.detach(|| {
            let mut handle = self.handle.write().map_err(|_| poisoned())?;
            insert_batch(&mut handle, &Batch::Packed(data, offsets.all()))
        })
        .map_err(py_err(py))
    }

    /// Whether each key packed in `data` and cut by `offsets` may have been inserted, in
    /// order. The GIL is released while keys are hashed, once for the whole call.
    fn contains_packed(
        &self,
        py: Python<'_>,
        data: &Bound<'_, PyAny>,
        offsets: &Bound<'_, PyAny>,
    ) -> PyResult<Vec<bool>> {
        let (data, offsets) = packed(data, offsets)?;
        py.detach(|| {
            let mut answers = Vec::with_capacity(offsets.keys());
            let handle = self.handle.read().map_err(|_| poisoned())?;
            contains_batch(&handle, &Batch::Packed(data, offsets.all()), &mut answers)?;
            Ok(answers)
        })
        .map_err(py_err(py))
    }

    /// Writes a snapshot to `path` atomically, recording `generation` (the generation of the
    /// primary store these bits fully cover), or the one it was loaded with (or last saved
    /// at) when `None`. A snapshot loaded bound to a store stays bound while its generation is
    /// kept.
    #[pyo3(signature = (path, generation = None))]
    fn save(&self, py: Python<'_>, path: PathBuf, generation: Option<u64>) -> PyResult<()> {
        py.detach(|| {
            let header = {
                let handle = self.handle.read().map_err(|_| poisoned())?;
                handle.save(&path, generation)?
            };
            self.handle.write().map_err(|_| poisoned())?.saved(header);
            Ok(())
        })
        .map_err(py_err(py))
    }

    /// The snapshot as `bytes`, recording `generation` as `save` does.
    #[pyo3(signature = (generation = None))]
    fn to_bytes<'py>(
        &self,
        py: Python<'py>,
        generation: Option<u64>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let bytes = py
            .detach(|| {
                let handle = self.handle.read().map_err(|_| poisoned())?;
                handle.to_bytes(generation)
            })
            .map_err(py_err(py))?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// The Guava stream of a filter of Guava's rules, which the JVM's
    /// `BloomFilter.readFrom` reads.
    fn to_guava<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let bytes = self.with_read(py, Handle::to_guava)?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// `"plain"`, `"counting"` or `"scalable"`.
    #[getter]
    fn kind(&self, py: Python<'_>) -> PyResult<&'static str> {
        self.with_read(py, |h| Ok(h.filter().kind()))
    }

    /// The dataset generation it was loaded with or last saved at (0 for a new filter).
    #[getter]
    fn generation(&self, py: Python<'_>) -> PyResult<u64> {
        self.with_read(py, |h| Ok(h.generation()))
    }

    /// What a snapshot of the filter would record, and its estimates: a `dict`.
    fn info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        use bloom_core::Filter as _;
        let (info, figures) = self.with_read(py, |h| {
            let f = h.filter();
            Ok((
                h.info(),
                (
                    f.items_inserted(),
                    f.fill_ratio(),
                    f.estimated_items(),
                    f.estimated_false_positive_rate(),
                    f.remaining_capacity(),
                    f.is_over_capacity(),
                ),
            ))
        })?;
        let dict = crate::header::header_dict(py, &info)?;
        dict.set_item("items_inserted", figures.0)?;
        dict.set_item("fill_ratio", figures.1)?;
        dict.set_item("estimated_items", figures.2)?;
        dict.set_item("estimated_false_positive_rate", figures.3)?;
        dict.set_item("remaining_capacity", figures.4)?;
        dict.set_item("is_over_capacity", figures.5)?;
        Ok(dict)
    }

    /// Pickles as the snapshot's bytes (verified again when unpickled).
    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let loads = py.import("bloom")?.getattr("loads")?;
        let bytes = self.to_bytes(py, None)?;
        let limit = bytes.as_bytes().len() as u64;
        PyTuple::new(
            py,
            [
                loads,
                PyTuple::new(py, [bytes.into_any(), limit.into_pyobject(py)?.into_any()])?
                    .into_any(),
            ],
        )
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        use bloom_core::Filter as _;
        self.with_read(py, |h| {
            let filter = h.filter();
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
        })
    }
}
