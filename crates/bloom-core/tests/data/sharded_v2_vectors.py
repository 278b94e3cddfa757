#!/usr/bin/env python3
"""Independent vectors for the sharded-v2 layout (layout 5) under the sha256-double rule.

This implements docs/format.md with Python's hashlib only (no xxhash needed), not with the
Rust code under test: positions of sample keys, and the whole payload of the golden fixture
`sha256-sharded-v2-salted` from its own key list. Regenerate with:

    python3 crates/bloom-core/tests/data/sharded_v2_vectors.py > crates/bloom-core/tests/data/sharded_v2_vectors.json
"""
import hashlib
import json
import pathlib

MASK = (1 << 64) - 1
FIXTURES = pathlib.Path(__file__).resolve().parents[4] / "fixtures" / "v2"


def salt_block(salt: bytes) -> bytes:
    block = bytes([len(salt)]) + salt
    return block + bytes(64 - len(block))


def words(key: bytes, salt: bytes):
    """sha256-double's (h1, h2): the first two little-endian words of the digest."""
    digest = hashlib.sha256((salt_block(salt) if salt else b"") + key).digest()
    return int.from_bytes(digest[0:8], "little"), int.from_bytes(digest[8:16], "little")


def rotl32(x: int) -> int:
    return ((x << 32) | (x >> 32)) & MASK


def positions(shards: int, m: int, k: int, key: bytes, salt: bytes = b""):
    h1, h2 = words(key, salt)
    shard_bits = m // shards
    shard = (h1 * shards) >> 64
    a, b = h2, rotl32(h1)
    out = []
    for i in range(k):
        out.append(shard * shard_bits + ((a * shard_bits) >> 64))
        a = (a + b) & MASK
        b = (b + i + 1) & MASK
    return out


def payload(shards, m, k, keys, salt):
    data = bytearray((m + 7) // 8)
    for key in keys:
        for bit in positions(shards, m, k, key, salt):
            data[bit // 8] |= 1 << (bit % 8)
    return bytes(data)


name, shards, m, k, salt = "sha256-sharded-v2-salted", 3, 3072, 5, b"golden-fixture-salt-shards"
keys = [json.loads(line).encode("utf-8") for line in (FIXTURES / f"{name}.keys").read_text("utf-8").splitlines()]
fixtures = [
    {
        "fixture": name,
        "rule": "sha256-double",
        "layout": f"sharded-v2-{shards}",
        "m": m,
        "k": k,
        "salt_hex": salt.hex(),
        "payload_hex": payload(shards, m, k, keys, salt).hex(),
    }
]

SAMPLE_KEYS = ["", "record-0", "key-00000000000000000001", "caf\u00e9", "\u4e2d\u6587", "x" * 300]
samples = []
for shards, m, k in [(1, 64 * 977, 7), (16, 64 * 16 * 977, 7), (256, 64 * 256 * 2, 22), (65536, 1 << 40, 64)]:
    for salt in [b"", b"sample-salt"]:
        samples.append(
            {
                "rule": "sha256-double",
                "layout": f"sharded-v2-{shards}",
                "m": m,
                "k": k,
                "salt_hex": salt.hex(),
                "positions": [
                    {"key": key, "positions": positions(shards, m, k, key.encode("utf-8"), salt)}
                    for key in SAMPLE_KEYS
                ],
            }
        )

print(json.dumps({"fixtures": fixtures, "samples": samples}, indent=1))
