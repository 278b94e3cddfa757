//! The filter handle: created from a plan ([`bloom_filter_new`], [`bloom_filter_new_with`]),
//! keys in and out one at a time or a list at a time, its header, and
//! [`bloom_filter_free`].

use std::ffi::c_char;

use super::ptr::{self, KeyList, Out};
use super::snapshot::BloomHeaderInfo;
use super::status::{BloomStatus, guard};
use crate::create::FilterOptions;
use crate::error::Error;
use crate::handle::Handle;

/// A filter: plain, counting or scalable, created or loaded. Opaque; free it with
/// [`bloom_filter_free`].
///
/// Thread safety: calls that take a `const BloomFilter *` only read it, and may run on many
/// threads at once on the same handle. A call that takes a `BloomFilter *` (insert, free)
/// needs the handle to itself: no other call on the same handle may run at the same time
/// (guard it with a lock, or give each thread its own filter).
pub struct BloomFilter(pub(super) Handle);

impl BloomFilter {
    /// A new handle, boxed for C.
    pub(super) fn boxed(handle: Handle) -> *mut Self {
        Box::into_raw(Box::new(Self(handle)))
    }
}

/// The options of a new filter. Start from [`bloom_options_default`] and change what you
/// need; a null name means the default.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BloomOptions {
    /// `sizeof(BloomOptions)`, as [`bloom_options_default`] sets it: a later version may add
    /// fields at the end and read only those the caller's struct has; a library older than the
    /// caller's header refuses the options rather than ignore fields it does not know.
    pub size: usize,
    /// The keys the filter is planned to hold (a scalable filter: its first stage); at least 1.
    pub expected_items: u64,
    /// The false-positive rate planned for, above 0 and below 1 (a scalable filter: the whole
    /// chain's bound).
    pub false_positive_rate: f64,
    /// `"plain"` (null), `"counting"` or `"scalable"`.
    pub kind: *const c_char,
    /// The position rule's name (`"xxh3-128"`, `"sha256-double"`, ...), or null for the
    /// default (`sha256-double` when salted).
    pub rule: *const c_char,
    /// The layout's name (`"standard"`, `"blocked-512"`, `"split-block-512"`, ...), or null
    /// for the default for the rate.
    pub layout: *const c_char,
    /// The key encoding's name (`"nfc"`, `"utf8"`, `"bytes"`, `"nfc-trim-lower"`,
    /// `"utf16le"`), or null for NFC.
    pub encoding: *const c_char,
    /// A secret salt of `salt_len` bytes, or null for none.
    pub salt: *const u8,
    /// The salt's length in bytes.
    pub salt_len: usize,
    /// The most payload bytes a scalable filter may grow to (0: 1 GiB, the size a load reads
    /// by default), so that what it saves can be loaded again. For another kind it must be 0
    /// (`BLOOM_ERR_INVALID_ARGUMENT` otherwise): a filter of a plan has the plan's size.
    pub max_payload_bytes: u64,
}

/// The default options for `expected_items` keys at `false_positive_rate`: a plain filter,
/// the default rule and layout, NFC keys, no salt.
///
/// Thread safety: safe from any thread.
#[unsafe(no_mangle)]
pub extern "C" fn bloom_options_default(
    expected_items: u64,
    false_positive_rate: f64,
) -> BloomOptions {
    BloomOptions {
        size: size_of::<BloomOptions>(),
        expected_items,
        false_positive_rate,
        kind: std::ptr::null(),
        rule: std::ptr::null(),
        layout: std::ptr::null(),
        encoding: std::ptr::null(),
        salt: std::ptr::null(),
        salt_len: 0,
        max_payload_bytes: 0,
    }
}

/// A new, empty plain filter with the defaults, planned for `expected_items` keys at
/// `false_positive_rate` (as `bloom build --items N --fpr P`). On success `*out` is the new
/// handle.
///
/// Thread safety: safe from any thread.
///
/// # Safety
/// `out` is null (refused) or valid for writing one pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn bloom_filter_new(
    expected_items: u64,
    false_positive_rate: f64,
    out: *mut *mut BloomFilter,
) -> BloomStatus {
    let options = bloom_options_default(expected_items, false_positive_rate);
    // SAFETY: forwarded; the options hold no pointers.
    unsafe { bloom_filter_new_with(&raw const options, out) }
}

