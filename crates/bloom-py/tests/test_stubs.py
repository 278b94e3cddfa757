"""bloom.pyi says what the module really has: mypy's stubtest (installed with the test
requirements) compares the two, every function, parameter, default and class."""

import subprocess
import sys
from pathlib import Path

ALLOWLIST = Path(__file__).with_name("stubtest-allowlist.txt")


def test_the_type_stubs_match_the_module():
    done = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", "bloom", "--allowlist", str(ALLOWLIST)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
