//! Parquet filters from any bytes: a filter blob (first byte even) or a whole file (odd)
//! ends in filters or typed errors, never a panic, a hang or an allocation the input did not
//! pay for (a filter's bitset is at most the input's length).

#![no_main]

use bloom_core::KeyEncoding;
use bloom_parquet::{Limits, MAX_BITSET_BYTES, ParquetFile, decode, encode};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    if mode % 2 == 0 {
        if let Ok(filter) = decode(rest, KeyEncoding::Bytes, MAX_BITSET_BYTES) {
            // What decodes encodes to a blob that decodes to the same bits.
            assert!(filter.to_bytes().len() <= rest.len());
            let blob = encode(&filter).unwrap();
            let again = decode(&blob, KeyEncoding::Bytes, MAX_BITSET_BYTES).unwrap();
            assert_eq!(again.as_words(), filter.as_words());
        }
        return;
    }
    let Ok(dir) = tempfile::tempdir() else {
        return;
    };
    let path = dir.path().join("input.parquet");
    if std::fs::write(&path, rest).is_err() {
        return;
    }
    let Ok(mut file) = ParquetFile::open(&path, Limits::default()) else {
        return;
    };
    for name in file.column_paths() {
        let Ok(column) = file.column(&name) else {
            continue;
        };
        for row_group in 0..file.row_groups() {
            if let Ok(Some(filter)) = file.filter(row_group, &column) {
                assert!(filter.to_bytes().len() <= rest.len());
                let _ = filter.contains(b"key".as_slice());
            }
        }
    }
});
