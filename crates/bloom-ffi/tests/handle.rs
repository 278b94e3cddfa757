//! `Handle`'s record of the header it was loaded with: a save keeps the generation and the
//! store binding (more keys only add false positives), another generation or a removal drops
//! the binding, and a removal made while a save was being written is never undone by it.

use bloom_core::{CountingBloomFilter, Filter};
use bloom_ffi::{FilterKind, FilterOptions, Handle, Source};
use bloom_format::{DecodeOptions, Snapshot};

/// A counting filter holding `keys`, bound to the store of the `store-bound` fixture at its
/// generation: what a store's snapshot of a counting filter looks like.
fn bound_counting(keys: &[&str]) -> Handle {
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/v3/store-bound.bloom"
    );
    let bound = Snapshot::read_file(fixture, &DecodeOptions::unlimited()).unwrap();
    let mut options = FilterOptions::new(1_000, 0.01);
    options.kind = FilterKind::Counting;
    let mut handle = Handle::create(&options).unwrap();
    handle.insert_all(keys.iter().copied()).unwrap();
    let bloom_core::AnyFilter::Counting(filter) = handle.filter() else {
        panic!("a counting filter")
    };
    let filter: &CountingBloomFilter = filter;
    let mut header = filter.header(bound.header().dataset_generation);
    header.store = bound.header().store;
    let bytes = bloom_ffi::to_bytes(handle.filter(), header).unwrap();
    Handle::load(Source::Bytes(&bytes), 0).unwrap()
}

#[test]
fn saving_keeps_the_binding_while_the_generation_is_kept() {
    let mut handle = bound_counting(&["a", "b"]);
    let loaded = handle.generation();
    assert!(handle.header(None).store.is_some());
    handle.insert("c").unwrap();
    assert!(
        handle.header(None).store.is_some(),
        "more keys keep the binding"
    );
    assert_eq!(handle.header(None).dataset_generation.get(), loaded);
    assert!(
        handle.header(Some(loaded + 1)).store.is_none(),
        "another generation drops it"
    );

    let dir = tempfile::tempdir().unwrap();
    let saved = handle
        .save(&dir.path().join("s.bloom"), Some(loaded + 1))
        .unwrap();
    handle.saved(saved);
    assert_eq!(handle.generation(), loaded + 1);
    assert!(handle.header(None).store.is_none());
}

#[test]
fn a_removal_drops_the_binding_even_while_a_save_is_written() {
    let mut handle = bound_counting(&["a", "b"]);
    let dir = tempfile::tempdir().unwrap();
    // The save's header is made (bound), then a removal lands before the save is recorded.
    let header = handle.save(&dir.path().join("s.bloom"), None).unwrap();
    assert!(header.store.is_some());
    handle.remove("a").unwrap();
    handle.saved(header);
    assert!(
        handle.header(None).store.is_none(),
        "a save must not bring back a binding a removal dropped"
    );
    // A failed removal keeps it.
    let mut other = bound_counting(&["a"]);
    assert!(other.remove("never").is_err());
    assert!(other.header(None).store.is_some());
}

#[test]
fn a_growth_limit_is_refused_where_nothing_grows() {
    for kind in [FilterKind::Plain, FilterKind::Counting] {
        let options = FilterOptions {
            kind,
            max_payload_bytes: 1_024,
            ..FilterOptions::new(10_000_000, 0.01)
        };
        let refused = bloom_ffi::create(&options).err();
        assert!(
            refused
                .as_ref()
                .is_some_and(|e| e.kind() == bloom_ffi::ErrorKind::InvalidArgument
                    && e.message().contains("scalable")),
            "{kind:?}: {refused:?}"
        );
    }
    let scalable = FilterOptions {
        kind: FilterKind::Scalable,
        max_payload_bytes: 1 << 20,
        ..FilterOptions::new(10_000, 0.01)
    };
    assert!(bloom_ffi::create(&scalable).is_ok());
}
