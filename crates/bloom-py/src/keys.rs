//! Keys from Python: `str` (encoded by the filter's encoding) or `bytes`, one at a time or
//! from any iterable, taken a chunk at a time so that a stream of any length is handled in
//! bounded memory, and borrowed (never copied) while the GIL is released: each chunk's
//! objects are held by a tuple or vector of references no other thread can change.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple};

/// Keys taken from an iterable before the GIL is released for them: few enough that their
/// objects are still in the cache when their references are dropped.
pub(crate) const CHUNK: usize = 4_096;

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
    /// The keys of a chunk of Python objects, in one pass while they are all of one type.
    pub(crate) fn of(objects: &'a [Bound<'_, PyAny>]) -> PyResult<Self> {
        let Some(first) = objects.first() else {
            return Ok(Self::Text(Vec::new()));
        };
        match one(first)? {
            OneKey::Text(_) => {
                let mut texts = Vec::with_capacity(objects.len());
                for object in objects {
                    match object.cast::<PyString>() {
                        Ok(text) => texts.push(text.to_str()?),
                        Err(_) => return Self::mixed(objects),
                    }
                }
                Ok(Self::Text(texts))
            }
            OneKey::Bytes(_) => {
                let mut bytes = Vec::with_capacity(objects.len());
                for object in objects {
                    match object.cast::<PyBytes>() {
                        Ok(b) => bytes.push(b.as_bytes()),
                        Err(_) => return Self::mixed(objects),
                    }
                }
                Ok(Self::Bytes(bytes))
            }
        }
    }

    /// A chunk whose keys are not all of one type.
    fn mixed(objects: &'a [Bound<'_, PyAny>]) -> PyResult<Self> {
        objects
            .iter()
            .map(one)
            .collect::<PyResult<_>>()
            .map(Self::Mixed)
    }

    /// The number of keys.
    pub(crate) fn len(&self) -> usize {
        match self {
            Self::Text(keys) => keys.len(),
            Self::Bytes(keys) => keys.len(),
            Self::Mixed(keys) => keys.len(),
        }
    }
}

/// Hands the keys of `iterable` to `each` a chunk of at most [`CHUNK`] objects at a time,
/// each object referenced (so alive) while `each` reads it. A list is copied a chunk at a
/// time (in C) into a tuple of its own, which no other thread can change while the GIL is
/// released; a tuple is read in place.
pub(crate) fn for_each_chunk<'py>(
    iterable: &Bound<'py, PyAny>,
    mut each: impl FnMut(&[Bound<'py, PyAny>]) -> PyResult<()>,
) -> PyResult<()> {
    if let Ok(tuple) = iterable.cast::<PyTuple>() {
        for chunk in tuple.as_slice().chunks(CHUNK) {
            each(chunk)?;
        }
        return Ok(());
    }
    if let Ok(list) = iterable.cast::<PyList>() {
        // A list changed by `each`'s own code between chunks is read as it is then.
        let mut items = list.iter();
        while items.len() > 0 {
            let chunk = PyTuple::new(list.py(), items.by_ref().take(CHUNK))?;
            each(chunk.as_slice())?;
        }
        return Ok(());
    }
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
