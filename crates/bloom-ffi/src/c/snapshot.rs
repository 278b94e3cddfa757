//! Snapshots through the C ABI: load from a path or a buffer, save to a path or a buffer
//! (freed with [`bloom_buffer_free`]), verify, and inspect a header ([`BloomHeaderInfo`]).

use std::ffi::c_char;

use super::filter::BloomFilter;
use super::ptr::{self, Out};
use super::status::{BloomStatus, guard};
use crate::error::Error;
use crate::handle::Handle;
use crate::snapshots::{self, HeaderInfo, Source};

/// A name of a header field, NUL-terminated, in a fixed array: nothing to free.
pub type BloomName = [c_char; 32];

/// What a snapshot header says. Names are NUL-terminated UTF-8 in fixed arrays: nothing to
/// free.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BloomHeaderInfo {
    /// The format version (1, 2 or 3).
    pub format_version: u16,
    /// `"plain"`, `"counting"` or `"scalable"`.
    pub kind: BloomName,
    /// The position rule's name.
    pub rule: BloomName,
    /// The layout's name.
    pub layout: BloomName,
    /// The key encoding's name.
    pub encoding: BloomName,
    /// Bits `m` (counters for a counting filter; all stages' for a scalable one).
    pub bits: u64,
    /// Positions per key `k`.
    pub hashes: u32,
    /// Whether the filter is salted (the salt itself is never reported).
    pub salted: bool,
    /// Whether the snapshot is bound to a primary store.
    pub store_bound: bool,
    /// Whether a plan is recorded (`plan_capacity`, `plan_false_positive_rate`).
    pub has_plan: bool,
    /// The dataset generation the bits cover.
    pub dataset_generation: u64,
    /// The items the filter counted.
    pub items: u64,
    /// The payload's length in bytes.
    pub payload_len: u64,
    /// The planned capacity (0 without a plan).
    pub plan_capacity: u64,
    /// The planned false-positive rate (0 without a plan).
    pub plan_false_positive_rate: f64,
}

/// `name` as a fixed, NUL-terminated array (cut short if ever longer than 31 bytes).
fn c_name(name: &str) -> BloomName {
    let mut out: BloomName = [0; 32];
    for (slot, &byte) in out.iter_mut().zip(name.as_bytes().iter().take(31)) {
        *slot = byte as c_char;
    }
    out
}

impl BloomHeaderInfo {
    /// The C form of a header's values.
    pub(super) fn from_info(info: &HeaderInfo) -> Self {
        let (has_plan, (plan_capacity, plan_false_positive_rate)) = match info.plan {
            Some(plan) => (true, plan),
            None => (false, (0, 0.0)),
        };
        Self {
            format_version: info.format_version,
            kind: c_name(info.kind),
            rule: c_name(info.rule),
            layout: c_name(info.layout),
            encoding: c_name(info.encoding),
            bits: info.bits,
            hashes: info.hashes,
            salted: info.salted,
            store_bound: info.store_bound,
            has_plan,
            dataset_generation: info.dataset_generation,
            items: info.items,
            payload_len: info.payload_len,
            plan_capacity,
            plan_false_positive_rate,
        }
    }
}

/// For [`bloom_filter_save`] and [`bloom_filter_to_buffer`]: record the dataset generation the
/// filter was loaded with (and keep its store binding).
pub const BLOOM_KEEP_GENERATION: u64 = 0xFFFF_FFFF_FFFF_FFFF;

/// A generation given to a save: [`BLOOM_KEEP_GENERATION`] for the loaded one.
fn generation(given: u64) -> Option<u64> {
    (given != BLOOM_KEEP_GENERATION).then_some(given)
}

/// Loads the snapshot at `path` (plain, counting or scalable): every byte is checked (both
/// checksums, every field) before the filter is handed out, and a payload over
/// `max_payload_bytes` (0: the default, 1 GiB) is refused before anything is allocated. On
/// success `*out` is the new handle, which answers exactly as the filter that wrote the file.
///
/// `max_payload_bytes` limits only what is read. It does not limit how far a loaded
/// scalable filter grows: that limit is not recorded in a snapshot, so a loaded one may grow
/// to 1 GiB (what a new one may by default), or to `max_payload_bytes` when that is larger
/// (so that what is saved loads again with the same limit), and never less than it holds.
///
/// Thread safety: safe from any thread.
///
/// # Safety
/// `path` is a NUL-terminated string (or null, refused); `out` is valid for writing one
/// pointer (or null, refused).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn bloom_filter_load(
    path: *const c_char,
    max_payload_bytes: u64,
    out: *mut *mut BloomFilter,
) -> BloomStatus {
    guard(|| {
        // SAFETY: the caller's promises, forwarded.
        let (path, out) = unsafe { (ptr::path(path, "path")?, Out::new(out, "out")?) };
        load_into(Source::Path(path), max_payload_bytes, out)
    })
}

