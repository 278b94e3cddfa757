//! A filter whose bits were built with other Unicode tables than this build's never gives a
//! wrong "absent": keys outside ASCII answer maybe, ASCII keys keep exact answers.

use bloom_core::{
    AtomicBloomFilter, BloomFilter, Filter, FilterConfig, FilterParams, KeyEncoding, UnicodeTables,
    UnicodeVersion,
};
use bloom_format::{DecodeOptions, Snapshot};

fn config(encoding: KeyEncoding) -> FilterConfig {
    FilterConfig::new(FilterParams::new(4096, 5).unwrap()).with_encoding(encoding)
}

fn foreign() -> UnicodeTables {
    UnicodeTables::new(
        Some(UnicodeVersion::new(99, 0, 0)),
        Some(UnicodeVersion::new(99, 0, 0)),
    )
}

/// Absent ASCII keys that this filter answers "absent" for, and absent non-ASCII keys.
fn probes() -> (Vec<String>, Vec<String>) {
    let ascii = (0..200).map(|i| format!("absent-{i}")).collect();
    let other = (0..200).map(|i| format!("absent-é-{i}")).collect();
    (ascii, other)
}

#[test]
fn a_filter_built_with_other_tables_answers_maybe_outside_ascii() {
    let mut built = BloomFilter::new(config(KeyEncoding::NfcTrimLowercase)).unwrap();
    built.insert_all(["record-1", "Café", "中文"]);
    assert!(!built.config().has_foreign_tables());

    // The same bits, as a reader whose tables differ from the writer's sees them.
    let (mut header, payload) = built.to_snapshot(0).into_parts();
    header.key_encoding.normalization_unicode = Some(UnicodeVersion::new(99, 0, 0));
    let snapshot = Snapshot::new(header, payload).unwrap();
    let loaded = BloomFilter::from_snapshot(&snapshot).unwrap();
    assert!(loaded.config().has_foreign_tables());

    let (ascii, other) = probes();
    for key in &ascii {
        assert_eq!(loaded.contains(key), built.contains(key), "{key}");
    }
    assert!(
        ascii.iter().any(|k| !loaded.contains(k)),
        "ASCII keys keep exact answers"
    );
    for key in &other {
        assert!(loaded.contains(key), "{key} must be maybe");
        assert!(loaded.contains(key.as_bytes()).unwrap());
    }
    // Batched answers are the same as single ones, and pre-encoded keys are always maybe.
    let batched: Vec<bool> = loaded.contains_each(ascii.iter().chain(&other)).collect();
    let single: Vec<bool> = ascii
        .iter()
        .chain(&other)
        .map(|k| loaded.contains(k))
        .collect();
    assert_eq!(batched, single);
    let encoded = loaded.config().encoding().encode_str("absent-1");
    assert!(loaded.contains(&encoded));
    assert!(
        !built.contains(&built.config().encoding().encode_str("absent-1"))
            || built.contains("absent-1")
    );

    // The atomic filter answers the same.
    let atomic = AtomicBloomFilter::from(loaded.clone());
    let atomic_answers: Vec<bool> = ascii
        .iter()
        .chain(&other)
        .map(|k| atomic.contains(k))
        .collect();
    assert_eq!(atomic_answers, single);
}

#[test]
fn a_key_outside_ascii_inserted_under_foreign_tables_leaves_no_version_recorded() {
    for insert_all in [false, true] {
        let mut filter = BloomFilter::new(config(KeyEncoding::Nfc).with_tables(foreign())).unwrap();
        filter.insert("ascii-only");
        assert_eq!(
            filter.config().tables(),
            foreign(),
            "ASCII keys change nothing"
        );
        if insert_all {
            filter.insert_all(["ascii", "naïve"]);
        } else {
            filter.insert("naïve");
        }
        assert_eq!(filter.config().tables(), UnicodeTables::default());
        let header = filter.header(0);
        assert_eq!(header.key_encoding.normalization_unicode, None);
        // "Not recorded" is itself foreign: every reader answers maybe outside ASCII.
        let reread =
            BloomFilter::from_snapshot(&Snapshot::new(header, filter.to_bytes()).unwrap()).unwrap();
        assert!(reread.config().has_foreign_tables());
        assert!(reread.contains("never-inserted-é"));
    }

    let atomic = AtomicBloomFilter::new(config(KeyEncoding::Nfc).with_tables(foreign())).unwrap();
    atomic.insert("plain");
    assert_eq!(
        bloom_core::FilterConfig::from_header(&atomic.header(0))
            .unwrap()
            .tables(),
        foreign()
    );
    atomic.insert_all(["ümlaut"]);
    assert_eq!(
        bloom_core::FilterConfig::from_header(&atomic.header(0))
            .unwrap()
            .tables(),
        UnicodeTables::default()
    );
    assert_eq!(
        atomic.to_filter().unwrap().config().tables(),
        UnicodeTables::default()
    );
}

#[test]
fn encodings_without_tables_are_never_foreign() {
    for encoding in [KeyEncoding::Bytes, KeyEncoding::Utf8] {
        let filter = BloomFilter::new(config(encoding)).unwrap();
        assert!(!filter.config().has_foreign_tables());
        assert!(!filter.contains("é-absent"));
    }
}

#[test]
fn version_1_nfc_trim_lower_fixtures_recorded_no_casing_version() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/v1/salted-trim-lower.bloom");
    let snapshot = Snapshot::read_file(path, &DecodeOptions::unlimited()).unwrap();
    let filter = BloomFilter::from_snapshot(&snapshot).unwrap();
    assert_eq!(filter.config().tables().casing, None);
    assert!(filter.config().has_foreign_tables());
    // Every inserted key is still found (ASCII ones exactly, the others as maybe).
    for key in [
        "  Record-1",
        "RECORD-2 ",
        "Straße",
        "ÉCOLE",
        "\u{3000}中文\u{3000}",
    ] {
        assert!(filter.contains(key), "{key}");
    }
}
