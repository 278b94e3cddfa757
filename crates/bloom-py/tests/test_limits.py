"""Size limits and memory: a read limit limits what is read, never how far an unpickled or
loaded scalable filter grows; a payload over the limit says which argument to raise; a
filter the system cannot allocate raises OutOfMemoryError."""

import math
import pickle
import subprocess
import sys

import pytest

import bloom

FPR = 0.01
INSERTED = [f"inserted-{i}" for i in range(100_000)]
ABSENT = [f"absent-{i}" for i in range(100_000)]


def most_false_positives(n: int) -> int:
    """The binomial mean at the target rate plus six standard deviations (a chain's real rate
    is at or below its target); a chain that cannot grow answers "maybe" for nearly all."""
    return math.ceil(n * FPR + 6 * math.sqrt(n * FPR * (1 - FPR)))


def assert_grows_within_target(f: bloom.BloomFilter) -> None:
    f.insert_all(INSERTED)
    info = f.info()
    assert info["is_over_capacity"] is False, info
    false_positives = sum(f.contains_all(ABSENT))
    assert false_positives <= most_false_positives(len(ABSENT)), (
        f"{false_positives} of {len(ABSENT)} absent keys were 'maybe'"
    )


def full_chain() -> bloom.BloomFilter:
    f = bloom.BloomFilter(1000, FPR, kind="scalable")
    f.insert_all(f"first-{i}" for i in range(1000))
    return f


def test_an_unpickled_scalable_filter_keeps_growing():
    assert_grows_within_target(pickle.loads(pickle.dumps(full_chain())))


def test_a_scalable_filter_loaded_with_a_tight_limit_keeps_growing(tmp_path):
    data = full_chain().to_bytes()
    assert_grows_within_target(bloom.loads(data, max_bytes=len(data)))
    path = tmp_path / "chain.bloom"
    path.write_bytes(data)
    grown = bloom.load(path, max_bytes=len(data))
    assert_grows_within_target(grown)
    # What it grew to loads with the default limit.
    assert bloom.loads(grown.to_bytes()).kind == "scalable"


def test_a_payload_over_the_limit_says_to_pass_max_bytes(tmp_path):
    data = bloom.BloomFilter(100_000).to_bytes()
    path = tmp_path / "big.bloom"
    path.write_bytes(data)
    for read in (lambda: bloom.load(path, max_bytes=16), lambda: bloom.loads(data, max_bytes=16)):
        with pytest.raises(bloom.SnapshotTooLargeError) as raised:
            read()
        assert "max_bytes=" in str(raised.value), str(raised.value)


def test_max_bytes_is_refused_where_nothing_grows():
    # Only a scalable filter grows: for another kind the limit would bound nothing, so it is
    # refused rather than ignored.
    for kind in ("plain", "counting"):
        with pytest.raises(bloom.InvalidArgumentError, match="scalable"):
            bloom.BloomFilter(10_000_000, 0.01, kind=kind, max_bytes=1024)
    grows = bloom.BloomFilter(1_000, 0.01, kind="scalable", max_bytes=1 << 20)
    assert grows.kind == "scalable"


def test_a_filter_that_cannot_be_allocated_is_out_of_memory():
    # In a child whose address space is limited to 2 GiB, so that no overcommit setting lets
    # the 90 GiB of counters through.
    child = """
import resource
resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
import bloom
try:
    bloom.BloomFilter(2 * 10**10, kind="counting")
except bloom.BloomError as e:
    print(type(e).__name__, e.kind, isinstance(e, MemoryError))
else:
    print("allocated")
"""
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["OutOfMemoryError", "out-of-memory", "True"], done.stdout
