"""Guava's streams, written by real Guava 31 on the JVM (fixtures/guava), answer through the
Python package as Guava's own `mightContain` answered, and write back byte for byte."""

import struct

import pytest

import bloom
from conftest import FIXTURES

GUAVA = FIXTURES / "guava"
INDEX = [line.split("\t") for line in (GUAVA / "INDEX").read_text().splitlines()]


def key_of(text, funnel):
    # Funnels.longFunnel() hashes the number's 8 little-endian bytes.
    return struct.pack("<q", int(text)) if funnel == "long" else text


@pytest.mark.parametrize("name,strategy,funnel,items,fpp", INDEX, ids=[row[0] for row in INDEX])
def test_guava_stream_answers_as_guava(name, strategy, funnel, items, fpp):
    stream = GUAVA / f"{name}.guava"
    ours = bloom.from_guava(stream, "bytes" if funnel == "long" else funnel)
    probes = [line.split("\t", 1) for line in (GUAVA / f"{name}.probes").read_text(encoding="utf-8").splitlines()]
    expected = [answer == "1" for answer, _ in probes]
    keys = [key_of(key, funnel) for _, key in probes]
    assert ours.contains_all(keys) == expected
    assert [k in ours for k in keys] == expected
    assert ours.to_guava() == stream.read_bytes()
    assert bloom.from_guava(stream.read_bytes(), "bytes" if funnel == "long" else funnel).contains_all(keys) == expected


def test_guava_errors():
    with pytest.raises(bloom.InvalidArgumentError):
        bloom.from_guava(b"", "utf-16")
    with pytest.raises(bloom.CorruptSnapshotError):
        bloom.from_guava(b"\x01\x03\x00", "utf8")
    with pytest.raises(bloom.InvalidArgumentError) as raised:
        bloom.BloomFilter(100).to_guava()
    assert "Guava" in str(raised.value)
