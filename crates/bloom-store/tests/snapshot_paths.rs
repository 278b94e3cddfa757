//! Snapshot paths as they occur in the field: a named pipe, a directory, a device, a
//! symbolic link, and temporary files left by a writer that was killed. None blocks, none is
//! replaced by a regular file, and none loses a key.

#![cfg(unix)]

mod support;

use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use bloom_format::{FileKind, ReadError, WriteError};
use bloom_store::{
    BypassReason, FilteredStore, OpenOutcome, PrimaryStore, SnapshotRefresh, StoreError,
};
use support::{Harness, assert_every_committed_key_present, insert_all, named, options};

fn mkfifo(path: &Path) {
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success());
}

/// Runs `f` on another thread and fails (instead of hanging the suite) if it blocks.
fn within_seconds<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(120))
        .expect("blocked on the snapshot path")
}

fn is_not_regular(reason: &BypassReason, expected: FileKind) -> bool {
    matches!(reason, BypassReason::Unreadable(e)
        if matches!(&**e, ReadError::NotARegularFile { kind, .. } if *kind == expected))
}

#[test]
fn a_named_pipe_at_the_path_is_refused_without_blocking() {
    let h = support::Sqlite::new();
    let db = h.db().to_path_buf();
    let (w, _) = FilteredStore::open_and_recover(h.open(), options()).unwrap();
    insert_all(&w, &named("k", 0..30));
    drop(w);
    mkfifo(h.snapshot());
    let snapshot = h.snapshot().to_path_buf();
    let (outcome, present) = within_seconds(move || {
        let store = bloom_store::SqliteStore::open(&db).unwrap();
        let (w, outcome) =
            FilteredStore::open_and_recover(store, options().with_snapshot(&snapshot)).unwrap();
        (outcome, assert_every_committed_key_present(&w))
    });
    assert_eq!(present, 30);
    match outcome {
        OpenOutcome::Rebuilt {
            reason,
            snapshot: SnapshotRefresh::Failed(error),
            ..
        } => {
            assert!(is_not_regular(&reason, FileKind::Fifo), "{reason:?}");
            // The pipe is left alone rather than replaced by a file.
            assert!(error.to_string().contains("named pipe"), "{error}");
        }
        other => panic!("{other:?}"),
    }
    use std::os::unix::fs::FileTypeExt;
    assert!(
        std::fs::symlink_metadata(h.snapshot())
            .unwrap()
            .file_type()
            .is_fifo()
    );
}

#[test]
fn a_directory_or_a_device_at_the_path_is_refused_and_left_alone() {
    let h = support::Memory::new();
    let (w, _) = FilteredStore::open_and_recover(h.open(), options()).unwrap();
    insert_all(&w, &named("k", 0..10));
    std::fs::create_dir(h.snapshot()).unwrap();
    assert!(matches!(
        w.save_snapshot(h.snapshot()),
        Err(StoreError::Write(WriteError::NotARegularFile {
            kind: FileKind::Directory,
            ..
        }))
    ));
    // A link to a device: saving does not replace the device.
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join("null.bloom");
    std::os::unix::fs::symlink("/dev/null", &link).unwrap();
    assert!(matches!(
        w.save_snapshot(&link),
        Err(StoreError::Write(WriteError::NotARegularFile {
            kind: FileKind::CharDevice,
            ..
        }))
    ));
    drop(w);
    // Reading either is refused (one wrapper at a time over the store).
    let (w2, outcome) =
        FilteredStore::open(h.open(), options().with_snapshot(h.snapshot())).unwrap();
    assert!(
        matches!(&outcome, OpenOutcome::Bypassed(r) if is_not_regular(r, FileKind::Directory)),
        "{outcome:?}"
    );
    assert_every_committed_key_present(&w2);
    assert!(h.snapshot().is_dir());
    drop(w2);
    let (_, outcome) = FilteredStore::open(h.open(), options().with_snapshot(&link)).unwrap();
    assert!(
        matches!(&outcome, OpenOutcome::Bypassed(r) if is_not_regular(r, FileKind::CharDevice)),
        "{outcome:?}"
    );
    use std::os::unix::fs::FileTypeExt;
    assert!(
        std::fs::metadata("/dev/null")
            .unwrap()
            .file_type()
            .is_char_device()
    );
}

#[test]
fn a_symbolic_link_is_written_through_and_stays_a_link() {
    let h = support::Sqlite::new();
    let real = tempfile::tempdir().unwrap();
    let target = real.path().join("real.bloom");
    std::os::unix::fs::symlink(&target, h.snapshot()).unwrap();

    let (w, outcome) =
        FilteredStore::open_and_recover(h.open(), options().with_snapshot(h.snapshot())).unwrap();
    assert!(matches!(
        outcome,
        OpenOutcome::Rebuilt {
            reason: BypassReason::NoSnapshot,
            snapshot: SnapshotRefresh::Saved(_),
            ..
        }
    ));
    insert_all(&w, &named("k", 0..40));
    w.save_snapshot(h.snapshot()).unwrap();
    drop(w);
    assert!(
        std::fs::symlink_metadata(h.snapshot())
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert!(target.is_file());
    let (w, outcome) =
        FilteredStore::open(h.open(), options().with_snapshot(h.snapshot())).unwrap();
    assert!(
        matches!(outcome, OpenOutcome::Trusted { generation } if generation.get() == 40),
        "{outcome:?}"
    );
    assert_eq!(assert_every_committed_key_present(&w), 40);
}

#[test]
fn temporary_files_of_a_killed_writer_are_removed_by_the_next_save() {
    let h = support::Memory::new();
    let (w, _) =
        FilteredStore::open_and_recover(h.open(), options().with_snapshot(h.snapshot())).unwrap();
    insert_all(&w, &named("k", 0..10));
    let dir = h.snapshot().parent().unwrap();
    let name = h.snapshot().file_name().unwrap().to_str().unwrap();
    // What a SIGKILL during a save leaves behind, and files that only look alike.
    let stale = [
        format!(".{name}.4000000.0.tmp"),
        format!(".{name}.1.17.tmp"),
    ];
    let unrelated = [
        format!(".{name}.tmp"),
        format!("{name}.bak"),
        ".other.bloom.1.0.tmp".into(),
    ];
    for file in stale.iter().chain(&unrelated) {
        std::fs::write(dir.join(file), vec![0u8; 4096]).unwrap();
    }
    w.save_snapshot(h.snapshot()).unwrap();
    for file in &stale {
        assert!(!dir.join(file).exists(), "{file} was left");
    }
    for file in &unrelated {
        assert!(dir.join(file).exists(), "{file} was removed");
    }
    assert!(h.open().generation().unwrap().get() == 10);
}

#[test]
fn a_new_salted_snapshot_is_readable_by_its_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let h = support::Memory::new();
    let options = options().with_salt(bloom_store::SaltPolicy::Random);
    let (w, _) =
        FilteredStore::open_and_recover(h.open(), options.with_snapshot(h.snapshot())).unwrap();
    w.save_snapshot(h.snapshot()).unwrap();
    let mode = std::fs::metadata(h.snapshot())
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600);
}
