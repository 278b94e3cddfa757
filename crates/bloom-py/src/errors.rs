//! The package's exceptions: one class per [`ErrorKind`], all subclasses of `BloomError`
//! and of the built-in class a Python caller would catch (`OSError`, `ValueError`, ...),
//! each instance carrying the kind's stable `kind` name and `code`.

use bloom_ffi::{Error, ErrorKind};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};

/// Each exception class: its name, the built-in class it also derives from (so that `except
/// OSError` or `except ValueError` catches what it should), and its documentation.
const CLASSES: [(ErrorKind, &str, &str, &str); 9] = [
    (
        ErrorKind::InvalidArgument,
        "InvalidArgumentError",
        "ValueError",
        "An argument is invalid.",
    ),
    (
        ErrorKind::Io,
        "SnapshotIOError",
        "OSError",
        "A file could not be read or written (missing, no permission, not a regular file).",
    ),
    (
        ErrorKind::NotASnapshot,
        "NotASnapshotError",
        "ValueError",
        "The bytes are not a bloom snapshot at all.",
    ),
    (
        ErrorKind::Corrupt,
        "CorruptSnapshotError",
        "ValueError",
        "The snapshot is damaged (truncated, checksum mismatch, invalid field): never trust it.",
    ),
    (
        ErrorKind::Unsupported,
        "UnsupportedSnapshotError",
        "ValueError",
        "The snapshot uses a version, rule, layout or encoding this build does not implement.",
    ),
    (
        ErrorKind::TooLarge,
        "SnapshotTooLargeError",
        "ValueError",
        "The snapshot's payload is over the size limit it was read with: pass a larger `max_bytes` to read a file you trust.",
    ),
    (
        ErrorKind::Key,
        "KeyEncodingError",
        "ValueError",
        "A key was refused: the filter's encoding takes text, and the bytes are not UTF-8.",
    ),
    (
        ErrorKind::OutOfMemory,
        "OutOfMemoryError",
        "MemoryError",
        "Memory for the filter could not be allocated.",
    ),
    (
        ErrorKind::Internal,
        "InternalError",
        "RuntimeError",
        "A bug in bloom. Please report it.",
    ),
];

/// The class of a missing file: a `SnapshotIOError` that `except FileNotFoundError` catches
/// too ("no snapshot yet" told apart from a file that cannot be read).
const NOT_FOUND: (&str, &str, &str) = (
    "SnapshotNotFoundError",
    "FileNotFoundError",
    "The file does not exist: a SnapshotIOError and a FileNotFoundError.",
);

/// Where [`NOT_FOUND`]'s class is in [`types`]' list: after `BloomError` and [`CLASSES`]'.
const NOT_FOUND_AT: usize = CLASSES.len() + 1;

/// `BloomError`, then one class per entry of [`CLASSES`], then [`NOT_FOUND`]'s, made once per
/// interpreter.
static TYPES: PyOnceLock<Vec<Py<PyType>>> = PyOnceLock::new();

/// A new class `name(bases...)` of the module `bloom`.
fn class(
    py: Python<'_>,
    name: &str,
    bases: &[Bound<'_, PyAny>],
    doc: &str,
) -> PyResult<Py<PyType>> {
    let namespace = PyDict::new(py);
    namespace.set_item("__module__", "bloom")?;
    namespace.set_item("__doc__", doc)?;
    let made = py
        .get_type::<PyType>()
        .call1((name, PyTuple::new(py, bases)?, namespace))?;
    Ok(made.cast_into::<PyType>()?.unbind())
}

/// The exception classes.
fn types(py: Python<'_>) -> PyResult<&Vec<Py<PyType>>> {
    TYPES.get_or_try_init(py, || {
        let builtins = py.import("builtins")?;
        let base = class(
            py,
            "BloomError",
            &[builtins.getattr("Exception")?],
            "Every error of the package; `kind` and `code` say which (the C ABI's names and codes).",
        )?;
        let mut all = vec![base.clone_ref(py)];
        for (_, name, builtin, doc) in CLASSES {
            all.push(class(
                py,
                name,
                &[base.bind(py).clone().into_any(), builtins.getattr(builtin)?],
                doc,
            )?);
        }
        let io = all
            .get(index_of(ErrorKind::Io))
            .map(|class| class.bind(py).clone().into_any())
            .ok_or_else(|| PyRuntimeError::new_err("SnapshotIOError was not made"))?;
        let (name, builtin, doc) = NOT_FOUND;
        all.push(class(py, name, &[io, builtins.getattr(builtin)?], doc)?);
        Ok(all)
    })
}

/// The exception of a binding error, with its `kind` and `code` set.
pub(crate) fn to_py(py: Python<'_>, error: &Error) -> PyErr {
    let message = error.to_string();
    let cause = error.io_cause().filter(|_| error.kind() == ErrorKind::Io);
    let class = types(py).map(|all| {
        let at = match cause {
            Some(cause) if cause.kind == std::io::ErrorKind::NotFound => NOT_FOUND_AT,
            _ => index_of(error.kind()),
        };
        all.get(at).map(|t| t.bind(py).clone())
    });
    let err = match class {
        Ok(Some(class)) => PyErr::from_type(class, message),
        _ => PyRuntimeError::new_err(message),
    };
    let value = err.value(py);
    // Setting an attribute on a fresh exception fails only without memory; the exception is
    // raised either way.
    let _ = value.setattr("kind", error.kind().name());
    let _ = value.setattr("code", error.kind().code());
    let _ = value.setattr("key_index", error.key_index());
    if let Some(code) = cause.and_then(|cause| cause.os_code) {
        let _ = value.setattr("errno", code);
    }
    err
}

/// Where the class of `kind` is in [`types`]' list (0, `BloomError`, for none).
fn index_of(kind: ErrorKind) -> usize {
    CLASSES
        .iter()
        .position(|(k, ..)| *k == kind)
        .map_or(0, |i| i + 1)
}

/// A converter of binding errors into exceptions, for `map_err`, once the GIL is held again.
pub(crate) fn py_err(py: Python<'_>) -> impl Fn(Error) -> PyErr + '_ {
    move |error| to_py(py, &error)
}

/// Adds the exception classes to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    let all = types(py)?;
    let names = std::iter::once("BloomError")
        .chain(CLASSES.iter().map(|(_, name, ..)| *name))
        .chain([NOT_FOUND.0]);
    for (name, class) in names.zip(all) {
        m.add(name, class.bind(py))?;
    }
    Ok(())
}
