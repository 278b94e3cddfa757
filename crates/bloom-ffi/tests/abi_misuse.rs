//! The C ABI given what a careless or hostile caller gives it: null handles, keys and
//! out-parameters, unknown names, impossible plans, refused keys. Each gets its status and
//! a message, the out-parameters stay untouched, and nothing panics or leaks.

#![allow(unsafe_code)]

use std::ffi::CStr;
use std::ptr;

use bloom_ffi::c::*;

fn message() -> String {
    // SAFETY: the message is a NUL-terminated string owned by this thread.
    unsafe { CStr::from_ptr(bloom_last_error_message()) }
        .to_string_lossy()
        .into_owned()
}

#[test]
fn null_pointers_are_refused_with_a_message() {
    let mut filter: *mut BloomFilter = ptr::null_mut();
    let mut answer = false;
    // SAFETY: every pointer given is null or valid; null ones must be refused.
    unsafe {
        assert_eq!(
            bloom_filter_new(100, 0.01, ptr::null_mut()),
            BLOOM_ERR_INVALID_ARGUMENT
        );
        assert!(message().contains("out is null"), "{}", message());
        assert_eq!(
            bloom_filter_contains(ptr::null(), b"k".as_ptr(), 1, &raw mut answer),
            BLOOM_ERR_INVALID_ARGUMENT
        );
        assert_eq!(bloom_filter_new(100, 0.01, &raw mut filter), BLOOM_OK);
        assert!(!filter.is_null());
        // A key pointer that is null with a length.
        assert_eq!(
            bloom_filter_insert(filter, ptr::null(), 5, ptr::null_mut()),
            BLOOM_ERR_INVALID_ARGUMENT
        );
        assert!(message().contains("key is null"), "{}", message());
        // An empty key may be null.
        assert_eq!(
            bloom_filter_insert(filter, ptr::null(), 0, ptr::null_mut()),
            BLOOM_OK
        );
        assert_eq!(
            bloom_filter_contains(filter, ptr::null(), 0, &raw mut answer),
            BLOOM_OK
        );
        assert!(answer);
        // A batch with a null array, and with a null key in it.
        assert_eq!(
            bloom_filter_insert_batch(filter, ptr::null(), ptr::null(), 3, ptr::null_mut()),
            BLOOM_ERR_INVALID_ARGUMENT
        );
        let keys = [b"a".as_ptr(), ptr::null()];
        let lens = [1usize, 4];
        assert_eq!(
            bloom_filter_insert_batch(filter, keys.as_ptr(), lens.as_ptr(), 2, ptr::null_mut()),
            BLOOM_ERR_INVALID_ARGUMENT
        );
        assert!(message().contains("key 1"), "{}", message());
        // Nothing of a refused batch was inserted: it is checked whole first.
        assert_eq!(
            bloom_filter_contains(filter, b"a".as_ptr(), 1, &raw mut answer),
            BLOOM_OK
        );
        assert!(!answer);
        // A length no buffer has.
        assert_eq!(
            bloom_filter_contains(filter, b"a".as_ptr(), usize::MAX, &raw mut answer),
            BLOOM_ERR_INVALID_ARGUMENT
        );
        assert_eq!(
            bloom_filter_load(ptr::null(), 0, &raw mut filter),
            BLOOM_ERR_INVALID_ARGUMENT
        );
        assert_eq!(
            bloom_filter_save(filter, c"".as_ptr(), 0),
            BLOOM_ERR_INVALID_ARGUMENT
        );
        bloom_filter_free(filter);
        bloom_filter_free(ptr::null_mut());
        bloom_buffer_free(ptr::null_mut(), 0);
    }
}

