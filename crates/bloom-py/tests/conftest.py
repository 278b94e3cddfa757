"""Shared paths: the repository's golden fixtures and the `bloom` command built beside the
package (`cargo xtask test` sets BLOOM_CLI; by default target/debug/bloom)."""

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "fixtures"


def cli_path() -> Path:
    path = Path(os.environ.get("BLOOM_CLI", ROOT / "target" / "debug" / "bloom"))
    if not path.exists():
        raise RuntimeError(
            f"{path} is missing: build it with `cargo build -p bloom-cli` (cargo xtask test does)"
        )
    return path


@pytest.fixture(scope="session")
def cli():
    """Runs the `bloom` command; returns the finished process (stdout as bytes)."""
    path = cli_path()

    def run(*args, check=True):
        done = subprocess.run([str(path), *map(str, args)], capture_output=True)
        if check and done.returncode != 0:
            raise AssertionError(f"bloom {' '.join(map(str, args))} failed: {done.stderr.decode()}")
        return done

    return run


def snapshot_fixtures():
    found = sorted(p for v in ("v1", "v2", "v3") for p in (FIXTURES / v).glob("*.bloom"))
    assert len(found) >= 45, f"only {len(found)} fixtures under {FIXTURES}"
    return found
