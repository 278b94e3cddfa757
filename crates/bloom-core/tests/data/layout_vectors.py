#!/usr/bin/env python3
"""Independent vectors for the xxh3-128 rule and the blocked-512, sharded and counting-4bit
layouts.

This implements docs/format.md with Python's hashlib and the `xxhash` package (xxHash 0.8,
`pip install xxhash`), not with the Rust code under test: positions of sample keys for every
new rule x layout combination, and the whole payload of each golden fixture that uses one,
from the fixture's own key list. Regenerate with:

    python3 crates/bloom-core/tests/data/layout_vectors.py > crates/bloom-core/tests/data/layout_vectors.json
"""
import hashlib
import json
import pathlib
import unicodedata

import xxhash

MASK = (1 << 64) - 1
BLOCK_STEP = 0x9E3779B97F4A7C15
FIXTURES = pathlib.Path(__file__).resolve().parents[4] / "fixtures" / "v2"


def salt_block(salt: bytes) -> bytes:
    block = bytes([len(salt)]) + salt
    return block + bytes(64 - len(block))


def words(rule: str, key: bytes, salt: bytes):
    """The rule's (h1, h2)."""
    if rule == "sha256-double":
        digest = hashlib.sha256((salt_block(salt) if salt else b"") + key).digest()
        return int.from_bytes(digest[0:8], "little"), int.from_bytes(digest[8:16], "little")
    if rule == "xxh3-128":
        seed = 0
        if salt:
            seed = int.from_bytes(hashlib.sha256(salt_block(salt)).digest()[0:8], "little")
        h = xxhash.xxh3_128_intdigest(key, seed)
        return h & MASK, h >> 64
    raise ValueError(rule)


def positions(rule: str, layout: str, m: int, k: int, key: bytes, salt: bytes = b""):
    h1, h2 = words(rule, key, salt)
    out = []
    if layout in ("standard", "counting-4bit"):
        a, b = h1, h2
        for i in range(k):
            out.append((a * m) >> 64)
            a = (a + b) & MASK
            b = (b + i + 1) & MASK
    elif layout == "blocked-512":
        block = (h1 * (m // 512)) >> 64
        x = h2
        for _ in range(k):
            out.append(block * 512 + (x >> 55))
            x = (x * BLOCK_STEP) & MASK
    elif layout.startswith("sharded-"):
        shards = int(layout[len("sharded-"):])
        shard_bits = m // shards
        shard = (h1 * shards) >> 64
        a, b = h2, h1
        for i in range(k):
            out.append(shard * shard_bits + ((a * shard_bits) >> 64))
            a = (a + b) & MASK
            b = (b + i + 1) & MASK
    else:
        raise ValueError(layout)
    return out


def encode(encoding: str, key: str) -> bytes:
    if encoding in ("bytes", "utf8"):
        return key.encode("utf-8")
    if encoding == "nfc":
        return unicodedata.normalize("NFC", key).encode("utf-8")
    if encoding == "nfc-trim-lower":
        # White_Space trimming; the fixture keys use only characters on which Python's
        # str.strip agrees with it.
        text = unicodedata.normalize("NFC", key).strip().lower()
        return unicodedata.normalize("NFC", text).encode("utf-8")
    raise ValueError(encoding)


def payload(rule, layout, m, k, keys, salt):
    data = bytearray((m + 7) // 8)
    for key in keys:
        for bit in positions(rule, layout, m, k, key, salt):
            data[bit // 8] |= 1 << (bit % 8)
    return bytes(data)


def counting_payload(rule, m, k, keys, removed, salt):
    """counting-4bit: insert `keys` then `removed` (each counter +1, staying at 15), then
    remove `removed` (each counter below 15 -1); counter i in the low nibble of byte i // 2
    for even i, the high nibble for odd i."""
    counters = [0] * m
    for key in keys + removed:
        for p in positions(rule, "counting-4bit", m, k, key, salt):
            counters[p] = min(counters[p] + 1, 15)
    for key in removed:
        for p in positions(rule, "counting-4bit", m, k, key, salt):
            if counters[p] < 15:
                counters[p] -= 1
    data = bytearray((m + 1) // 2)
    for i, c in enumerate(counters):
        data[i // 2] |= c << (4 * (i % 2))
    return bytes(data)


# The golden fixtures of the new combinations: name, rule, layout, m, k, encoding, salt.
FIXTURE_CASES = [
    ("xxh3-standard", "xxh3-128", "standard", 3001, 7, "nfc", b""),
    ("xxh3-blocked", "xxh3-128", "blocked-512", 4096, 6, "nfc", b""),
    ("xxh3-blocked-salted-large-k", "xxh3-128", "blocked-512", 2048, 23, "utf8", b"golden-fixture-salt-xxh3"),
    ("sha256-blocked", "sha256-double", "blocked-512", 4096, 6, "bytes", b""),
    ("sha256-blocked-salted", "sha256-double", "blocked-512", 1536, 9, "nfc-trim-lower", b"golden-fixture-salt-v2"),
    ("xxh3-sharded", "xxh3-128", "sharded-8", 8192, 7, "nfc", b""),
    ("sha256-sharded-salted", "sha256-double", "sharded-3", 3072, 5, "utf8", b"golden-fixture-salt-shards"),
    ("counting-xxh3", "xxh3-128", "counting-4bit", 2001, 5, "utf8", b""),
    ("counting-sha256-salted-saturated", "sha256-double", "counting-4bit", 61, 4, "nfc", b"golden-fixture-salt-counting"),
]

SAMPLE_KEYS = ["", "record-0", "key-00000000000000000001", "caf\u00e9", "\u4e2d\u6587", "x" * 300]

fixtures = []
for name, rule, layout, m, k, encoding, salt in FIXTURE_CASES:
    keys_file = FIXTURES / f"{name}.keys"
    keys = [encode(encoding, json.loads(line)) for line in keys_file.read_text("utf-8").splitlines()]
    if layout == "counting-4bit":
        removed_file = FIXTURES / f"{name}.removed"
        removed = [encode(encoding, json.loads(line)) for line in removed_file.read_text("utf-8").splitlines()]
        data = counting_payload(rule, m, k, keys, removed, salt)
    else:
        data = payload(rule, layout, m, k, keys, salt)
    fixtures.append(
        {
            "fixture": name,
            "rule": rule,
            "layout": layout,
            "m": m,
            "k": k,
            "salt_hex": salt.hex(),
            "payload_hex": data.hex(),
        }
    )

samples = []
for rule in ["sha256-double", "xxh3-128"]:
    for layout, m, k in [
        ("standard", 1_000_003, 7),
        ("blocked-512", 512 * 1953, 6),
        ("blocked-512", 1 << 33, 64),
        ("sharded-16", 64 * 16 * 977, 7),
        ("sharded-65536", 1 << 40, 64),
    ]:
        for salt in [b"", b"sample-salt"]:
            samples.append(
                {
                    "rule": rule,
                    "layout": layout,
                    "m": m,
                    "k": k,
                    "salt_hex": salt.hex(),
                    "positions": [
                        {"key": key, "positions": positions(rule, layout, m, k, key.encode("utf-8"), salt)}
                        for key in SAMPLE_KEYS
                    ],
                }
            )

print(json.dumps({"xxhash": xxhash.XXHASH_VERSION, "fixtures": fixtures, "samples": samples}, indent=1))
