//! The package's exceptions: one class per [`ErrorKind`], all subclasses of `BloomError`,
//! each instance carrying the kind's stable `kind` name and `code`.

use bloom_ffi::{Error, ErrorKind};
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(
    bloom,
    BloomError,
    PyException,
    "Every error of the package; `kind` and `code` say which (the C ABI's names and codes)."
);
create_exception!(
    bloom,
    InvalidArgumentError,
    BloomError,
    "An argument is invalid."
);
create_exception!(
    bloom,
    SnapshotIOError,
    BloomError,
    "A file could not be read or written (missing, no permission, not a regular file)."
);
create_exception!(
    bloom,
    NotASnapshotError,
    BloomError,
    "The bytes are not a bloom snapshot at all."
);
create_exception!(
    bloom,
    CorruptSnapshotError,
    BloomError,
    "The snapshot is damaged (truncated, checksum mismatch, invalid field): never trust it."
);
create_exception!(
    bloom,
    UnsupportedSnapshotError,
    BloomError,
    "The snapshot uses a version, rule, layout or encoding this build does not implement."
);
create_exception!(
    bloom,
    SnapshotTooLargeError,
    BloomError,
    "The snapshot's payload is over the size limit it was read with."
);
create_exception!(
    bloom,
    KeyEncodingError,
    BloomError,
    "A key was refused: the filter's encoding takes text, and the bytes are not UTF-8."
);
create_exception!(
    bloom,
    OutOfMemoryError,
    BloomError,
    "Memory for the filter could not be allocated."
);
create_exception!(
    bloom,
    InternalError,
    BloomError,
    "A bug in bloom. Please report it."
);

/// The exception of a binding error, with its `kind` and `code` set.
pub(crate) fn to_py(py: Python<'_>, error: &Error) -> PyErr {
    let message = error.to_string();
    let err = match error.kind() {
        ErrorKind::InvalidArgument => InvalidArgumentError::new_err(message),
        ErrorKind::Io => SnapshotIOError::new_err(message),
        ErrorKind::NotASnapshot => NotASnapshotError::new_err(message),
        ErrorKind::Corrupt => CorruptSnapshotError::new_err(message),
        ErrorKind::Unsupported => UnsupportedSnapshotError::new_err(message),
        ErrorKind::TooLarge => SnapshotTooLargeError::new_err(message),
        ErrorKind::Key => KeyEncodingError::new_err(message),
        ErrorKind::OutOfMemory => OutOfMemoryError::new_err(message),
        ErrorKind::Internal => InternalError::new_err(message),
    };
    let value = err.value(py);
    // Setting an attribute on a fresh exception fails only without memory; the exception is
    // raised either way.
    let _ = value.setattr("kind", error.kind().name());
    let _ = value.setattr("code", error.kind().code());
    let _ = value.setattr("key_index", error.key_index());
    err
}

/// A converter of binding errors into exceptions, for `map_err`, once the GIL is held again.
pub(crate) fn py_err(py: Python<'_>) -> impl Fn(Error) -> PyErr + '_ {
    move |error| to_py(py, &error)
}

/// Adds the exception classes to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("BloomError", py.get_type::<BloomError>())?;
    m.add(
        "InvalidArgumentError",
        py.get_type::<InvalidArgumentError>(),
    )?;
    m.add("SnapshotIOError", py.get_type::<SnapshotIOError>())?;
    m.add("NotASnapshotError", py.get_type::<NotASnapshotError>())?;
    m.add(
        "CorruptSnapshotError",
        py.get_type::<CorruptSnapshotError>(),
    )?;
    m.add(
        "UnsupportedSnapshotError",
        py.get_type::<UnsupportedSnapshotError>(),
    )?;
    m.add(
        "SnapshotTooLargeError",
        py.get_type::<SnapshotTooLargeError>(),
    )?;
    m.add("KeyEncodingError", py.get_type::<KeyEncodingError>())?;
    m.add("OutOfMemoryError", py.get_type::<OutOfMemoryError>())?;
    m.add("InternalError", py.get_type::<InternalError>())?;
    Ok(())
}
