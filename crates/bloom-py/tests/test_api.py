"""The package as a pipeline uses it: keys of both types, iterables of any length, threads,
paths, and every misuse answered by a clear exception."""

import pathlib
import threading

import pytest

import bloom


def test_text_and_bytes_keys():
    f = bloom.BloomFilter(1000)
    assert f.insert("café")
    assert not f.insert("cafe\u0301"), "NFC: the same key"
    assert f.contains("cafe\u0301".encode())
    assert f.insert(b"raw")
    assert "raw" in f
    assert f.contains_all(["café", b"raw", "absent"]) == [True, True, False]
    with pytest.raises(TypeError):
        f.insert(42)
    with pytest.raises(TypeError):
        f.contains_all(["ok", None])


def test_refused_keys_name_their_index():
    f = bloom.BloomFilter(1000)
    with pytest.raises(bloom.KeyEncodingError) as raised:
        f.insert(b"\xff")
    assert raised.value.kind == "key" and raised.value.code == 7
    with pytest.raises(bloom.KeyEncodingError) as raised:
        f.contains_all([b"a", b"b", b"\xfe"])
    assert str(raised.value).startswith("key 2: ") and raised.value.key_index == 2
    with pytest.raises(bloom.KeyEncodingError) as raised:
        f.insert_all(["a", b"\xfe"])
    assert raised.value.key_index == 1
    # Past the first chunk (2^20 keys from a list, 2^16 from a generator), the index counts
    # every key given; keys before it are inserted.
    for count, source in ((1 << 20) + 5, list), ((1 << 16) + 5, iter):
        f = bloom.BloomFilter(8 * count)
        keys = [f"k{i}" for i in range(count)] + [b"\xff"] + ["after"]
        with pytest.raises(bloom.KeyEncodingError) as raised:
            f.insert_all(source(keys))
        assert raised.value.key_index == count
        assert all(f.contains_all(keys[:count])) and "after" not in f
    f = bloom.BloomFilter(100_000)
    # A str with a lone surrogate has no UTF-8 form; a wrong type is a TypeError; both
    # after the keys before them.
    with pytest.raises(bloom.KeyEncodingError) as raised:
        f.insert_all(["s1", "\ud800", "s3"])
    assert raised.value.key_index == 1 and "s1" in f and "s3" not in f
    with pytest.raises(bloom.KeyEncodingError):
        f.insert("\ud800")
    with pytest.raises(TypeError) as raised:
        f.insert_all(["t1", 7, "t3"])
    assert raised.value.key_index == 1 and "t1" in f and "t3" not in f

    # An iterator that fails: the keys it gave before are inserted, then its exception raised.
    def failing():
        yield "g1"
        yield "g2"
        raise ValueError("the source failed")

    with pytest.raises(ValueError):
        f.insert_all(failing())
    assert "g1" in f and "g2" in f
    # One key given as many is refused, not split into characters.
    for one_key in ("abc", b"abc"):
        with pytest.raises(TypeError):
            f.insert_all(one_key)
        with pytest.raises(TypeError):
            f.contains_all(one_key)
    # The bytes encoding takes any bytes.
    raw = bloom.BloomFilter(1000, encoding="bytes")
    assert raw.insert(b"\xff") and b"\xff" in raw


def test_iterables_of_any_length_in_chunks():
    f = bloom.BloomFilter(300_000)
    added = f.insert_all(f"k{i}" for i in range(200_000))
    assert 199_000 < added <= 200_000
    answers = f.contains_all(f"k{i}" for i in range(200_000))
    assert len(answers) == 200_000 and all(answers)
    assert f.insert_all([]) == 0 and f.contains_all(iter(())) == []
    # Tuples, and chunks whose keys change type midway.
    keys = tuple(f"t{i}" if i % 5000 else f"t{i}".encode() for i in range(20_000))
    assert 19_900 < f.insert_all(keys) <= 20_000  # a key that changes no bit is not counted
    assert all(f.contains_all(keys)) and all(f.contains_all(list(keys)))


def test_threads_share_a_filter():
    f = bloom.BloomFilter(100_000)

    def work(t):
        f.insert_all(f"t{t}-{i}" for i in range(10_000))
        for i in range(0, 10_000, 97):
            assert f.contains(f"t{t}-{i}")

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(f.contains_all(f"t{t}-{i}" for t in range(4) for i in range(10_000)))


def test_options_are_checked():
    for bad in (
        lambda: bloom.BloomFilter(0),
        lambda: bloom.BloomFilter(100, 1.5),
        lambda: bloom.BloomFilter(100, kind="cuckoo"),
        lambda: bloom.BloomFilter(100, rule="md5"),
        lambda: bloom.BloomFilter(100, layout="spiral"),
        lambda: bloom.BloomFilter(100, encoding="latin-1"),
        lambda: bloom.BloomFilter(100, salt=b"x" * 1000),
        lambda: bloom.BloomFilter(100, kind="scalable", layout="standard"),
    ):
        with pytest.raises(bloom.InvalidArgumentError) as raised:
            bad()
        assert raised.value.kind == "invalid-argument" and str(raised.value)
    with pytest.raises(OverflowError):
        bloom.BloomFilter(-1)