/// A new, empty filter as `options` say. On success `*out` is the new handle.
///
/// Thread safety: safe from any thread.
///
/// # Safety
/// `options` is null (refused) or points to a `BloomOptions` whose non-null names are
/// NUL-terminated strings and whose salt, unless null, has `salt_len` bytes; `out` is null
/// (refused) or valid for writing one pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn bloom_filter_new_with(
    options: *const BloomOptions,
    out: *mut *mut BloomFilter,
) -> BloomStatus {
    guard(|| {
        // SAFETY: the caller's promises, forwarded.
        let out = unsafe { Out::new(out, "out") }?;
        let given = unsafe { options.as_ref() }.ok_or_else(|| Error::invalid("options is null"))?;
        if given.size != size_of::<BloomOptions>() {
            let why = if given.size > size_of::<BloomOptions>() {
                "the caller was built against a newer bloom.h, whose options this library cannot honour"
            } else {
                "start from bloom_options_default"
            };
            return Err(Error::invalid(format!(
                "options.size is {}, not sizeof(BloomOptions) ({}): {why}",
                given.size,
                size_of::<BloomOptions>()
            )));
        }
        let mut options = FilterOptions::new(given.expected_items, given.false_positive_rate);
        options.max_payload_bytes = given.max_payload_bytes;
        if let Some(kind) = unsafe { ptr::name(given.kind, "options.kind") }? {
            options.kind = kind.parse()?;
        }
        if let Some(rule) = unsafe { ptr::name(given.rule, "options.rule") }? {
            options.rule_named(rule)?;
        }
        if let Some(layout) = unsafe { ptr::name(given.layout, "options.layout") }? {
            options.layout_named(layout)?;
        }
        if let Some(encoding) = unsafe { ptr::name(given.encoding, "options.encoding") }? {
            options.encoding_named(encoding)?;
        }
        let salt = unsafe { ptr::bytes(given.salt, given.salt_len, "options.salt") }?;
        options.salt_bytes(salt)?;
        out.write(BloomFilter::boxed(Handle::create(&options)?));
        Ok(())
    })
}

/// Frees a filter. Null is allowed and does nothing.
///
/// Thread safety: no other call may use the handle at the same time, or after.
///
/// # Safety
/// `filter` is null or a handle from this library that was not freed yet.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn bloom_filter_free(filter: *mut BloomFilter) {
    if !filter.is_null() {
        // SAFETY: the caller promises a live handle of ours, which `boxed` made.
        drop(unsafe { Box::from_raw(filter) });
    }
}

/// Inserts the `len` bytes at `key` (null only when `len` is 0). A text encoding (every one
/// but `bytes`) takes the bytes as UTF-8 text and refuses other bytes with `BLOOM_ERR_KEY`.
/// On success, `*added` (unless `added` is null) says whether the key changed the filter:
/// `false` means it may have been there already.
///
/// Thread safety: needs the handle to itself.
///
/// # Safety
/// `filter` is a live handle (or null, refused); `key` points to `len` readable bytes (or is
/// null with `len` 0); `added` is null or valid for writing one `bool`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn bloom_filter_insert(
    filter: *mut BloomFilter,
    key: *const u8,
    len: usize,
    added: *mut bool,
) -> BloomStatus {
    guard(|| {
        // SAFETY: the caller's promises, forwarded.
        let filter = unsafe { ptr::handle_mut(filter) }?;
        let key = unsafe { ptr::bytes(key, len, "key") }?;
        let added = unsafe { Out::optional(added) };
        let changed = filter.0.insert(key)?;
        if let Some(added) = added {
            added.write(changed);
        }
        Ok(())
    })
}

/// Whether the `len` bytes at `key` may have been inserted: on success `*answer` is `false`
/// when the key is definitely absent, `true` when it may be present ("maybe" is not "yes":
/// confirm with your primary store before treating the key as seen).
///
/// Thread safety: reads only; safe on many threads at once.
///
/// # Safety
/// `filter` is a live handle (or null, refused); `key` points to `len` readable bytes (or is
/// null with `len` 0); `answer` is valid for writing one `bool` (or null, refused).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn bloom_filter_contains(
    filter: *const BloomFilter,
    key: *const u8,
    len: usize,
    answer: *mut bool,
) -> BloomStatus {
    guard(|| {
        // SAFETY: the caller's promises, forwarded.
        let filter = unsafe { ptr::handle(filter) }?;
        let key = unsafe { ptr::bytes(key, len, "key") }?;
        let answer = unsafe { Out::new(answer, "answer") }?;
        answer.write(filter.0.contains(key)?);
        Ok(())
    })
}

