//! Keys from Python: `str` (encoded by the filter's encoding) or `bytes`, one at a time or
//! from any iterable, taken a chunk at a time so that a stream of any length is handled in
//! bounded memory, and borrowed (never copied) while the GIL is released.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};

/// Keys taken from an iterable before the GIL is released for them.
pub(crate) const CHUNK: usize = 65_536;

/// One key, borrowed from its Python object.
#[derive(Clone, Copy)]
pub(crate) enum OneKey<'a> {
    /// A `str`.
    Text(&'a str),
    /// A `bytes`.
    Bytes(&'a [u8]),
}

/// The key a Python object is: `str` or `bytes`, else `TypeError`.
pub(crate) fn one<'a>(key: &'a Bound<'_, PyAny>) -> PyResult<OneKey<'a>> {
    if let Ok(text) = key.cast::<PyString>() {
        return Ok(OneKey::Text(text.to_str()?));
    }
    if let Ok(bytes) = key.cast::<PyBytes>() {
        return Ok(OneKey::Bytes(bytes.as_bytes()));
    }
    Err(PyTypeError::new_err(format!(
        "a key is str or bytes, not {}",
        key.get_type().name()?
    )))
}

/// A chunk of keys, in the form the filter takes fastest: all text, all bytes, or mixed.
pub(crate) enum Batch<'a> {
    Text(Vec<&'a str>),
    Bytes(Vec<&'a [u8]>),
    Mixed(Vec<OneKey<'a>>),
}

impl<'a> Batch<'a> {
    /// The keys of a chunk of Python objects.
    pub(crate) fn of(objects: &'a [Bound<'_, PyAny>]) -> PyResult<Self> {
        let keys: Vec<OneKey<'a>> = objects.iter().map(one).collect::<PyResult<_>>()?;
        if keys.iter().all(|k| matches!(k, OneKey::Text(_))) {
            return Ok(Self::Text(
                keys.iter()
                    .filter_map(|k| match k {
                        OneKey::Text(t) => Some(*t),
                        OneKey::Bytes(_) => None,
                    })
                    .collect(),
            ));
        }
        if keys.iter().all(|k| matches!(k, OneKey::Bytes(_))) {
            return Ok(Self::Bytes(
                keys.iter()
                    .filter_map(|k| match k {
                        OneKey::Bytes(b) => Some(*b),
                        OneKey::Text(_) => None,
                    })
                    .collect(),
            ));
        }
        Ok(Self::Mixed(keys))
    }
}

/// Hands the keys of `iterable` to `each` a chunk of at most [`CHUNK`] objects at a time.
pub(crate) fn for_each_chunk<'py>(
    iterable: &Bound<'py, PyAny>,
    mut each: impl FnMut(&[Bound<'py, PyAny>]) -> PyResult<()>,
) -> PyResult<()> {
    let mut chunk = Vec::new();
    for key in iterable.try_iter()? {
        chunk.push(key?);
        if chunk.len() == CHUNK {
            each(&chunk)?;
            chunk.clear();
        }
    }
    if chunk.is_empty() {
        Ok(())
    } else {
        each(&chunk)
    }
}
