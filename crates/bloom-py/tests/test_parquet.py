"""Parquet's own filters (written by parquet-mr, and by arrow-rs for every physical type)
answer through the Python package as `bloom parquet check` (checked against Parquet's own
readers in bloom-parquet's tests) answers."""

import struct

import pytest

import bloom
from conftest import ROOT

DATA = ROOT / "crates" / "bloom-parquet" / "tests" / "data"
PARQUET_MR = [DATA / "parquet-testing" / n for n in (
    "data_index_bloom_encoding_stats.parquet",
    "data_index_bloom_encoding_with_length.parquet",
)]
WRITTEN = ["Hello", "This is", "a", "test", "How", "are you", "doing ", "today", "the quick",
           "brown fox", "jumps", "over", "the lazy", "dog"]


def cli_answers(cli, path, column, keys):
    out = cli("parquet", "check", path, "--column", column, "--", *keys).stdout.decode()
    return [line.split("\t", 1)[0] == "maybe" for line in out.splitlines()]


@pytest.mark.parametrize("path", PARQUET_MR, ids=lambda p: p.name)
def test_parquet_mr_filters_answer_as_the_cli(path, cli):
    filters = bloom.from_parquet(path, "String")
    assert len(filters) >= 1 and all(f is not None for f in filters)
    probes = WRITTEN + [f"probe-{i}" for i in range(300)]
    ours = [any(f.contains_all([k])[0] for f in filters) for k in probes]
    assert ours == cli_answers(cli, path, "String", probes)
    assert all(ours[: len(WRITTEN)])
    info = filters[0].info()
    assert (info["layout"], info["rule"], info["encoding"]) == ("split-block-256", "xxh64", "utf8")
    # A filter of Parquet's becomes a verified snapshot like any other.
    back = bloom.loads(filters[0].to_bytes())
    assert back.contains_all(probes) == filters[0].contains_all(probes)


def test_typed_columns_take_the_plain_encoding(cli):
    path = DATA / "arrow-rs-types.parquet"
    ints = bloom.from_parquet(path, "large")
    # Values written (row i holds i * 1_000_000_007 - 2**40), and others.
    probes = [i * 1_000_000_007 - (1 << 40) for i in range(0, 1700, 7)] + list(range(-50, 250))
    ours = [any(f.contains(struct.pack("<q", v)) for f in ints if f is not None) for v in probes]
    assert ours == cli_answers(cli, path, "large", [str(v) for v in probes])
    assert all(ours[:243])


def test_blobs_and_refusals(tmp_path):
    blob = (DATA / "parquet-testing" / "bloom_filter.xxhash.bin").read_bytes()
    f = bloom.from_parquet_blob(blob)
    assert all(f.contains_all(["hello", "parquet", "bloom", "filter"]))
    with pytest.raises(bloom.UnsupportedSnapshotError):
        bloom.from_parquet_blob((DATA / "parquet-testing" / "bloom_filter.bin").read_bytes())
    with pytest.raises(bloom.CorruptSnapshotError):
        bloom.from_parquet_blob(blob[:20])
    with pytest.raises(bloom.InvalidArgumentError):
        bloom.from_parquet(PARQUET_MR[0], "no-such-column")
    with pytest.raises(bloom.UnsupportedSnapshotError):
        bloom.from_parquet(DATA / "parquet-testing" / "encrypt_columns_and_footer_bloom_filter.parquet.encrypted", "x")
    not_parquet = tmp_path / "x.parquet"
    not_parquet.write_bytes(b"not a parquet file at all")
    with pytest.raises(bloom.NotASnapshotError):
        bloom.from_parquet(not_parquet, "String")
