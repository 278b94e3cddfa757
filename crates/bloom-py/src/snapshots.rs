//! The module's functions over snapshots: `load`, `loads`, `inspect`, `verify`, and the
//! imports `from_guava`, `from_parquet` and `from_parquet_blob`. File work releases the GIL;
//! a source is a path (`str` or `os.PathLike`), `bytes` or a `bytearray`.

use std::path::PathBuf;

use bloom_ffi::{Handle, HeaderInfo, Source};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::PyDict;

use crate::header::header_dict;

use crate::errors::py_err;
use crate::filter::PyBloomFilter;

/// A snapshot's source as given from Python: `bytes` (or a `bytearray`, copied), or a path.
enum Given {
    Bytes(PyBackedBytes),
    Path(PathBuf),
}

impl Given {
    fn of(source: &Bound<'_, PyAny>) -> PyResult<Self> {
        if let Ok(bytes) = source.extract::<PyBackedBytes>() {
            return Ok(Self::Bytes(bytes));
        }
        source.extract::<PathBuf>().map(Self::Path).map_err(|_| {
            PyTypeError::new_err(format!(
                "a snapshot source is a path (str or os.PathLike), bytes or bytearray, not {}",
                source
                    .get_type()
                    .name()
                    .map_or_else(|_| "this".to_owned(), |n| n.to_string())
            ))
        })
    }

    fn source(&self) -> Source<'_> {
        match self {
            Self::Bytes(bytes) => Source::Bytes(bytes),
            Self::Path(path) => Source::Path(path),
        }
    }
}

/// The limit given (`None` or 0: the default, 1 GiB, as in the C ABI).
fn limit(max_bytes: Option<u64>) -> u64 {
    max_bytes.unwrap_or(0)
}

/// Loads the filter a snapshot file holds, every byte checked first.
#[pyfunction]
#[pyo3(signature = (path, max_bytes = None))]
pub(crate) fn load(
    py: Python<'_>,
    path: PathBuf,
    max_bytes: Option<u64>,
) -> PyResult<PyBloomFilter> {
    let handle = py
        .detach(|| Handle::load(Source::Path(&path), limit(max_bytes)))
        .map_err(py_err(py))?;
    Ok(PyBloomFilter::new(handle))
}

/// Loads the filter a snapshot in `bytes` (or a `bytearray`, copied) holds, every byte checked
/// first.
#[pyfunction]
#[pyo3(signature = (data, max_bytes = None))]
pub(crate) fn loads(
    py: Python<'_>,
    data: PyBackedBytes,
    max_bytes: Option<u64>,
) -> PyResult<PyBloomFilter> {
    let handle = py
        .detach(|| Handle::load(Source::Bytes(&data), limit(max_bytes)))
        .map_err(py_err(py))?;
    Ok(PyBloomFilter::new(handle))
}

/// A snapshot's header (its checksum checked; the payload is not read): a `dict`.
#[pyfunction]
#[pyo3(signature = (source, max_bytes = None))]
pub(crate) fn inspect<'py>(
    py: Python<'py>,
    source: &Bound<'py, PyAny>,
    max_bytes: Option<u64>,
) -> PyResult<Bound<'py, PyDict>> {
    header_of(py, bloom_ffi::inspect, source, max_bytes)
}

/// Checks a snapshot completely (both checksums, every field), as `bloom verify` does;
/// returns its header as a `dict`, or raises.
#[pyfunction]
#[pyo3(signature = (source, max_bytes = None))]
pub(crate) fn verify<'py>(
    py: Python<'py>,
    source: &Bound<'py, PyAny>,
    max_bytes: Option<u64>,
) -> PyResult<Bound<'py, PyDict>> {
    header_of(py, bloom_ffi::verify, source, max_bytes)
}

/// The header `read` (inspecting or verifying) finds in `source`, as a `dict`; the reading
/// is done with the GIL released.
fn header_of<'py>(
    py: Python<'py>,
    read: fn(Source<'_>, u64) -> Result<HeaderInfo, bloom_ffi::Error>,
    source: &Bound<'py, PyAny>,
    max_bytes: Option<u64>,
) -> PyResult<Bound<'py, PyDict>> {
    let given = Given::of(source)?;
    let info = py
        .detach(|| read(given.source(), limit(max_bytes)))
        .map_err(py_err(py))?;
    header_dict(py, &info)
}

/// The filter a Guava `BloomFilter.writeTo` stream holds (a path or `bytes`), its keys hashed
/// as the JVM's funnel hashed them: `utf8`, `chars` or `bytes`.
#[pyfunction]
#[pyo3(signature = (source, funnel, max_bytes = None))]
pub(crate) fn from_guava(
    py: Python<'_>,
    source: &Bound<'_, PyAny>,
    funnel: &str,
    max_bytes: Option<u64>,
) -> PyResult<PyBloomFilter> {
    let funnel = bloom_ffi::funnel_named(funnel).map_err(py_err(py))?;
    let given = Given::of(source)?;
    let handle = py
        .detach(|| Handle::from_guava(given.source(), funnel, limit(max_bytes)))
        .map_err(py_err(py))?;
    Ok(PyBloomFilter::new(handle))
}

/// The filter of `column` in each row group of a Parquet file (`None` where a row group has
/// none), as Parquet's own reader answers: a key is the column value's plain encoding (the
/// text or bytes of a string or binary value, the little-endian bytes of a number).
#[pyfunction]
#[pyo3(signature = (path, column, max_bytes = None))]
pub(crate) fn from_parquet(
    py: Python<'_>,
    path: PathBuf,
    column: &str,
    max_bytes: Option<u64>,
) -> PyResult<Vec<Option<PyBloomFilter>>> {
    let handles = py
        .detach(|| bloom_ffi::from_parquet(&path, column, limit(max_bytes)))
        .map_err(py_err(py))?;
    Ok(handles
        .into_iter()
        .map(|h| h.map(PyBloomFilter::new))
        .collect())
}

/// The filter of a Parquet filter blob (a `BloomFilterHeader`, then its bitset), its keys
/// text (`utf8`, a string column's) or `bytes`.
#[pyfunction]
#[pyo3(signature = (blob, encoding = "utf8", max_bytes = None))]
pub(crate) fn from_parquet_blob(
    py: Python<'_>,
    blob: &[u8],
    encoding: &str,
    max_bytes: Option<u64>,
) -> PyResult<PyBloomFilter> {
    let encoding = match encoding {
        "utf8" => bloom_core::KeyEncoding::Utf8,
        "bytes" => bloom_core::KeyEncoding::Bytes,
        other => {
            return Err(py_err(py)(bloom_ffi::Error::invalid(format!(
                "a Parquet filter's keys are utf8 (a string column's) or bytes, not {other:?}"
            ))));
        }
    };
    let handle = py
        .detach(|| bloom_ffi::from_parquet_blob(blob, encoding, limit(max_bytes)))
        .map_err(py_err(py))?;
    Ok(PyBloomFilter::new(handle))
}
