//! `FilteredStore::open` over a hostile snapshot file: it opens (trusting only what matches
//! the store), and every committed key is present afterwards, whatever the file held.

#![no_main]

use bloom_store::{FilterOptions, FilteredStore, Lookup, MemoryStore, StoreIdentity};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.bloom");
    std::fs::write(&path, data).unwrap();
    // A fixed identity, so a snapshot can claim to be this store's.
    let store = MemoryStore::with_identity(StoreIdentity::from_bytes([7; 16]));
    let committed: Vec<String> = (0..20).map(|i| format!("k-{i}")).collect();
    for key in &committed {
        bloom_store::PrimaryStore::insert(&store, key.as_bytes()).unwrap();
    }
    for counting in [false, true] {
        let options = FilterOptions::new(1000, 0.01)
            .with_counting(counting)
            .with_max_snapshot_bytes(1 << 24);
        let (wrapper, _) = FilteredStore::open(&store, options.with_snapshot(&path)).unwrap();
        for key in &committed {
            let lookup = wrapper.contains(key).unwrap();
            assert_eq!(lookup, Lookup::Present, "{key}");
        }
        assert!(!wrapper.contains("never").unwrap().is_present());
    }
});
