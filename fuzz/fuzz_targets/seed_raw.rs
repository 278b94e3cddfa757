//! The reference article's raw 128 bytes: exactly 128 bytes import, export back to the same
//! bytes and load; anything else is a typed length error.

#![no_main]

use bloom_core::{BloomFilter, Filter};
use bloom_format::{SEED_RAW_LEN, export_seed_raw, import_seed_raw};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match import_seed_raw(data) {
        Ok(snapshot) => {
            assert_eq!(data.len(), SEED_RAW_LEN);
            assert_eq!(export_seed_raw(&snapshot).unwrap(), data);
            let filter = BloomFilter::from_snapshot(&snapshot).unwrap();
            let _ = filter.contains("key");
            // And back through the snapshot format.
            let encoded = snapshot.encode();
            let decoded =
                bloom_format::Snapshot::decode(encoded, &bloom_format::DecodeOptions::unlimited())
                    .unwrap();
            assert_eq!(export_seed_raw(&decoded).unwrap(), data);
        }
        Err(_) => assert_ne!(data.len(), SEED_RAW_LEN),
    }
});
