//! The bindings' loader (the C ABI's `bloom_filter_load_buffer`, Python's `bloom.loads`):
//! any bytes either fail with a classified error or load a filter whose snapshot, saved
//! with the generation it was loaded with, loads again to the same answers; `verify` and
//! `inspect` agree with the load.

#![no_main]

use bloom_ffi::{ErrorKind, Handle, Source};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let limit = 1 << 24;
    let loaded = Handle::load(Source::Bytes(data), limit);
    let verified = bloom_ffi::verify(Source::Bytes(data), limit);
    let Ok(handle) = loaded else {
        let e = loaded.unwrap_err();
        assert!(!e.message().is_empty());
        // A snapshot the format accepts may name what this build cannot build.
        if verified.is_ok() {
            assert!(
                matches!(
                    e.kind(),
                    ErrorKind::Unsupported | ErrorKind::Corrupt | ErrorKind::OutOfMemory
                ),
                "{e}"
            );
        }
        return;
    };
    let header = verified.expect("a snapshot that loads verifies");
    assert_eq!(bloom_ffi::inspect(Source::Bytes(data), limit).unwrap(), header);
    assert_eq!(handle.generation(), header.dataset_generation);
    let bytes = handle.to_bytes(None).expect("a loaded filter saves");
    let again = Handle::load(Source::Bytes(&bytes), limit).expect("what was saved loads");
    for key in [&b""[..], b"a", b"record-1", "caf\u{e9}".as_bytes(), b"\xff"] {
        assert_eq!(
            handle.contains(key).map_err(|e| e.kind()),
            again.contains(key).map_err(|e| e.kind())
        );
    }
});