/// Loads a snapshot from the `len` bytes at `data`, as [`bloom_filter_load`] does. The
/// bytes are copied: the buffer may be freed after the call. A limit as tight as `len`
/// refuses nothing this buffer holds, and a scalable filter loaded with it still grows (see
/// [`bloom_filter_load`]).
///
/// Thread safety: safe from any thread.
///
/// # Safety
/// `data` points to `len` readable bytes (or is null with `len` 0); `out` is valid for
/// writing one pointer (or null, refused).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn bloom_filter_load_buffer(
    data: *const u8,
    len: usize,
    max_payload_bytes: u64,
    out: *mut *mut BloomFilter,
) -> BloomStatus {
    guard(|| {
        // SAFETY: the caller's promises, forwarded.
        let (data, out) = unsafe { (ptr::bytes(data, len, "data")?, Out::new(out, "out")?) };
        load_into(Source::Bytes(data), max_payload_bytes, out)
    })
}

/// Saves a snapshot of the filter to `path`, recording `dataset_generation` (the generation
/// of the primary store these bits fully cover; 0 for a filter tied to no store), or with
/// [`BLOOM_KEEP_GENERATION`] the one it was loaded with. A snapshot loaded bound to a store
/// stays bound while its generation is kept (more keys only add false positives), as
/// `bloom add` does; at another generation the binding is dropped. The write is atomic:
/// `path` holds the old file or the new one, never a mix, whatever happens. An existing file
/// that is not a snapshot is never replaced (`BLOOM_ERR_IO`). The handle is not changed.
///
/// Thread safety: reads the filter only; safe on many threads at once (two saves to the same
/// path: the last rename wins, each file whole).
///
/// # Safety
/// `filter` is a live handle (or null, refused); `path` is a NUL-terminated string (or
/// null, refused).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn bloom_filter_save(
    filter: *const BloomFilter,
    path: *const c_char,
    dataset_generation: u64,
) -> BloomStatus {
    guard(|| {
        // SAFETY: the caller's promises, forwarded.
        let filter = unsafe { ptr::handle(filter) }?;
        let path = unsafe { ptr::path(path, "path") }?;
        filter
            .0
            .save(path, generation(dataset_generation))
            .map(drop)
    })
}

/// A snapshot of the filter in a new buffer, recording `dataset_generation` as
/// [`bloom_filter_save`] does: on success
/// `*data` and `*len` are the buffer, which the caller frees with [`bloom_buffer_free`].
///
/// Thread safety: reads the filter only; safe on many threads at once.
///
/// # Safety
/// `filter` is a live handle (or null, refused); `data` and `len` are valid for writing one
/// pointer and one `size_t` (or null, refused).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn bloom_filter_to_buffer(
    filter: *const BloomFilter,
    dataset_generation: u64,
    data: *mut *mut u8,
    len: *mut usize,
) -> BloomStatus {
    guard(|| {
        // SAFETY: the caller's promises, forwarded.
        let filter = unsafe { ptr::handle(filter) }?;
        let data = unsafe { Out::new(data, "data") }?;
        let len = unsafe { Out::new(len, "len") }?;
        let bytes = filter
            .0
            .to_bytes(generation(dataset_generation))?
            .into_boxed_slice();
        len.write(bytes.len());
        data.write(Box::into_raw(bytes).cast::<u8>());
        Ok(())
    })
}

/// Frees a buffer from [`bloom_filter_to_buffer`], given with the length it came with (any
/// other length is undefined behaviour). Null is allowed and does nothing.
///
/// Thread safety: no other call may use the buffer at the same time, or after.
///
/// # Safety
/// `data` is null or a buffer from [`bloom_filter_to_buffer`] not freed yet, and `len` its
/// length.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn bloom_buffer_free(data: *mut u8, len: usize) {
    if !data.is_null() {
        let slice = std::ptr::slice_from_raw_parts_mut(data, len);
        // SAFETY: the caller promises a live buffer of ours and its length: a boxed slice.
        drop(unsafe { Box::from_raw(slice) });
    }
}

