//! Reading from streams and files, and atomic writes.

mod common;

use std::io::Read;

use std::io::Write;
use std::path::Path;

use bloom_format::{
    AtomicFile, DecodeError, DecodeOptions, FileKind, ReadError, Snapshot, SnapshotReader,
    SnapshotWriter, WriteError,
};

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
    assert_eq!(err.action(), Some("creating the temporary file"));
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

#[test]
fn the_reader_streams_verifies_and_reads_into_a_buffer() {
    let snapshot = common::full(1027);
    let bytes = snapshot.encode();
    let options = DecodeOptions::unlimited();

    let (version, header) = SnapshotReader::new(&bytes[..], &options)
        .unwrap()
        .verify()
        .unwrap();
    assert_eq!(
        (version, &header),
        (bloom_format::FormatVersion::V3, snapshot.header())
    );

    let mut chunks = Vec::new();
    SnapshotReader::new(Trickle(&bytes), &options)
        .unwrap()
        .read_payload_with(|chunk| {
            chunks.extend_from_slice(chunk);
            Ok::<(), ReadError>(())
        })
        .unwrap();
    assert_eq!(chunks, snapshot.payload().as_ref());

    let mut dest = vec![0u8; 129];
    SnapshotReader::new(&bytes[..], &options)
        .unwrap()
        .read_payload_into(&mut dest)
        .unwrap();
    assert_eq!(dest, snapshot.payload().as_ref());
    let mut wrong = vec![0u8; 128];
    assert!(matches!(
        SnapshotReader::new(&bytes[..], &options)
            .unwrap()
            .read_payload_into(&mut wrong),
        Err(ReadError::Decode(DecodeError::InvalidParameter { .. }))
    ));

    // A flipped payload byte is caught by every way of reading.
    let mut bad = bytes.to_vec();
    *bad.last_mut().unwrap() ^= 1;
    assert!(matches!(
        SnapshotReader::new(&bad[..], &options).unwrap().verify(),
        Err(ReadError::Decode(
            DecodeError::PayloadChecksumMismatch { .. }
        ))
    ));
    assert!(matches!(
        SnapshotReader::new(&bad[..], &options)
            .unwrap()
            .read_payload_into(&mut dest),
        Err(ReadError::Decode(
            DecodeError::PayloadChecksumMismatch { .. }
        ))
    ));
}

#[test]
fn a_payload_of_many_chunks_is_read_into_a_buffer_exactly() {
    // Over three 1 MiB chunks, into fresh memory and into memory written before: the
    // reader makes each chunk's pages before filling them, and must change nothing else.
    let bits = (3u64 << 23) + 8 * 4099;
    let mut snapshot = common::full(bits);
    let payload: Vec<u8> = (0..bits / 8).map(|i| (i * 31 + i / 4096) as u8).collect();
    snapshot = Snapshot::new(snapshot.header().clone(), payload.clone()).unwrap();
    let bytes = snapshot.encode();
    let options = DecodeOptions::unlimited();
    for mut dest in [vec![0u8; payload.len()], vec![0xa5u8; payload.len()]] {
        SnapshotReader::new(&bytes[..], &options)
            .unwrap()
            .read_payload_into(&mut dest)
            .unwrap();
        assert!(dest == payload, "the payload read differs");
    }

    // A stream that ends inside the third chunk is truncated, whatever was made for it.
    let cut = bytes.len() - (1 << 20);
    let mut dest = vec![0u8; payload.len()];
    assert!(matches!(
        SnapshotReader::new(&bytes[..cut], &options)
            .unwrap()
            .read_payload_into(&mut dest),
        Err(ReadError::Decode(DecodeError::Truncated { .. }))
    ));
}

#[test]
fn a_file_shorter_than_its_header_claims_fails_before_reading() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("short.bloom");
    let bytes = common::full(1027).encode();
    std::fs::write(&path, &bytes[..bytes.len() - 1]).unwrap();
    assert!(matches!(
        SnapshotReader::open(&path, &DecodeOptions::unlimited()),
        Err(ReadError::Decode(DecodeError::Truncated { .. }))
    ));
}

