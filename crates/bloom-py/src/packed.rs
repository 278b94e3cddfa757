//! Keys handed over packed: one `bytes` object holding every key back to back, and the
//! offsets where each key starts and ends (`n + 1` integers for `n` keys, key `i` being
//! `data[offsets[i]:offsets[i + 1]]`). It is the layout of an Arrow string or binary array
//! (pyarrow's, polars', a Parquet reader's), and it costs no Python object per key: the
//! form for pipelines whose keys are already in columns.
//!
//! The offsets (any one-dimensional buffer of 32- or 64-bit integers) are copied (one
//! `memcpy`, with the GIL held: another thread may change a NumPy array) and checked whole
//! before any key is taken, so that malformed offsets change nothing. `data` is a `bytes`
//! object, which nothing can change: it is read in place with the GIL released, once for
//! the whole call.

use pyo3::buffer::{Element, PyBuffer};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;

use bloom_ffi::Error;

/// The offsets of packed keys, checked against the data they cut: at least one, never
/// decreasing, within the data.
pub(crate) struct Offsets(Vec<u64>);

impl Offsets {
    /// The offsets in `buffer`, copied and checked against `data_len` bytes of data.
    ///
    /// # Errors
    /// `TypeError` for anything but a one-dimensional buffer of 32- or 64-bit integers;
    /// `InvalidArgumentError` for offsets that do not cut the data into keys.
    pub(crate) fn read(
        py: Python<'_>,
        buffer: &Bound<'_, PyAny>,
        data_len: usize,
    ) -> PyResult<Self> {
        let checked = if let Some(values) = copied::<i64>(py, buffer) {
            Self::check(values?, data_len)
        } else if let Some(values) = copied::<u64>(py, buffer) {
            Self::check(values?, data_len)
        } else if let Some(values) = copied::<i32>(py, buffer) {
            Self::check(values?, data_len)
        } else if let Some(values) = copied::<u32>(py, buffer) {
            Self::check(values?, data_len)
        } else {
            return Err(not_offsets(py, buffer));
        };
        checked.map_err(crate::errors::py_err(py))
    }

    /// `values` as offsets into `data_len` bytes, or why they are not.
    fn check<T: Copy + Into<i128>>(values: Vec<T>, data_len: usize) -> Result<Self, Error> {
        if values.is_empty() {
            return Err(Error::invalid(
                "offsets is empty: n keys take n + 1 offsets (a single 0 for no keys)",
            ));
        }
        let limit = i128::try_from(data_len).unwrap_or(i128::MAX);
        let mut previous = 0;
        for (i, value) in values.iter().map(|&v| v.into()).enumerate() {
            if !(0..=limit).contains(&value) {
                return Err(Error::invalid(format!(
                    "offsets[{i}] is {value}, outside the data's {data_len} bytes"
                )));
            }
            if i > 0 && value < previous {
                return Err(Error::invalid(format!(
                    "offsets[{i}] is {value}, below offsets[{}] ({previous}): offsets never decrease",
                    i - 1
                ))
                .at_key(i - 1));
            }
            previous = value;
        }
        // Each is within the data: no conversion fails (and for 64-bit offsets, the vector is
        // converted in place).
        Ok(Self(
            values
                .into_iter()
                .map(|v| u64::try_from(v.into()).unwrap_or(u64::MAX))
                .collect(),
        ))
    }

    /// How many keys the offsets cut.
    pub(crate) fn keys(&self) -> usize {
        self.0.len().saturating_sub(1)
    }

    /// Every offset, for [`slices`].
    pub(crate) fn all(&self) -> &[u64] {
        &self.0
    }
}

/// The keys of `data` cut by `ends` (from [`Offsets::all`], checked against `data`).
pub(crate) fn slices<'a>(
    data: &'a [u8],
    ends: &'a [u64],
) -> impl Iterator<Item = &'a [u8]> + Clone + 'a {
    let at = |offset: u64| usize::try_from(offset).unwrap_or(usize::MAX);
    ends.windows(2)
        .map(move |pair| data.get(at(pair[0])..at(pair[1])).unwrap_or_default())
}

/// The integers of `buffer`, copied, if it holds `T`s: `None` for a buffer of another type,
/// a `TypeError` for one of more than one dimension or in the other byte order.
fn copied<T: Element + Copy>(
    py: Python<'_>,
    buffer: &Bound<'_, PyAny>,
) -> Option<PyResult<Vec<T>>> {
    let view = PyBuffer::<T>::get(buffer).ok()?;
    if view.dimensions() != 1 {
        return Some(Err(PyTypeError::new_err(format!(
            "offsets is a buffer of {} dimensions; it takes one",
            view.dimensions()
        ))));
    }
    // PyO3 takes a format of either explicit byte order for the native one.
    let format = view.format().to_bytes();
    let foreign = match format.first() {
        Some(b'<') => cfg!(target_endian = "big"),
        Some(b'>' | b'!') => cfg!(target_endian = "little"),
        _ => false,
    };
    if foreign {
        return Some(Err(PyTypeError::new_err(format!(
            "offsets is in the other byte order (format '{}'): pass native-order integers (NumPy: offsets.astype('=i8'))",
            String::from_utf8_lossy(format)
        ))));
    }
    Some(view.to_vec(py))
}

/// Why `buffer` is not offsets: `InvalidArgumentError` for an empty buffer (which CPython may
/// export with no memory at all), `TypeError` naming what it is otherwise.
fn not_offsets(py: Python<'_>, buffer: &Bound<'_, PyAny>) -> PyErr {
    let Ok(view) = pyo3::types::PyMemoryView::from(buffer) else {
        return PyTypeError::new_err(format!(
            "offsets is a buffer of 32- or 64-bit integers (array.array('q'), a NumPy int64 or int32 array, an Arrow array's offsets), not {}",
            buffer
                .get_type()
                .name()
                .map_or_else(|_| "this".to_owned(), |name| name.to_string())
        ));
    };
    let described = |name: &str| {
        view.getattr(name)
            .and_then(|value| value.str().map(|text| text.to_string()))
            .unwrap_or_else(|_| "?".to_owned())
    };
    if described("nbytes") == "0" {
        return crate::errors::to_py(
            py,
            &Error::invalid("offsets is empty: n keys take n + 1 offsets (a single 0 for no keys)"),
        );
    }
    PyTypeError::new_err(format!(
        "offsets is a buffer of format '{}' in {} dimension(s); it takes 32- or 64-bit integers, aligned, in native byte order and one dimension (copy it as array.array('q', offsets), or with NumPy's offsets.astype(np.int64))",
        described("format"),
        described("ndim"),
    ))
}