/// Checks the snapshot at `path` completely (both checksums, every field, nothing after the
/// payload) in constant memory, as `bloom verify` does: `BLOOM_OK` only for an intact
/// snapshot. On success `*info` (unless null) is its header.
///
/// Thread safety: safe from any thread.
///
/// # Safety
/// `path` is a NUL-terminated string (or null, refused); `info` is null or valid for
/// writing one `BloomHeaderInfo`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn bloom_verify(
    path: *const c_char,
    max_payload_bytes: u64,
    info: *mut BloomHeaderInfo,
) -> BloomStatus {
    guard(|| {
        // SAFETY: the caller's promises, forwarded.
        let (path, info) = unsafe { (ptr::path(path, "path")?, Out::optional(info)) };
        header_into(
            snapshots::verify,
            Source::Path(path),
            max_payload_bytes,
            info,
        )
    })
}

/// [`bloom_verify`] for the `len` bytes at `data`.
///
/// Thread safety: safe from any thread.
///
/// # Safety
/// `data` points to `len` readable bytes (or is null with `len` 0); `info` is null or valid
/// for writing one `BloomHeaderInfo`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn bloom_verify_buffer(
    data: *const u8,
    len: usize,
    max_payload_bytes: u64,
    info: *mut BloomHeaderInfo,
) -> BloomStatus {
    guard(|| {
        // SAFETY: the caller's promises, forwarded.
        let (data, info) = unsafe { (ptr::bytes(data, len, "data")?, Out::optional(info)) };
        header_into(
            snapshots::verify,
            Source::Bytes(data),
            max_payload_bytes,
            info,
        )
    })
}

/// Reads the header of the snapshot at `path` (its checksum checked; the payload is not
/// read, so this is no verification): on success `*info` is what it says.
///
/// Thread safety: safe from any thread.
///
/// # Safety
/// `path` is a NUL-terminated string (or null, refused); `info` is valid for writing one
/// `BloomHeaderInfo` (or null, refused).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn bloom_inspect(
    path: *const c_char,
    max_payload_bytes: u64,
    info: *mut BloomHeaderInfo,
) -> BloomStatus {
    guard(|| {
        // SAFETY: the caller's promises, forwarded.
        let (path, info) = unsafe { (ptr::path(path, "path")?, Out::new(info, "info")?) };
        header_into(
            snapshots::inspect,
            Source::Path(path),
            max_payload_bytes,
            Some(info),
        )
    })
}

/// [`bloom_inspect`] for the `len` bytes at `data`.
///
/// Thread safety: safe from any thread.
///
/// # Safety
/// `data` points to `len` readable bytes (or is null with `len` 0); `info` is valid for
/// writing one `BloomHeaderInfo` (or null, refused).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn bloom_inspect_buffer(
    data: *const u8,
    len: usize,
    max_payload_bytes: u64,
    info: *mut BloomHeaderInfo,
) -> BloomStatus {
    guard(|| {
        // SAFETY: the caller's promises, forwarded.
        let (data, info) = unsafe { (ptr::bytes(data, len, "data")?, Out::new(info, "info")?) };
        header_into(
            snapshots::inspect,
            Source::Bytes(data),
            max_payload_bytes,
            Some(info),
        )
    })
}

/// Loads the snapshot of `source` into a new handle, written to `out`.
fn load_into(
    source: Source<'_>,
    max_payload_bytes: u64,
    out: Out<*mut BloomFilter>,
) -> Result<(), Error> {
    out.write(BloomFilter::boxed(Handle::load(source, max_payload_bytes)?));
    Ok(())
}

/// Reads the header of `source` with `read` (verifying or inspecting it), and writes its C
/// form to an optional out-parameter.
fn header_into(
    read: fn(Source<'_>, u64) -> Result<HeaderInfo, Error>,
    source: Source<'_>,
    max_payload_bytes: u64,
    out: Option<Out<BloomHeaderInfo>>,
) -> Result<(), Error> {
    let info = read(source, max_payload_bytes)?;
    if let Some(out) = out {
        out.write(BloomHeaderInfo::from_info(&info));
    }
    Ok(())
}
