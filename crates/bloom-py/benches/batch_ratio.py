"""The Python package's batch forms against the Rust batch API, over the same 10^6 keys,
round by round (interleaved, medians), on a release build:

    python -m venv /tmp/venv && /tmp/venv/bin/pip install maturin
    VIRTUAL_ENV=/tmp/venv /tmp/venv/bin/maturin develop --release -m crates/bloom-py/Cargo.toml
    cargo build --release -p bloom-ffi --example batch_timing
    /tmp/venv/bin/python crates/bloom-py/benches/batch_ratio.py [KEYS] [ROUNDS]

The Python times include taking the keys from a list of str (what a pipeline pays), and,
for the packed forms, from one `bytes` object and an `array('q')` of offsets (an Arrow
column's layout); the Rust times take them from a Vec<String>.
"""

import json
from array import array
from itertools import accumulate
import statistics
import subprocess
import sys
import time
from pathlib import Path

import bloom

ROOT = Path(__file__).resolve().parents[3]
RUST = ROOT / "target" / "release" / "examples" / "batch_timing"


def python_round(keys, packed):
    times = []
    for insert_all, contains_all, given in (
        (bloom.BloomFilter.insert_all, bloom.BloomFilter.contains_all, (keys,)),
        (bloom.BloomFilter.insert_packed, bloom.BloomFilter.contains_packed, packed),
    ):
        f = bloom.BloomFilter(len(keys), 0.01)
        start = time.perf_counter_ns()
        insert_all(f, *given)
        times.append((time.perf_counter_ns() - start) / len(keys))
        start = time.perf_counter_ns()
        answers = contains_all(f, *given)
        times.append((time.perf_counter_ns() - start) / len(keys))
        assert all(answers) and len(answers) == len(keys)
        # Freed here, not in the next form's timing.
        del answers, f
    return times


def rust_round(n):
    out = subprocess.run([str(RUST), str(n)], capture_output=True, text=True, check=True).stdout
    result = json.loads(out)
    return result["insert_ns_per_key"], result["contains_ns_per_key"]


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 11
    keys = [f"key-{i:020d}" for i in range(n)]
    encoded = [k.encode() for k in keys]
    packed = (b"".join(encoded), array("q", accumulate((len(k) for k in encoded), initial=0)))
    py, rs = [], []
    for _ in range(rounds):
        py.append(python_round(keys, packed))
        rs.append(rust_round(n))
    ops = ("insert_all", "contains_all / contains_each", "insert_packed", "contains_packed / contains_each")
    for i, op in enumerate(ops):
        p = statistics.median(r[i] for r in py)
        r = statistics.median(r[i % 2] for r in rs)
        ratios = sorted(a[i] / b[i % 2] for a, b in zip(py, rs))
        q = statistics.quantiles(ratios, n=4)
        print(f"{op}: python {p:.1f} ns/key, rust {r:.1f} ns/key, ratio {p / r:.2f} (IQR {q[0]:.2f}-{q[2]:.2f})")


if __name__ == "__main__":
    main()