/// Inserts `count` keys: `keys[i]` points to `lens[i]` bytes. Faster than one call per key:
/// keys are hashed a batch at a time. On success `*added` (unless null) is how many keys
/// changed the filter. A key a text encoding refuses stops the call with `BLOOM_ERR_KEY`,
/// after the keys before it were inserted; the message names its index.
///
/// Thread safety: needs the handle to itself.
///
/// # Safety
/// `filter` is a live handle (or null, refused); `keys` and `lens` point to `count` elements
/// each (or are null with `count` 0), and each `keys[i]` to `lens[i]` readable bytes;
/// `added` is null or valid for writing one `uint64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn bloom_filter_insert_batch(
    filter: *mut BloomFilter,
    keys: *const *const u8,
    lens: *const usize,
    count: usize,
    added: *mut u64,
) -> BloomStatus {
    guard(|| {
        // SAFETY: the caller's promises, forwarded.
        let filter = unsafe { ptr::handle_mut(filter) }?;
        let list = unsafe { KeyList::new(keys, lens, count) }?;
        let added = unsafe { Out::optional(added) };
        let changed = filter.0.insert_all(list.iter())?;
        if let Some(added) = added {
            added.write(changed);
        }
        Ok(())
    })
}

/// Answers `count` keys: `answers[i]` is whether `keys[i]` (of `lens[i]` bytes) may have
/// been inserted, as [`bloom_filter_contains`] answers it. Faster than one call per key. A
/// key a text encoding refuses stops the call with `BLOOM_ERR_KEY` (the message names its
/// index); the answers before it are then written, the rest not (the one exception to
/// out-parameters being untouched on failure).
///
/// Thread safety: reads only; safe on many threads at once.
///
/// # Safety
/// `filter` is a live handle (or null, refused); `keys` and `lens` point to `count` elements
/// each, and each `keys[i]` to `lens[i]` readable bytes; `answers` is valid for writing
/// `count` `bool`s (each may be null with `count` 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn bloom_filter_contains_batch(
    filter: *const BloomFilter,
    keys: *const *const u8,
    lens: *const usize,
    count: usize,
    answers: *mut bool,
) -> BloomStatus {
    guard(|| {
        // SAFETY: the caller's promises, forwarded.
        let filter = unsafe { ptr::handle(filter) }?;
        let list = unsafe { KeyList::new(keys, lens, count) }?;
        if count == 0 {
            return Ok(());
        }
        if answers.is_null() {
            return Err(Error::invalid("answers is null"));
        }
        let mut at = answers;
        filter.0.contains_each(list.iter(), |maybe| {
            // SAFETY: non-null, and the caller promises room for `count` answers, one per
            // key; each is written (never read) through the raw pointer.
            unsafe {
                at.write(maybe);
                at = at.add(1);
            }
        })
    })
}

/// Removes the `len` bytes at `key` from a counting filter: `BLOOM_ERR_INVALID_ARGUMENT` for
/// another kind of filter, or for a key it says is absent (or cannot tell). A snapshot saved
/// after a removal is no longer bound to the store the filter was loaded with (the store
/// still holds the key, as far as that history says).
///
/// Thread safety: needs the handle to itself.
///
/// # Safety
/// `filter` is a live handle (or null, refused); `key` points to `len` readable bytes (or is
/// null with `len` 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn bloom_filter_remove(
    filter: *mut BloomFilter,
    key: *const u8,
    len: usize,
) -> BloomStatus {
    guard(|| {
        // SAFETY: the caller's promises, forwarded.
        let filter = unsafe { ptr::handle_mut(filter) }?;
        let key = unsafe { ptr::bytes(key, len, "key") }?;
        filter.0.remove(key)
    })
}

/// What a snapshot of the filter would record, without writing one: its kind, size, rule,
/// layout, encoding, item count, plan, and the dataset generation it was loaded with (0 for
/// a new filter).
///
/// Thread safety: reads only; safe on many threads at once.
///
/// # Safety
/// `filter` is a live handle (or null, refused); `info` is valid for writing one
/// `BloomHeaderInfo` (or null, refused).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn bloom_filter_header(
    filter: *const BloomFilter,
    info: *mut BloomHeaderInfo,
) -> BloomStatus {
    guard(|| {
        // SAFETY: the caller's promises, forwarded.
        let filter = unsafe { ptr::handle(filter) }?;
        let info = unsafe { Out::new(info, "info") }?;
        info.write(BloomHeaderInfo::from_info(&filter.0.info()));
        Ok(())
    })
}
