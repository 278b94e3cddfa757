//! Guava streams: the first byte picks the funnel, the rest is the stream. A stream either
//! fails with a typed error, or is a snapshot that exports back to exactly those bytes and
//! loads as a filter.

#![no_main]

use bloom_core::{BloomFilter, Filter};
use bloom_format::{DecodeOptions, GuavaFunnel, export_guava, import_guava};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, stream)) = data.split_first() else {
        return;
    };
    let funnel = match selector % 3 {
        0 => GuavaFunnel::Utf8,
        1 => GuavaFunnel::Chars,
        _ => GuavaFunnel::Bytes,
    };
    let options = DecodeOptions::with_max_payload_len(1 << 24);
    let Ok(snapshot) = import_guava(stream, funnel, &options) else {
        return;
    };
    let mut exported = Vec::new();
    export_guava(&snapshot, &mut exported).unwrap();
    assert_eq!(exported, stream);
    let again = import_guava(&exported[..], funnel, &options).unwrap();
    assert_eq!(again.header(), snapshot.header());
    assert_eq!(again.payload(), snapshot.payload());
    if let Ok(filter) = BloomFilter::from_snapshot(&snapshot) {
        let _ = filter.contains("key");
        assert!(!filter.estimated_false_positive_rate().is_nan());
    }
});