#[test]
fn bad_options_and_keys_get_their_codes_and_leave_out_untouched() {
    let sentinel = ptr::dangling_mut::<BloomFilter>();
    let mut filter = sentinel;
    let mut options = bloom_options_default(1_000, 0.01);
    // SAFETY: the options' names are NUL-terminated literals; `filter` is valid for a write.
    unsafe {
        options.rule = c"no-such-rule".as_ptr();
        assert_eq!(
            bloom_filter_new_with(&raw const options, &raw mut filter),
            BLOOM_ERR_INVALID_ARGUMENT
        );
        assert!(message().contains("no-such-rule"), "{}", message());
        assert_eq!(filter, sentinel);

        options.rule = ptr::null();
        options.false_positive_rate = 1.5;
        assert_eq!(
            bloom_filter_new_with(&raw const options, &raw mut filter),
            BLOOM_ERR_INVALID_ARGUMENT
        );
        assert_eq!(filter, sentinel);

        // A struct from an older or foreign header.
        options.false_positive_rate = 0.01;
        options.size = 8;
        assert_eq!(
            bloom_filter_new_with(&raw const options, &raw mut filter),
            BLOOM_ERR_INVALID_ARGUMENT
        );
        assert!(message().contains("bloom_options_default"), "{}", message());
        // A struct from a newer header: options this library does not know are refused, not
        // ignored.
        options.size = size_of::<BloomOptions>() + 8;
        assert_eq!(
            bloom_filter_new_with(&raw const options, &raw mut filter),
            BLOOM_ERR_INVALID_ARGUMENT
        );
        assert!(message().contains("newer bloom.h"), "{}", message());
        options.size = size_of::<BloomOptions>();

        options.kind = c"counting".as_ptr();
        options.encoding = c"utf8".as_ptr();
        assert_eq!(
            bloom_filter_new_with(&raw const options, &raw mut filter),
            BLOOM_OK
        );
        let mut info: BloomHeaderInfo = std::mem::zeroed();
        assert_eq!(bloom_filter_header(filter, &raw mut info), BLOOM_OK);
        assert_eq!(
            CStr::from_ptr(info.kind.as_ptr()).to_str().unwrap(),
            "counting"
        );
        assert_eq!(
            CStr::from_ptr(info.encoding.as_ptr()).to_str().unwrap(),
            "utf8"
        );

        // Bytes that are not UTF-8, for a text encoding.
        let mut added = true;
        assert_eq!(
            bloom_filter_insert(filter, b"\xff".as_ptr(), 1, &raw mut added),
            BLOOM_ERR_KEY
        );
        assert!(added, "the out-parameter was written on failure");
        let keys = [b"ok".as_ptr(), b"\xfe".as_ptr()];
        let lens = [2usize, 1];
        let mut answers = [false; 2];
        assert_eq!(
            bloom_filter_contains_batch(
                filter,
                keys.as_ptr(),
                lens.as_ptr(),
                2,
                answers.as_mut_ptr()
            ),
            BLOOM_ERR_KEY
        );
        assert!(message().starts_with("key 1: "), "{}", message());

        // A counting filter removes; a plain one refuses to.
        assert_eq!(
            bloom_filter_insert(filter, b"gone".as_ptr(), 4, ptr::null_mut()),
            BLOOM_OK
        );
        assert_eq!(bloom_filter_remove(filter, b"gone".as_ptr(), 4), BLOOM_OK);
        let mut answer = true;
        assert_eq!(
            bloom_filter_contains(filter, b"gone".as_ptr(), 4, &raw mut answer),
            BLOOM_OK
        );
        assert!(!answer);
        assert_eq!(
            bloom_filter_remove(filter, b"never".as_ptr(), 5),
            BLOOM_ERR_INVALID_ARGUMENT
        );
        bloom_filter_free(filter);
        let mut plain: *mut BloomFilter = ptr::null_mut();
        assert_eq!(bloom_filter_new(10, 0.01, &raw mut plain), BLOOM_OK);
        assert_eq!(
            bloom_filter_remove(plain, b"x".as_ptr(), 1),
            BLOOM_ERR_INVALID_ARGUMENT
        );
        assert!(
            message().contains("only a counting filter"),
            "{}",
            message()
        );
        bloom_filter_free(plain);
    }
}

#[test]
fn a_buffer_round_trips_and_is_freed() {
    let mut filter: *mut BloomFilter = ptr::null_mut();
    let mut data: *mut u8 = ptr::null_mut();
    let mut len = 0usize;
    // SAFETY: every pointer is valid for what it is used for.
    unsafe {
        assert_eq!(bloom_filter_new(500, 0.001, &raw mut filter), BLOOM_OK);
        assert_eq!(
            bloom_filter_insert(filter, b"x".as_ptr(), 1, ptr::null_mut()),
            BLOOM_OK
        );
        assert_eq!(
            bloom_filter_to_buffer(filter, 42, &raw mut data, &raw mut len),
            BLOOM_OK
        );
        let mut back: *mut BloomFilter = ptr::null_mut();
        assert_eq!(
            bloom_filter_load_buffer(data, len, 0, &raw mut back),
            BLOOM_OK
        );
        let mut info: BloomHeaderInfo = std::mem::zeroed();
        assert_eq!(bloom_filter_header(back, &raw mut info), BLOOM_OK);
        assert_eq!(info.dataset_generation, 42);
        assert_eq!(info.items, 1);
        let mut answer = false;
        assert_eq!(
            bloom_filter_contains(back, b"x".as_ptr(), 1, &raw mut answer),
            BLOOM_OK
        );
        assert!(answer);
        bloom_buffer_free(data, len);
        bloom_filter_free(back);
        bloom_filter_free(filter);
    }
}
