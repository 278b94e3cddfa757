"""The crawler example dedups across runs, and a damaged or stale snapshot never makes it
drop a new URL."""

import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "crawler_dedup.py"


def run(state, urls):
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), str(state)],
        input="".join(u + "\n" for u in urls),
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.split(), done.stderr


def test_crawler_dedup_across_runs(tmp_path):
    first = [f"https://example.com/{i}" for i in range(25_000)]
    new, _ = run(tmp_path, first + first[:10])
    assert new == first
    second = first[20_000:] + [f"https://example.com/new/{i}" for i in range(100)]
    new, _ = run(tmp_path, second)
    assert new == second[5_000:]

    # A damaged snapshot is rebuilt from the store: nothing is lost, nothing repeated.
    snapshot = tmp_path / "seen.bloom"
    data = bytearray(snapshot.read_bytes())
    data[-5] ^= 1
    snapshot.write_bytes(bytes(data))
    new, err = run(tmp_path, ["https://example.com/new/1", "https://example.com/fresh"])
    assert new == ["https://example.com/fresh"]
    assert "not trusted (corrupt" in err

    # A stale snapshot (older than the store) is rebuilt too.
    old = snapshot.read_bytes()
    run(tmp_path, ["https://example.com/later"])
    snapshot.write_bytes(old)
    new, err = run(tmp_path, ["https://example.com/later", "https://example.com/latest"])
    assert new == ["https://example.com/latest"]
    assert "rebuilding" in err