#[cfg(unix)]
#[test]
fn non_regular_files_are_refused_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo.bloom");
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(status.success());
    // No writer: a blocking open would hang here forever.
    for (path, kind) in [
        (fifo.as_path(), FileKind::Fifo),
        (dir.path(), FileKind::Directory),
        (Path::new("/dev/zero"), FileKind::CharDevice),
    ] {
        let err = Snapshot::read_file(path, &DecodeOptions::unlimited()).unwrap_err();
        assert!(
            matches!(&err, ReadError::NotARegularFile { kind: k, .. } if *k == kind),
            "{}: {err:?}",
            path.display()
        );
    }
}

#[cfg(unix)]
#[test]
fn writes_go_through_symbolic_links_and_refuse_non_regular_targets() {
    let dir = tempfile::tempdir().unwrap();
    let real_dir = dir.path().join("real");
    std::fs::create_dir(&real_dir).unwrap();
    let target = real_dir.join("filter.bloom");
    let link = dir.path().join("link.bloom");
    std::os::unix::fs::symlink(&target, &link).unwrap();

    // A dangling link: the write creates the file it names.
    let first = common::small();
    first.write_file(&link).unwrap();
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(
        Snapshot::read_file(&target, &DecodeOptions::unlimited()).unwrap(),
        first
    );
    // And a link to an existing file: replaced through the link.
    let second = common::full(64);
    second.write_file(&link).unwrap();
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(
        Snapshot::read_file(&link, &DecodeOptions::unlimited()).unwrap(),
        second
    );
    assert_eq!(names_in(&real_dir), ["filter.bloom"]);

    let fifo = dir.path().join("fifo.bloom");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    for (path, kind) in [
        (fifo.as_path(), FileKind::Fifo),
        (real_dir.as_path(), FileKind::Directory),
    ] {
        let err = first.write_file(path).unwrap_err();
        assert!(
            matches!(&err, WriteError::NotARegularFile { kind: k, .. } if *k == kind),
            "{err:?}"
        );
    }
    assert!(
        std::fs::symlink_metadata(&fifo)
            .unwrap()
            .file_type()
            .is_fifo_like()
    );
}

trait FifoLike {
    fn is_fifo_like(&self) -> bool;
}

#[cfg(unix)]
impl FifoLike for std::fs::FileType {
    fn is_fifo_like(&self) -> bool {
        std::os::unix::fs::FileTypeExt::is_fifo(self)
    }
}

#[test]
fn an_unfinished_write_leaves_nothing_and_stale_temporaries_are_removed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("filter.bloom");
    {
        let mut file = AtomicFile::create(&path).unwrap();
        file.write_all(b"half a snapshot").unwrap();
        assert!(file.temporary_path().exists());
        // Dropped without commit: as an error or a cancelled write would.
    }
    assert!(names_in(dir.path()).is_empty());

    // A killed writer's temporary file (no lock held), a live writer's (lock held), and
    // files that only look similar.
    let stale = dir.path().join(".filter.bloom.999999.0.tmp");
    std::fs::write(&stale, b"junk").unwrap();
    let unrelated = [
        ".other.bloom.1.0.tmp",
        ".filter.bloom.lock",
        "filter.bloom.1.2.tmp",
    ];
    for name in unrelated {
        std::fs::write(dir.path().join(name), b"keep").unwrap();
    }
    let live = AtomicFile::create(&path).unwrap();
    let live_name = live
        .temporary_path()
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();

    common::small().write_file(&path).unwrap();
    let mut expected: Vec<String> = unrelated.iter().map(|s| (*s).to_owned()).collect();
    expected.push("filter.bloom".into());
    expected.push(live_name);
    expected.sort();
    assert_eq!(
        names_in(dir.path()),
        expected,
        "the stale temporary file is gone, the rest stay"
    );
    drop(live);
}

#[cfg(unix)]
#[test]
fn a_replaced_file_keeps_its_permissions() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("private.bloom");
    common::small().write_file(&path).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    common::full(8).write_file(&path).unwrap();
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
}

