//! Hostile SQLite files: `SqliteStore::open` on flipped, truncated or foreign databases
//! returns an error or a store; a store that opens is read through its history, and a
//! wrapper over it reports every key the store lists present (never trusting what it cannot
//! check).

#![no_main]

use bloom_store::{
    DatasetGeneration, FilterOptions, FilteredStore, Lookup, PrimaryStore, SqliteStore,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("keys.sqlite");
    std::fs::write(&path, data).unwrap();
    let Ok(store) = SqliteStore::open(&path) else {
        return;
    };
    let mut keys = Vec::new();
    if store
        .keys_since(DatasetGeneration::ZERO, &mut |k| {
            if keys.len() < 10_000 {
                keys.push(k.to_vec());
            }
        })
        .is_err()
    {
        return;
    }
    let _ = store.changes_since(DatasetGeneration::ZERO, &mut |_| {});
    let _ = store.head();
    let Ok((wrapper, _)) =
        FilteredStore::open_and_recover(&store, FilterOptions::new(1000, 0.01))
    else {
        return;
    };
    for key in &keys {
        let key = bloom_core::EncodedKey::from_encoded(key);
        if let Ok(lookup) = wrapper.contains(&key) {
            assert_eq!(lookup, Lookup::Present);
        }
    }
    let _ = wrapper.insert("fuzz-new");
});
