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

/// The key a Python object is: `str` or `bytes`. Anything else is a `TypeError`, and a `str`
/// with lone surrogates (which has no UTF-8 form) a `KeyEncodingError`.
pub(crate) fn one<'a>(key: &'a Bound<'_, PyAny>) -> PyResult<OneKey<'a>> {
    if let Ok(text) = key.cast::<PyString>() {
        return text.to_str().map(OneKey::Text).map_err(|_| {
            crate::errors::to_py(
                key.py(),
                &bloom_ffi::Error::new(
                    bloom_ffi::ErrorKind::Key,
                    "the key is a str with a lone surrogate, which has no UTF-8 form",
                ),
            )
        });
    }
    if let Ok(bytes) = key.cast::<PyBytes>() {
        return Ok(OneKey::Bytes(bytes.as_bytes()));
    }
    Err(PyTypeError::new_err(format!(
        "a key is str or bytes, not {}",
        key.get_type().name()?
    )))
}

/// `error`, about the key at `index` among all the keys given.
pub(crate) fn at_index(py: Python<'_>, error: PyErr, index: usize) -> PyErr {
    let message = format!("key {index}: {}", error.value(py));
    let indexed = PyErr::from_type(error.get_type(py), message);
    for attribute in ["kind", "code"] {
        if let Ok(value) = error.value(py).getattr(attribute) {
            let _ = indexed.value(py).setattr(attribute, value);
        }
    }
    let _ = indexed.value(py).setattr("key_index", index);
    indexed
}

/// A chunk of keys, in the form the filter takes fastest: all text, all bytes, or mixed.
pub(crate) enum Batch<'a> {
    Text(Vec<&'a str>),
    Bytes(Vec<&'a [u8]>),
    Mixed(Vec<OneKey<'a>>),
}

impl<'a> Batch<'a> {
    /// The keys of a chunk of Python objects, in one pass while they are all of one type; the
    /// keys before the first one that is refused, and the refusal with its index in the chunk.
    pub(crate) fn of(objects: &'a [Bound<'_, PyAny>]) -> (Self, Option<(usize, PyErr)>) {
        let first = match objects.first().map(one) {
            None => return (Self::Text(Vec::new()), None),
            Some(Err(e)) => return (Self::Text(Vec::new()), Some((0, e))),
            Some(Ok(first)) => first,
        };
        match first {
            OneKey::Text(_) => {
                let mut texts = Vec::with_capacity(objects.len());
                for object in objects {
                    let Ok(text) = object.cast::<PyString>() else {
                        return Self::mixed(objects);
                    };
                    let Ok(text) = text.to_str() else {
                        return Self::mixed(objects);
                    };
                    texts.push(text);
                }
                (Self::Text(texts), None)
            }
            OneKey::Bytes(_) => {
                let mut bytes = Vec::with_capacity(objects.len());
                for object in objects {
                    match object.cast::<PyBytes>() {
                        Ok(b) => bytes.push(b.as_bytes()),
                        Err(_) => return Self::mixed(objects),
                    }
                }
                (Self::Bytes(bytes), None)
            }
        }
    }

    /// A chunk whose keys are not all of one type (or not all keys): each converted alone,
    /// up to the first refused.
    fn mixed(objects: &'a [Bound<'_, PyAny>]) -> (Self, Option<(usize, PyErr)>) {
        let mut keys = Vec::with_capacity(objects.len());
        for (i, object) in objects.iter().enumerate() {
            match one(object) {
                Ok(key) => keys.push(key),
                Err(e) => return (Self::Mixed(keys), Some((i, e))),
            }
        }
        (Self::Mixed(keys), None)
    }
}

/// Refuses a `str` or `bytes` given where many keys are expected: iterating it would take
/// its characters or bytes as keys.
pub(crate) fn many(keys: &Bound<'_, PyAny>) -> PyResult<()> {
    if keys.is_instance_of::<PyString>() || keys.is_instance_of::<PyBytes>() {
        return Err(PyTypeError::new_err(
            "expected an iterable of keys, got one key (str or bytes); use insert or contains for one key, or wrap it in a list",
        ));
    }
    Ok(())
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
        match key {
            Ok(key) => chunk.push(key),
            // The iterator failed: the keys it gave before are handled, as before a refused
            // key, then its exception is raised.
            Err(e) => {
                if !chunk.is_empty() {
                    each(&chunk)?;
                }
                return Err(e);
            }
        }
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
