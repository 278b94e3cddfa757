#!/usr/bin/env python3
"""Independent vectors for the sha256-split4 rule (m = 1024, k = 4, UTF-8 keys).

This re-implements the reference article's Swift code (bloom-check.swift) with Python's
hashlib, not with the Rust code under test. Regenerate with:

    python3 crates/bloom-core/tests/data/split4_vectors.py > crates/bloom-core/tests/data/split4_vectors.json
"""
import hashlib
import json

M = 1024


def positions(key: str):
    digest = hashlib.sha256(key.encode("utf-8")).digest()
    return [int.from_bytes(digest[i : i + 8], "big") % M for i in range(0, 32, 8)]


def snapshot(keys):
    data = bytearray(M // 8)
    for key in keys:
        for bit in positions(key):
            data[bit // 8] |= 1 << (bit % 8)
    return bytes(data)


contract_keys = [f"record-{i}" for i in range(80)] + [""]
sample_keys = [
    "",
    "record-0",
    "record-79",
    "caf\u00e9",
    "cafe\u0301",
    "\u4e2d\u6587\u952e",
    "\U0001F600\U0001F680",
    "x" * 10000,
]

print(
    json.dumps(
        {
            "m": M,
            "k": 4,
            "positions": [{"key": k, "positions": positions(k)} for k in sample_keys],
            "contract_keys": contract_keys,
            "contract_snapshot_hex": snapshot(contract_keys).hex(),
        },
        ensure_ascii=True,
        indent=1,
    )
)
