#!/usr/bin/env python3
"""Independent witness vectors for the sha256-double rule at large m.

The `b += i + 1` step adds at most (k^3 - k) / 6 to a 64-bit value before the range
reduction, so at ordinary sizes it almost never moves a position: implementations that get
it wrong (`b += i`, `b` updated before `a`, no increment at all) agree with the rule on
every small filter. This script implements the rule as docs/format.md specifies it, with
Python's hashlib and integers, searches for keys whose positions differ from each of those
variants at m = 2^30 + 7 and k = 64, and records the keys with all their positions (plus an
unsalted and a salted key at m = 2^43). Regenerate with:

    python3 crates/bloom-core/tests/data/double_vectors.py > crates/bloom-core/tests/data/double_vectors.json
"""
import hashlib
import json

MASK = (1 << 64) - 1
M = (1 << 30) + 7
K = 64
M_MAX = 1 << 43


def digest(key: bytes, salt: bytes = b"") -> bytes:
    if salt:
        block = bytes([len(salt)]) + salt
        block = block + bytes(64 - len(block))
        return hashlib.sha256(block + key).digest()
    return hashlib.sha256(key).digest()


def positions(key: bytes, m: int, k: int, variant: str = "rule", salt: bytes = b""):
    d = digest(key, salt)
    a = int.from_bytes(d[0:8], "little")
    b = int.from_bytes(d[8:16], "little")
    out = []
    for i in range(k):
        out.append((a * m) >> 64)
        if variant == "rule":
            a = (a + b) & MASK
            b = (b + i + 1) & MASK
        elif variant == "b += i":
            a = (a + b) & MASK
            b = (b + i) & MASK
        elif variant == "b before a":
            b = (b + i + 1) & MASK
            a = (a + b) & MASK
        elif variant == "no increment":
            a = (a + b) & MASK
        else:
            raise ValueError(variant)
    return out


VARIANTS = ["b += i", "b before a", "no increment"]


def find_witnesses():
    found = {}
    n = 0
    while len(found) < len(VARIANTS):
        key = f"witness-{n}".encode()
        rule = positions(key, M, K)
        for variant in VARIANTS:
            if variant not in found and positions(key, M, K, variant) != rule:
                found[variant] = key.decode()
        n += 1
    return found


witnesses = find_witnesses()
cases = []
for variant, key in sorted(witnesses.items(), key=lambda kv: kv[1]):
    cases.append(
        {
            "key": key,
            "m": M,
            "k": K,
            "salt_hex": "",
            "refutes": variant,
            "positions": positions(key.encode(), M, K),
            "refuted_positions": positions(key.encode(), M, K, variant),
        }
    )
for key, salt in [("record-1", b""), ("record-1", b"witness-salt")]:
    cases.append(
        {
            "key": key,
            "m": M_MAX,
            "k": K,
            "salt_hex": salt.hex(),
            "refutes": "",
            "positions": positions(key.encode(), M_MAX, K, salt=salt),
            "refuted_positions": [],
        }
    )

print(json.dumps({"rule": "sha256-double", "cases": cases}, indent=1))
