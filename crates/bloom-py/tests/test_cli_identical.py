"""A snapshot written by Python is byte for byte the one `bloom build` writes for the same
keys and options."""

import pytest

import bloom

KEYS = [f"record-{i}" for i in range(3000)] + ["Straße", "  Mixed Case ", "e\u0301"]

CASES = [
    ({}, []),
    ({"false_positive_rate": 0.001}, ["--fpr", "0.001"]),
    ({"false_positive_rate": 0.2}, ["--fpr", "0.2"]),
    ({"rule": "xxh3-128", "layout": "standard"}, ["--rule", "xxh3-128", "--layout", "standard"]),
    ({"salt": bytes.fromhex("00112233445566778899aabbccddeeff")}, ["--salt", "00112233445566778899aabbccddeeff"]),
    ({"encoding": "nfc-trim-lower"}, ["--encoding", "nfc-trim-lower"]),
    ({"encoding": "utf8", "rule": "guava-mitz64"}, ["--encoding", "utf8", "--rule", "guava-mitz64"]),
    ({"kind": "counting"}, ["--counting"]),
    ({"kind": "scalable"}, ["--scalable"]),
]


@pytest.mark.parametrize("options,args", CASES, ids=lambda c: repr(c))
def test_python_snapshot_is_the_cli_snapshot(options, args, cli, tmp_path):
    items = 2000  # under the key count: a scalable filter grows a stage
    options = dict(options)
    fpr = options.pop("false_positive_rate", 0.01)
    ours = bloom.BloomFilter(items, fpr, **options)
    half = len(KEYS) // 2
    for key in KEYS[:half]:
        ours.insert(key)
    ours.insert_all(KEYS[half:])
    python_file = tmp_path / "python.bloom"
    ours.save(python_file, generation=9)

    key_file = tmp_path / "keys.txt"
    key_file.write_text("".join(k + "\n" for k in KEYS), encoding="utf-8")
    cli_file = tmp_path / "cli.bloom"
    if "--fpr" not in args:
        args = [*args, "--fpr", str(fpr)]
    cli("build", "--items", items, *args, "--generation", 9, "--keys", key_file, "-o", cli_file)
    assert python_file.read_bytes() == cli_file.read_bytes()