def test_save_load_with_paths_and_generations(tmp_path):
    f = bloom.BloomFilter(1000, kind="counting", salt=b"secret of this deployment")
    f.insert_all(["a", "b"])
    path = tmp_path / "seen.bloom"
    f.save(path, generation=41)
    assert f.generation == 41
    f.save(str(path), generation=42)
    f.save(path)  # keeps the generation it was last saved at
    back = bloom.load(pathlib.Path(path))
    assert back.generation == 42 and back.kind == "counting"
    assert back.contains_all(["a", "b", "c"]) == [True, True, False]
    info = back.info()
    assert info["salted"] and info["rule"] == "sha256-double" and info["items_inserted"] == 2
    assert "secret" not in repr(back) and "secret" not in str(info)
    assert (path.stat().st_mode & 0o777) == 0o600, "a salted snapshot is private"


def test_scalable_grows_and_round_trips():
    f = bloom.BloomFilter(100, 0.01, kind="scalable")
    f.insert_all(f"k{i}" for i in range(2000))
    assert f.info()["layout"] == "scalable"
    back = bloom.loads(f.to_bytes())
    assert all(back.contains_all(f"k{i}" for i in range(2000)))
    assert bloom.loads(bytearray(f.to_bytes())).kind == "scalable"
    assert back.info()["estimated_false_positive_rate"] < 0.02


def test_a_store_bound_snapshot_stays_bound_while_its_generation_is_kept(tmp_path):
    from conftest import FIXTURES

    bound = bloom.load(FIXTURES / "v3" / "store-bound.bloom")
    info = bound.info()
    assert info["store_bound"] and bound.generation == info["dataset_generation"] > 0
    bound.insert("more")
    kept = tmp_path / "kept.bloom"
    bound.save(kept)
    assert bloom.inspect(kept)["store_bound"]
    assert bloom.inspect(kept)["dataset_generation"] == info["dataset_generation"]
    moved = tmp_path / "moved.bloom"
    bound.save(moved, generation=info["dataset_generation"] + 1)
    assert not bloom.inspect(moved)["store_bound"]
    # A removal drops the binding: the store still holds the key, as far as it says.
    counting = bloom.BloomFilter(100, kind="counting")
    counting.insert("k")
    counting.remove("k")
    assert "k" not in counting
    with pytest.raises(bloom.InvalidArgumentError):
        counting.remove("never")
    with pytest.raises(bloom.InvalidArgumentError):
        bloom.BloomFilter(100).remove("k")


def test_pickle_round_trips_through_the_verified_snapshot():
    import pickle

    f = bloom.BloomFilter(1000, kind="scalable")
    f.insert_all(f"p{i}" for i in range(3000))
    back = pickle.loads(pickle.dumps(f))
    assert back.kind == "scalable" and all(back.contains_all(f"p{i}" for i in range(3000)))


def test_a_header_claiming_more_than_the_bytes_hold_is_refused_before_allocating():
    data = bloom.BloomFilter(10_000_000).to_bytes()
    head = data[:200]
    with pytest.raises(bloom.CorruptSnapshotError):
        bloom.loads(head, max_bytes=2**62)
    with pytest.raises(bloom.CorruptSnapshotError):
        bloom.inspect(head)
    # 0 and None both mean the default limit, as in the C ABI.
    assert bloom.loads(data, max_bytes=0).kind == "plain"


def test_threads_never_deadlock_on_errors_under_the_lock(tmp_path):
    f = bloom.BloomFilter(100_000)
    bad = [f"k{i}" for i in range(3000)] + [b"\xff"]
    stop = threading.Event()

    def failing():
        while not stop.is_set():
            with pytest.raises(bloom.KeyEncodingError):
                f.insert_all(bad)
            with pytest.raises(bloom.SnapshotIOError):
                f.save(tmp_path)

    threads = [threading.Thread(target=failing) for _ in range(2)]
    for t in threads:
        t.start()
    for i in range(20_000):
        f.insert(f"single-{i}")
        assert f"single-{i}" in f
    stop.set()
    for t in threads:
        t.join(timeout=60)
        assert not t.is_alive(), "a thread is stuck"


def test_every_snapshot_source_takes_a_bytearray():
    f = bloom.BloomFilter(1000)
    f.insert("k")
    data = f.to_bytes(generation=3)
    for read in (bloom.inspect, bloom.verify):
        assert read(bytearray(data)) == read(data)
        assert read(bytearray(data))["dataset_generation"] == 3
    assert "k" in bloom.loads(bytearray(data))
    with pytest.raises(TypeError):
        bloom.inspect(memoryview(data))
