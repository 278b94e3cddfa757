//! Keys from Python: `str` (encoded by the filter's encoding) or `bytes`, one at a time or
//! from any iterable, taken a chunk at a time so that a stream of any length is handled in
//! bounded memory. While the GIL is released a chunk's keys are either borrowed from objects
//! held by a tuple or vector of references no other thread can change, or, for a list of
//! `str`, copied into one buffer of our own (a list can change under us; its strings, copied,
//! cannot).

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple};

/// Keys taken from a list or a tuple (which already hold them all) before the GIL is released
/// for them. Each release must pay for getting the GIL back: while another Python thread
/// runs, that waits out its switch interval (5 ms by default), so a chunk is at least that
/// much work (a million keys take about 15 ms). The keys' references or copies take at most
/// 16 bytes a key, and [`COPIED_BYTES`] for the text copied out of a list.
pub(crate) const CHUNK: usize = 1 << 20;

/// Keys taken from any other iterable (a generator, a file) before the GIL is released: the
/// objects stay alive until their chunk is handled, so fewer, for bounded memory; the
/// iterable's own Python code takes longer than their hashing anyway.
pub(crate) const STREAM_CHUNK: usize = 1 << 16;

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
        return crate::text::utf8(text).map(OneKey::Text).ok_or_else(|| {
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
    Copied(&'a CopiedText),
    Bytes(Vec<&'a [u8]>),
    /// Keys packed in one buffer, cut by offsets (`packed.rs`).
    Packed(&'a [u8], &'a [u64]),
    Mixed(Vec<OneKey<'a>>),
}

/// Most bytes of text copied out of a list for one chunk; a longer key is taken the general
/// way, by reference, not copied.
const COPIED_BYTES: usize = 32 << 20;

/// The `str` keys of part of a list, copied into one buffer while the GIL is held: reading a
/// list's objects in place with the GIL released would need a reference to each (a copy of
/// the list); copying their text is cheaper, and holds nothing of Python's.
#[derive(Default)]
pub(crate) struct CopiedText {
    text: String,
    /// Where each key ends in `text`.
    ends: Vec<usize>,
}

impl CopiedText {
    /// Copies the keys of `list[start..end]` (as the list is now) while each is a `str` with a
    /// UTF-8 form and the buffer has room; returns how many were copied, 0 when the first is
    /// anything else (to be taken the general way, which also refuses it).
    fn fill(&mut self, list: &Bound<'_, PyList>, start: usize, end: usize) -> usize {
        self.text.clear();
        self.ends.clear();
        for item in list.iter().skip(start).take(end.saturating_sub(start)) {
            let Ok(text) = item.cast::<PyString>() else {
                break;
            };
            let Some(text) = crate::text::utf8(text) else {
                break;
            };
            if self.text.len().saturating_add(text.len()) > COPIED_BYTES {
                break;
            }
            self.text.push_str(text);
            self.ends.push(self.text.len());
        }
        self.ends.len()
    }

    /// The keys, in order.
    pub(crate) fn keys(&self) -> impl Iterator<Item = &str> + Clone {
        let mut start = 0;
        self.ends.iter().map(move |&end| {
            let key = self.text.get(start..end).unwrap_or_default();
            start = end;
            key
        })
    }
}

/// A chunk of keys as [`for_each_chunk`] hands it over.
pub(crate) enum Chunk<'a, 'py> {
    /// Python objects, each referenced while the chunk is handled.
    Objects(&'a [Bound<'py, PyAny>]),
    /// `str` keys copied out of a list.
    Copied(&'a CopiedText),
}

impl Chunk<'_, '_> {
    /// How many keys the chunk holds.
    pub(crate) fn len(&self) -> usize {
        match self {
            Self::Objects(objects) => objects.len(),
            Self::Copied(copied) => copied.ends.len(),
        }
    }

    /// The chunk's keys, up to the first refused, and the refusal with its index in the
    /// chunk.
    pub(crate) fn batch(&self) -> (Batch<'_>, Option<(usize, PyErr)>) {
        match self {
            Self::Objects(objects) => Batch::of(objects),
            Self::Copied(copied) => (Batch::Copied(copied), None),
        }
    }
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
                    let Some(text) = crate::text::utf8(text) else {
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

/// Hands the keys of `iterable` to `each` a chunk of at most [`CHUNK`] keys at a time
/// ([`STREAM_CHUNK`] for an iterable that is not a list or a tuple). A
/// tuple is read in place. A list's `str` keys are copied ([`CopiedText`]); a part of a list
/// that holds anything else is copied (in C) into a tuple of its own, which no other thread
/// can change while the GIL is released. Any other iterable's objects are referenced from a
/// vector.
pub(crate) fn for_each_chunk<'py>(
    iterable: &Bound<'py, PyAny>,
    mut each: impl FnMut(Chunk<'_, 'py>) -> PyResult<()>,
) -> PyResult<()> {
    if let Ok(tuple) = iterable.cast::<PyTuple>() {
        for chunk in tuple.as_slice().chunks(CHUNK) {
            each(Chunk::Objects(chunk))?;
        }
        return Ok(());
    }
    if let Ok(list) = iterable.cast::<PyList>() {
        // The list is read as it is at each chunk: another thread may change it while the GIL
        // is released, and its length is asked again each time.
        let mut copied = CopiedText::default();
        let mut start = 0;
        while start < list.len() {
            let end = start.saturating_add(CHUNK).min(list.len());
            let taken = copied.fill(list, start, end);
            if taken > 0 {
                each(Chunk::Copied(&copied))?;
                start += taken;
                continue;
            }
            let chunk = list.get_slice(start, end).to_tuple();
            each(Chunk::Objects(chunk.as_slice()))?;
            start = end;
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
                    each(Chunk::Objects(&chunk))?;
                }
                return Err(e);
            }
        }
        if chunk.len() == STREAM_CHUNK {
            each(Chunk::Objects(&chunk))?;
            chunk.clear();
        }
    }
    if chunk.is_empty() {
        Ok(())
    } else {
        each(Chunk::Objects(&chunk))
    }
}
