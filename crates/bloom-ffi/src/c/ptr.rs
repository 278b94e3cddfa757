//! The raw pointers of the ABI, checked for null (and lengths for size) before they are
//! read: keys, key lists, paths, names, handles and out-parameters.

use std::ffi::{CStr, c_char};
use std::path::Path;
use std::ptr::NonNull;

use crate::error::Error;

/// A length a slice may have (`isize::MAX` bytes at most).
fn check_len(len: usize, what: &str) -> Result<(), Error> {
    if isize::try_from(len).is_err() {
        return Err(Error::invalid(format!(
            "{what}: length {len} is larger than any buffer"
        )));
    }
    Ok(())
}

/// The `len` bytes at `ptr`; `ptr` may be null when `len` is 0.
///
/// # Safety
/// Unless null, `ptr` points to `len` readable bytes that stay unchanged for `'a`.
pub(super) unsafe fn bytes<'a>(ptr: *const u8, len: usize, what: &str) -> Result<&'a [u8], Error> {
    if len == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(Error::invalid(format!(
            "{what} is null with a length of {len}"
        )));
    }
    check_len(len, what)?;
    // SAFETY: non-null, and the caller promises `len` readable bytes.
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// A NUL-terminated string.
///
/// # Safety
/// Unless null, `ptr` points to a NUL-terminated string that stays unchanged for `'a`.
unsafe fn c_str<'a>(ptr: *const c_char, what: &str) -> Result<&'a CStr, Error> {
    if ptr.is_null() {
        return Err(Error::invalid(format!("{what} is null")));
    }
    // SAFETY: non-null, and the caller promises a NUL-terminated string.
    Ok(unsafe { CStr::from_ptr(ptr) })
}

/// A path, as the bytes of a NUL-terminated string (any bytes but NUL on Unix).
///
/// # Safety
/// As [`c_str`].
pub(super) unsafe fn path<'a>(ptr: *const c_char, what: &str) -> Result<&'a Path, Error> {
    // SAFETY: forwarded.
    let text = unsafe { c_str(ptr, what) }?;
    if text.is_empty() {
        return Err(Error::invalid(format!("{what} is empty")));
    }
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt as _;
        Ok(Path::new(std::ffi::OsStr::from_bytes(text.to_bytes())))
    }
    #[cfg(not(unix))]
    {
        text.to_str()
            .map(Path::new)
            .map_err(|_| Error::invalid(format!("{what} is not UTF-8")))
    }
}

/// An optional UTF-8 name: `None` for null.
///
/// # Safety
/// As [`c_str`].
pub(super) unsafe fn name<'a>(ptr: *const c_char, what: &str) -> Result<Option<&'a str>, Error> {
    if ptr.is_null() {
        return Ok(None);
    }
    // SAFETY: forwarded.
    let text = unsafe { c_str(ptr, what) }?;
    text.to_str()
        .map(Some)
        .map_err(|_| Error::invalid(format!("{what} is not UTF-8")))
}

/// The object a handle points to.
///
/// # Safety
/// Unless null, `ptr` came from this library and was not freed, and no other thread writes
/// through it for `'a`.
pub(super) unsafe fn handle<'a, T>(ptr: *const T) -> Result<&'a T, Error> {
    // SAFETY: forwarded.
    unsafe { ptr.as_ref() }.ok_or_else(|| Error::invalid("the filter handle is null"))
}

/// The object a handle points to, for a call that changes it.
///
/// # Safety
/// Unless null, `ptr` came from this library and was not freed, and no other thread uses it
/// for `'a`.
pub(super) unsafe fn handle_mut<'a, T>(ptr: *mut T) -> Result<&'a mut T, Error> {
    // SAFETY: forwarded.
    unsafe { ptr.as_mut() }.ok_or_else(|| Error::invalid("the filter handle is null"))
}

/// An out-parameter, checked for null before the call does its work, and written only when
/// it succeeds.
pub(super) struct Out<T>(NonNull<T>);

impl<T> Out<T> {
    /// The out-parameter at `ptr`.
    ///
    /// # Safety
    /// Unless null, `ptr` is valid for a write of one `T` (aligned, not read by anyone else
    /// until the call returns).
    pub(super) unsafe fn new(ptr: *mut T, what: &str) -> Result<Self, Error> {
        NonNull::new(ptr)
            .map(Self)
            .ok_or_else(|| Error::invalid(format!("{what} is null")))
    }

    /// An optional out-parameter: `None` for null.
    ///
    /// # Safety
    /// As [`Out::new`].
    pub(super) unsafe fn optional(ptr: *mut T) -> Option<Self> {
        NonNull::new(ptr).map(Self)
    }

    /// Writes the result (without reading or dropping what was there).
    pub(super) fn write(self, value: T) {
        // SAFETY: `new` was given a pointer valid for one write.
        unsafe { self.0.as_ptr().write(value) }
    }
}

/// A list of `count` keys: `keys[i]` points to `lens[i]` bytes.
pub(super) struct KeyList<'a> {
    keys: &'a [*const u8],
    lens: &'a [usize],
}

impl<'a> KeyList<'a> {
    /// The list, every key checked (null only with length 0) before any is used.
    ///
    /// # Safety
    /// Unless null, `keys` and `lens` point to `count` elements each, and each `keys[i]`
    /// to `lens[i]` readable bytes, all unchanged for `'a`.
    pub(super) unsafe fn new(
        keys: *const *const u8,
        lens: *const usize,
        count: usize,
    ) -> Result<Self, Error> {
        if count == 0 {
            return Ok(Self {
                keys: &[],
                lens: &[],
            });
        }
        check_len(count.saturating_mul(size_of::<usize>()), "the key list")?;
        if keys.is_null() || lens.is_null() {
            return Err(Error::invalid(format!(
                "the key list of {count} keys has a null array of keys or of lengths"
            )));
        }
        // SAFETY: non-null, and the caller promises `count` elements each.
        let (keys, lens) = unsafe {
            (
                std::slice::from_raw_parts(keys, count),
                std::slice::from_raw_parts(lens, count),
            )
        };
        for (i, (&key, &len)) in keys.iter().zip(lens).enumerate() {
            if key.is_null() && len != 0 {
                return Err(Error::invalid(format!(
                    "key {i} of the list is null with a length of {len}"
                )));
            }
            check_len(len, "a key")?;
        }
        Ok(Self { keys, lens })
    }

    /// The keys, in order.
    pub(super) fn iter(&self) -> impl Iterator<Item = &'a [u8]> + Clone + use<'a> {
        let (keys, lens) = (self.keys, self.lens);
        keys.iter().zip(lens).map(|(&key, &len)| {
            if len == 0 {
                return &[][..];
            }
            // SAFETY: checked non-null in `new`, and the caller promised `len` bytes.
            unsafe { std::slice::from_raw_parts(key, len) }
        })
    }
}