#[test]
fn the_snapshot_writer_streams_chunks_to_files_and_streams() {
    let snapshot = common::small();
    let payload = snapshot.payload().clone();
    let header = snapshot.header().clone();

    // Seekable: the header is written last.
    let mut writer = SnapshotWriter::new(std::io::Cursor::new(Vec::new()), header.clone()).unwrap();
    for chunk in payload.chunks(2) {
        writer.write_payload(chunk).unwrap();
    }
    let bytes = writer.finish().unwrap().into_inner();
    assert_eq!(bytes, snapshot.encode().as_ref());

    // Streaming: the CRC is given first, and checked at the end.
    let mut writer =
        SnapshotWriter::streaming(Vec::new(), header.clone(), snapshot.payload_crc32()).unwrap();
    writer.write_payload(&payload).unwrap();
    assert_eq!(writer.finish_stream().unwrap(), snapshot.encode().as_ref());

    let mut writer = SnapshotWriter::streaming(Vec::new(), header.clone(), 0).unwrap();
    writer.write_payload(&payload).unwrap();
    assert!(
        writer.finish_stream().is_err(),
        "a wrong CRC given up front is caught"
    );

    let mut short = SnapshotWriter::new(std::io::Cursor::new(Vec::new()), header.clone()).unwrap();
    short.write_payload(&payload[..1]).unwrap();
    assert!(short.finish().is_err());
    let mut long = SnapshotWriter::new(std::io::Cursor::new(Vec::new()), header).unwrap();
    assert!(long.write_payload(&[0; 4]).is_err());

    // Into an atomic file.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("written.bloom");
    let mut writer = SnapshotWriter::new(
        AtomicFile::create(&path).unwrap(),
        snapshot.header().clone(),
    )
    .unwrap();
    writer.write_payload(&payload).unwrap();
    writer.finish().unwrap().commit().unwrap();
    assert_eq!(
        Snapshot::read_file(&path, &DecodeOptions::unlimited()).unwrap(),
        snapshot
    );
}

#[test]
fn a_file_that_is_not_a_snapshot_is_never_replaced_by_one() {
    let dir = tempfile::tempdir().unwrap();
    let database = dir.path().join("records.sqlite");
    std::fs::write(&database, b"SQLite format 3\0 and precious rows").unwrap();
    let err = common::small().write_file(&database).unwrap_err();
    assert!(matches!(err, WriteError::NotASnapshot { .. }), "{err:?}");
    assert_eq!(
        std::fs::read(&database).unwrap(),
        b"SQLite format 3\0 and precious rows"
    );
    // Empty files, truncated snapshots (a prefix of the magic) and damaged snapshots may be
    // replaced: they are what a snapshot path holds after a crash or a failed copy.
    for existing in [
        &b""[..],
        &bloom_format::MAGIC[..3],
        &common::full(8).encode()[..40],
    ] {
        let path = dir.path().join("snapshot.bloom");
        std::fs::write(&path, existing).unwrap();
        common::small().write_file(&path).unwrap();
        assert_eq!(
            Snapshot::read_file(&path, &DecodeOptions::unlimited()).unwrap(),
            common::small()
        );
    }
    // The generic writer replaces any regular file.
    bloom_format::write_atomic(&database, b"raw").unwrap();
    assert_eq!(std::fs::read(&database).unwrap(), b"raw");
    // A path ending in a separator names a directory.
    let err = common::small()
        .write_file(format!("{}/", dir.path().join("x.bloom").display()))
        .unwrap_err();
    assert_eq!(err.action(), Some("choosing a file name"));
}

#[cfg(unix)]
#[test]
fn a_new_salted_snapshot_is_private() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let salted = dir.path().join("salted.bloom");
    common::small().write_file(&salted).unwrap();
    assert_eq!(
        std::fs::metadata(&salted).unwrap().permissions().mode() & 0o777,
        0o600
    );
    // A plain one gets what any new file gets under this process's umask.
    let plain = dir.path().join("plain.bloom");
    common::full(8).write_file(&plain).unwrap();
    let any = dir.path().join("any");
    std::fs::File::create(&any).unwrap();
    assert_eq!(
        std::fs::metadata(&plain).unwrap().permissions().mode() & 0o777,
        std::fs::metadata(&any).unwrap().permissions().mode() & 0o777,
    );
}
