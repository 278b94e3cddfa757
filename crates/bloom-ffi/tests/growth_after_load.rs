//! A read limit limits what is read, never how far a loaded chain grows: a scalable filter
//! loaded with the tightest limit its snapshot allows (through the C ABI's buffer and path
//! loads, and through `Handle`) keeps adding stages, stays within its plan, and keeps the
//! false-positive rate it was planned for.

#![allow(unsafe_code)]

use std::ffi::{CStr, CString};
use std::ptr;

use bloom_core::Filter;
use bloom_ffi::c::*;
use bloom_ffi::{FilterKind, FilterOptions, Handle, Source};

const FPR: f64 = 0.01;
const INSERTED: u64 = 100_000;
const ABSENT: u64 = 100_000;

/// The most false positives among `ABSENT` keys a chain planned for `FPR` may give: the
/// binomial mean at the target rate plus six standard deviations (a chain's real rate is at
/// or below its target). A chain that cannot grow answers "maybe" for nearly every key.
fn most_false_positives() -> u64 {
    let n = ABSENT as f64;
    (n * FPR + 6.0 * (n * FPR * (1.0 - FPR)).sqrt()).ceil() as u64
}

fn message() -> String {
    // SAFETY: the message is a NUL-terminated string owned by this thread.
    unsafe { CStr::from_ptr(bloom_last_error_message()) }
        .to_string_lossy()
        .into_owned()
}

/// A scalable filter of 1,000 keys' first stage holding 1,000 keys (full), as a snapshot.
fn full_chain_snapshot() -> Vec<u8> {
    let mut options = FilterOptions::new(1_000, FPR);
    options.kind = FilterKind::Scalable;
    let mut handle = Handle::create(&options).unwrap();
    handle
        .insert_all((0..1_000).map(|i| format!("first-{i}")))
        .unwrap();
    handle.to_bytes(None).unwrap()
}

/// Inserts `INSERTED` keys through the C ABI, then counts the "maybe"s among `ABSENT` keys
/// never inserted; returns them with the header after the inserts.
fn grow_through_c(filter: *mut BloomFilter) -> (u64, BloomHeaderInfo) {
    let mut false_positives = 0;
    // SAFETY: `filter` is a live handle of this test; keys and out-parameters are valid.
    unsafe {
        for i in 0..INSERTED {
            let key = format!("inserted-{i}");
            let s = bloom_filter_insert(filter, key.as_ptr(), key.len(), ptr::null_mut());
            assert_eq!(s, BLOOM_OK, "{}", message());
        }
        for i in 0..ABSENT {
            let key = format!("absent-{i}");
            let mut maybe = true;
            let s = bloom_filter_contains(filter, key.as_ptr(), key.len(), &raw mut maybe);
            assert_eq!(s, BLOOM_OK, "{}", message());
            false_positives += u64::from(maybe);
        }
        let mut info = std::mem::MaybeUninit::<BloomHeaderInfo>::uninit();
        assert_eq!(bloom_filter_header(filter, info.as_mut_ptr()), BLOOM_OK);
        (false_positives, info.assume_init())
    }
}

/// Grows the loaded chain `filter` through the C ABI ([`grow_through_c`]), frees it, and
/// checks that it grew past the read limit `limit` and kept its planned rate.
fn assert_grows_past(filter: *mut BloomFilter, limit: u64) {
    let (false_positives, info) = grow_through_c(filter);
    // SAFETY: a live handle, freed once.
    unsafe { bloom_filter_free(filter) };
    assert!(
        info.payload_len > limit,
        "the chain did not grow past the read limit: {} bytes",
        info.payload_len
    );
    assert!(
        false_positives <= most_false_positives(),
        "{false_positives} of {ABSENT} absent keys were 'maybe'"
    );
}

#[test]
fn a_chain_loaded_from_a_buffer_with_its_own_length_as_limit_keeps_growing() {
    let bytes = full_chain_snapshot();
    let limit = bytes.len() as u64;
    let mut filter: *mut BloomFilter = ptr::null_mut();
    // SAFETY: the buffer and out-parameter are valid; the handle is freed below.
    let s =
        unsafe { bloom_filter_load_buffer(bytes.as_ptr(), bytes.len(), limit, &raw mut filter) };
    assert_eq!(s, BLOOM_OK, "{}", message());
    assert_grows_past(filter, limit);
}

#[test]
fn a_chain_loaded_from_a_file_with_a_tight_limit_keeps_growing() {
    let bytes = full_chain_snapshot();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("chain.bloom");
    std::fs::write(&path, &bytes).unwrap();
    let c_path = CString::new(path.to_str().unwrap()).unwrap();
    let mut filter: *mut BloomFilter = ptr::null_mut();
    // SAFETY: the path and out-parameter are valid; the handle is freed below.
    let s = unsafe { bloom_filter_load(c_path.as_ptr(), bytes.len() as u64, &raw mut filter) };
    assert_eq!(s, BLOOM_OK, "{}", message());
    assert_grows_past(filter, bytes.len() as u64);
}

#[test]
fn a_loaded_chain_stays_within_its_plan_and_what_it_saves_loads_by_default() {
    let bytes = full_chain_snapshot();
    let mut handle = Handle::load(Source::Bytes(&bytes), bytes.len() as u64).unwrap();
    handle
        .insert_all((0..INSERTED).map(|i| format!("inserted-{i}")))
        .unwrap();
    let bloom_core::AnyFilter::Scalable(chain) = handle.filter() else {
        panic!("a scalable filter, not {}", handle.filter().kind())
    };
    assert!(chain.stages().len() > 1, "no stage was added");
    assert!(!chain.is_over_capacity(), "{:?}", chain.growth_stop());
    // The default limit reads what it grew to.
    let grown = handle.to_bytes(None).unwrap();
    assert!(Handle::load(Source::Bytes(&grown), 0).is_ok());
}
