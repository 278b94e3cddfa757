"""Damaged, foreign and oversized snapshots raise their exception (with its kind and code)
from every entry point, and nothing is loaded from them."""

import errno

import pytest

import bloom
from conftest import FIXTURES

GOOD = (FIXTURES / "v3" / "xxh3-blocked.bloom").read_bytes()


def flipped(data, at):
    data = bytearray(data)
    data[at] ^= 0x10
    return bytes(data)


@pytest.mark.parametrize(
    "data,error,kind,header_ok",
    [
        (flipped(GOOD, len(GOOD) - 10), bloom.CorruptSnapshotError, "corrupt", True),
        (GOOD[: len(GOOD) // 2], bloom.CorruptSnapshotError, "corrupt", False),
        (GOOD + b"\0", bloom.CorruptSnapshotError, "corrupt", False),
        (flipped(GOOD, 20), bloom.CorruptSnapshotError, "corrupt", False),
        (b"SQLite format 3\0 and then some", bloom.NotASnapshotError, "not-a-snapshot", False),
        (b"", bloom.NotASnapshotError, "not-a-snapshot", False),
    ],
    ids=["payload-bit", "truncated", "trailing-byte", "header-bit", "foreign", "empty"],
)
def test_damaged_snapshots_raise(data, error, kind, header_ok, tmp_path):
    path = tmp_path / "damaged.bloom"
    path.write_bytes(data)
    for call in (lambda: bloom.load(path), lambda: bloom.loads(data),
                 lambda: bloom.verify(path), lambda: bloom.verify(data)):
        with pytest.raises(error) as raised:
            call()
        assert raised.value.kind == kind
        assert isinstance(raised.value, bloom.BloomError)
        assert str(raised.value)
    # Inspecting reads the header only, but a file or buffer of the wrong length is refused
    # by its length before the payload is read.
    if header_ok:
        assert bloom.inspect(data)["kind"] == bloom.inspect(path)["kind"] == "plain"
    else:
        for source in (path, data):
            with pytest.raises(error):
                bloom.inspect(source)


def test_size_limit_is_checked_before_reading(tmp_path):
    with pytest.raises(bloom.SnapshotTooLargeError) as raised:
        bloom.loads(GOOD, max_bytes=16)
    assert raised.value.code == 6
    assert bloom.loads(GOOD, max_bytes=len(GOOD)).kind == "plain"


def test_paths_that_are_not_snapshot_files(tmp_path):
    for path in (tmp_path, tmp_path / "missing.bloom"):
        with pytest.raises(bloom.SnapshotIOError) as raised:
            bloom.load(path)
        assert raised.value.kind == "io"
        assert str(path) in str(raised.value)
        # The built-in class a Python caller would catch, too.
        assert isinstance(raised.value, OSError)
    # A missing file is told apart from one that cannot be read: "no snapshot yet".
    with pytest.raises(FileNotFoundError) as missing:
        bloom.load(tmp_path / "missing.bloom")
    assert isinstance(missing.value, bloom.SnapshotNotFoundError)
    assert isinstance(missing.value, bloom.SnapshotIOError)
    assert (missing.value.kind, missing.value.code, missing.value.errno) == ("io", 2, errno.ENOENT)
    with pytest.raises(bloom.SnapshotIOError) as directory:
        bloom.load(tmp_path)
    assert not isinstance(directory.value, FileNotFoundError)
    with pytest.raises(bloom.SnapshotNotFoundError):
        bloom.BloomFilter(100).save(tmp_path / "no-such-directory" / "f.bloom")
    with pytest.raises(ValueError):
        bloom.loads(b"not a snapshot")
    with pytest.raises(ValueError):
        bloom.BloomFilter(0)
    with pytest.raises(TypeError):
        bloom.inspect(12)


def test_save_never_replaces_a_file_that_is_not_a_snapshot(tmp_path):
    precious = tmp_path / "data.db"
    precious.write_bytes(b"SQLite format 3\0 precious")
    with pytest.raises(bloom.SnapshotIOError):
        bloom.BloomFilter(100).save(precious)
    assert precious.read_bytes() == b"SQLite format 3\0 precious"
