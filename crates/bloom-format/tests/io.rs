//! Reading from streams and files, and atomic writes.

mod common;

use std::io::Read;

use bloom_format::{DecodeError, DecodeOptions, ReadError, Snapshot};

/// A reader that hands out one byte per call, like a slow pipe.
struct Trickle<'a>(&'a [u8]);

impl Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match (self.0.split_first(), buf.first_mut()) {
            (Some((b, rest)), Some(slot)) => {
                *slot = *b;
                self.0 = rest;
                Ok(1)
            }
            _ => Ok(0),
        }
    }
}

#[test]
fn stream_reading_matches_slice_decoding() {
    let snapshot = common::small();
    let bytes = snapshot.encode();
    let options = DecodeOptions::unlimited();
    assert_eq!(Snapshot::read_from(&bytes[..], &options).unwrap(), snapshot);
    assert_eq!(
        Snapshot::read_from(Trickle(&bytes), &options).unwrap(),
        snapshot
    );

    let mut longer = bytes.to_vec();
    longer.push(0);
    assert!(matches!(
        Snapshot::read_from(&longer[..], &options),
        Err(ReadError::Decode(DecodeError::TrailingBytes { .. }))
    ));
    for len in [0, 5, 11, 12, 60, bytes.len() - 1] {
        assert!(
            matches!(
                Snapshot::read_from(Trickle(&bytes[..len]), &options),
                Err(ReadError::Decode(DecodeError::Truncated { .. }))
            ),
            "length {len}"
        );
    }
    assert!(matches!(
        Snapshot::read_from(&bytes[..], &DecodeOptions::with_max_payload_len(1)),
        Err(ReadError::Decode(DecodeError::OverLimit { .. }))
    ));
}

#[test]
fn atomic_write_replaces_the_file_and_leaves_no_temporary_files() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("filter.bloom");
    let first = common::small();
    first.write_file(&path).unwrap();
    assert_eq!(
        Snapshot::read_file(&path, &DecodeOptions::unlimited()).unwrap(),
        first
    );

    let second = common::full(1027);
    second.write_file(&path).unwrap();
    assert_eq!(
        Snapshot::read_file(&path, &DecodeOptions::unlimited()).unwrap(),
        second
    );

    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names, ["filter.bloom"]);
}

#[test]
fn io_errors_name_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.bloom");
    let err = Snapshot::read_file(&missing, &DecodeOptions::unlimited()).unwrap_err();
    assert!(matches!(&err, ReadError::Io { path: Some(p), .. } if *p == missing));
    assert!(err.to_string().contains("missing.bloom"), "{err}");

    let err = common::small()
        .write_file(dir.path().join("no-such-dir").join("x.bloom"))
        .unwrap_err();
    assert_eq!(err.action, "creating the temporary file");
}
