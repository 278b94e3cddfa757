"""Lists of keys, whose `str` keys are copied out a chunk at a time so that the GIL can be
released: every kind of list answers as one key at a time does, and a list another thread
changes meanwhile is read as it is, never with a crash."""

import threading
import unicodedata

import bloom


class Text(str):
    """A `str` subclass: still a text key."""


def test_lists_of_every_kind_answer_as_single_calls():
    huge = "h" * (3 << 20)  # past what one chunk copies: taken by reference
    composed = unicodedata.normalize("NFC", "caf\u00e9")
    decomposed = unicodedata.normalize("NFD", composed)
    kinds = [
        [f"k{i}" for i in range(10_000)],
        [f"k{i}" if i % 7 else f"k{i}".encode() for i in range(10_000)],
        ["a", huge, "b", huge + "x", "c"],
        [Text("sub"), "plain", composed, decomposed, "\u00e9t\u00e9", ""],
        # Every storage kind of str: ASCII (read in place), Latin-1, two and four bytes a
        # character, and a subclass's (which CPython stores apart from the object).
        ["ascii", "\u00e9t\u00e9", "\u65e5\u672c\u8a9e", "\U0001f600 smile", Text("ascii"), Text("\u00e9")] * 500,
        [b"only", b"bytes"] * 3000,
    ]
    for keys in kinds:
        f = bloom.BloomFilter(50_000)
        one = bloom.BloomFilter(50_000)
        added = sum(one.insert(k) for k in keys)
        assert f.insert_all(keys) == added
        assert f.to_bytes() == one.to_bytes()
        probes = keys + [f"absent{i}" for i in range(2_000)] + [decomposed + "!"]
        assert f.contains_all(probes) == [one.contains(k) for k in probes]
    # A decomposed key is the composed one under the default encoding (NFC).
    f = bloom.BloomFilter(1_000)
    f.insert_all([decomposed])
    assert f.contains_all([composed]) == [True]


def test_a_list_changed_by_another_thread_is_read_as_it_is():
    f = bloom.BloomFilter(1_000_000)
    head = [f"head{i}" for i in range(50_000)]
    keys = head + [f"tail{i}" for i in range(50_000)]
    stop = threading.Event()
    started = threading.Event()

    def change():
        while not stop.is_set():
            del keys[-20_000:]
            keys.extend(f"x{i}" for i in range(20_000))
            started.set()

    changer = threading.Thread(target=change)
    changer.start()
    started.wait(timeout=60)
    errors = []
    try:
        for _ in range(30):
            try:
                f.insert_all(keys)
                answers = f.contains_all(keys)
                assert len(answers) <= 100_000
            except BaseException as error:  # a crash (PanicException) is not an Exception
                errors.append(error)
    finally:
        stop.set()
        changer.join()
    assert errors == []
    # The head was never changed: every one of its keys went in.
    assert all(f.contains_all(head))
