//! Status codes, the per-thread message of the last failure, and [`guard`]: the one place
//! where a call's result (or a panic) becomes a status.

use std::cell::RefCell;
use std::ffi::{CString, c_char};
use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::error::{Error, ErrorKind};

/// What a call returns: [`BLOOM_OK`] (0), or one of the `BLOOM_ERR_*` codes. The codes never
/// change meaning; a later version may add codes, so treat an unknown one as a failure.
pub type BloomStatus = i32;

/// Success.
pub const BLOOM_OK: BloomStatus = 0;
/// An argument is invalid: a null pointer, a parameter out of range, an unknown name.
pub const BLOOM_ERR_INVALID_ARGUMENT: BloomStatus = 1;
/// The file could not be read or written (missing, no permission, not a regular file).
pub const BLOOM_ERR_IO: BloomStatus = 2;
/// The bytes are not a bloom snapshot at all.
pub const BLOOM_ERR_NOT_A_SNAPSHOT: BloomStatus = 3;
/// The snapshot is damaged (truncated, checksum mismatch, invalid field): never trust it.
pub const BLOOM_ERR_CORRUPT: BloomStatus = 4;
/// The snapshot uses a version, rule, layout or encoding this build does not implement.
pub const BLOOM_ERR_UNSUPPORTED: BloomStatus = 5;
/// The snapshot's payload is over the limit it was read with.
pub const BLOOM_ERR_TOO_LARGE: BloomStatus = 6;
/// A key was refused: the filter's encoding takes text and the bytes are not UTF-8.
pub const BLOOM_ERR_KEY: BloomStatus = 7;
/// Memory could not be allocated.
pub const BLOOM_ERR_OUT_OF_MEMORY: BloomStatus = 8;
/// A bug in bloom (a caught panic): free the handle it happened on and report it.
pub const BLOOM_ERR_INTERNAL: BloomStatus = 9;

thread_local! {
    /// The message of the calling thread's last failure.
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// Records `error` as the calling thread's last failure and returns its status.
fn fail(error: &Error) -> BloomStatus {
    // A message never holds NUL (a path could): C would see it cut short.
    let text = error.to_string().replace('\0', "\u{fffd}");
    let message = CString::new(text).unwrap_or_default();
    // During the thread's teardown the message is lost, never a panic.
    let _ = LAST_ERROR.try_with(|last| *last.borrow_mut() = message);
    error.kind().code()
}

/// Runs one call of the ABI: its result becomes a status (and, on failure, the thread's
/// message); a panic is caught and becomes [`BLOOM_ERR_INTERNAL`], never unwinding into C.
pub(super) fn guard(call: impl FnOnce() -> Result<(), Error>) -> BloomStatus {
    match catch_unwind(AssertUnwindSafe(call)) {
        Ok(Ok(())) => BLOOM_OK,
        Ok(Err(e)) => fail(&e),
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            fail(&Error::new(
                ErrorKind::Internal,
                format!(
                    "internal error in bloom ({what}); free the handle, and please report this"
                ),
            ))
        }
    }
}

/// The message of the last failed call on the calling thread, as UTF-8 text ending in NUL;
/// an empty string when no call failed yet. Never null.
///
/// Thread safety: each thread has its own message. The pointer stays valid until the next
/// failing call on the same thread; copy the text to keep it.
#[unsafe(no_mangle)]
pub extern "C" fn bloom_last_error_message() -> *const c_char {
    LAST_ERROR
        .try_with(|last| last.borrow().as_ptr())
        .unwrap_or(c"".as_ptr())
}

/// The stable name of a status (`"ok"`, `"invalid-argument"`, `"io"`, `"not-a-snapshot"`,
/// `"corrupt"`, `"unsupported"`, `"too-large"`, `"key"`, `"out-of-memory"`, `"internal"`),
/// or `"unknown"`. A static string: never freed, never null.
///
/// Thread safety: safe from any thread.
#[unsafe(no_mangle)]
pub extern "C" fn bloom_status_name(status: BloomStatus) -> *const c_char {
    let name = match ErrorKind::from_code(status) {
        _ if status == BLOOM_OK => c"ok",
        Some(kind) => kind.c_name(),
        None => c"unknown",
    };
    name.as_ptr()
}

/// This library's version, as `"MAJOR.MINOR.PATCH"`. A static string.
///
/// Thread safety: safe from any thread.
#[unsafe(no_mangle)]
pub extern "C" fn bloom_version() -> *const c_char {
    const VERSION: &std::ffi::CStr = match std::ffi::CStr::from_bytes_with_nul(
        concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes(),
    ) {
        Ok(v) => v,
        Err(_) => c"unknown",
    };
    VERSION.as_ptr()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_constants_are_the_error_kinds_codes() {
        let constants = [
            (BLOOM_ERR_INVALID_ARGUMENT, ErrorKind::InvalidArgument),
            (BLOOM_ERR_IO, ErrorKind::Io),
            (BLOOM_ERR_NOT_A_SNAPSHOT, ErrorKind::NotASnapshot),
            (BLOOM_ERR_CORRUPT, ErrorKind::Corrupt),
            (BLOOM_ERR_UNSUPPORTED, ErrorKind::Unsupported),
            (BLOOM_ERR_TOO_LARGE, ErrorKind::TooLarge),
            (BLOOM_ERR_KEY, ErrorKind::Key),
            (BLOOM_ERR_OUT_OF_MEMORY, ErrorKind::OutOfMemory),
            (BLOOM_ERR_INTERNAL, ErrorKind::Internal),
        ];
        assert_eq!(constants.len(), ErrorKind::ALL.len());
        for (code, kind) in constants {
            assert_eq!(code, kind.code());
            // SAFETY: bloom_status_name returns a static NUL-terminated string.
            let name = unsafe { std::ffi::CStr::from_ptr(bloom_status_name(code)) };
            assert_eq!(name.to_str().unwrap(), kind.name());
        }
    }

    #[test]
    fn a_panic_becomes_the_internal_status_with_a_message() {
        let status = guard(|| panic!("boom"));
        assert_eq!(status, BLOOM_ERR_INTERNAL);
        // SAFETY: the message is a NUL-terminated string owned by this thread.
        let message = unsafe { std::ffi::CStr::from_ptr(bloom_last_error_message()) };
        assert!(message.to_str().unwrap().contains("boom"));
    }
}
