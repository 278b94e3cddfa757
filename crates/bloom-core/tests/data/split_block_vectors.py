#!/usr/bin/env python3
"""Independent vectors for the split-block layouts (6 and 7) and the xxh64 and xxh3-64 rules.

This implements docs/format.md with Python's hashlib and the `xxhash` package (xxHash 0.8,
`pip install xxhash`), not with the Rust code under test: the 8 positions of sample keys for
every rule the split-block layouts take, salted and not, and the whole payload of a small
filter of each. Regenerate with:

    python3 crates/bloom-core/tests/data/split_block_vectors.py > crates/bloom-core/tests/data/split_block_vectors.json
"""
import hashlib
import json

import xxhash

MASK32 = (1 << 32) - 1
SALT = [0x47B6137B, 0x44974D91, 0x8824AD5B, 0xA2B7289D,
        0x705495C7, 0x2DF1424B, 0x9EFC4947, 0x5C6BFB31]


def salt_block(salt: bytes) -> bytes:
    block = bytes([len(salt)]) + salt
    return block + bytes(64 - len(block))


def seed_of(salt: bytes) -> int:
    if not salt:
        return 0
    return int.from_bytes(hashlib.sha256(salt_block(salt)).digest()[0:8], "little")


def h64(rule: str, key: bytes, salt: bytes) -> int:
    """The one 64-bit hash the split-block layouts read: h, or h1."""
    if rule == "xxh64":
        return xxhash.xxh64_intdigest(key, seed_of(salt))
    if rule == "xxh3-64":
        return xxhash.xxh3_64_intdigest(key, seed_of(salt))
    if rule == "xxh3-128":
        return xxhash.xxh3_128_intdigest(key, seed_of(salt)) & ((1 << 64) - 1)
    if rule == "sha256-double":
        digest = hashlib.sha256((salt_block(salt) if salt else b"") + key).digest()
        return int.from_bytes(digest[0:8], "little")
    raise ValueError(rule)


def positions(rule: str, layout: str, m: int, key: bytes, salt: bytes = b""):
    block_bits = 256 if layout == "split-block-256" else 512
    word_bits = block_bits // 8
    shift = 27 if block_bits == 256 else 26
    blocks = m // block_bits
    h = h64(rule, key, salt)
    block = ((h >> 32) * blocks) >> 32
    x = h & MASK32
    return [block * block_bits + j * word_bits + (((x * SALT[j]) & MASK32) >> shift)
            for j in range(8)]


def payload(rule, layout, m, keys, salt):
    bits = bytearray(m // 8)
    for key in keys:
        for p in positions(rule, layout, m, key, salt):
            bits[p // 8] |= 1 << (p % 8)
    return bits.hex()


samples = []
filters = []
for layout, m in [("split-block-256", 256 * 97), ("split-block-512", 512 * 61)]:
    for rule in ["xxh64", "xxh3-64", "xxh3-128", "sha256-double"]:
        for salt in [b"", b"split salt"]:
            for key in [b"", b"a", b"hello", b"record-00000000000000042", "caf\u00e9".encode(), bytes(range(200))]:
                samples.append({"rule": rule, "layout": layout, "m": m, "salt": salt.hex(),
                                "key": key.hex(), "positions": positions(rule, layout, m, key, salt)})
            keys = [f"key-{i}".encode() for i in range(300)]
            filters.append({"rule": rule, "layout": layout, "m": m, "salt": salt.hex(),
                            "keys": "key-0 .. key-299", "payload": payload(rule, layout, m, keys, salt)})

print(json.dumps({"xxhash": xxhash.XXHASH_VERSION, "samples": samples, "filters": filters}, indent=1))
