# SPDX-License-Identifier: MIT
"""The package's type hints hold: ``mypy --strict`` over the package and its
build backend. Skipped when this Python has no mypy (Debian: mypy)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

from harness import Checks, skip

try:
    import mypy  # noqa: F401
except ImportError:
    skip(f"needs mypy for {sys.executable} (Debian: mypy)")

checks = Checks("test_types")
SOURCE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # python/
with tempfile.TemporaryDirectory(prefix="mscclpp-py-mypy-") as cache:
    p = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", cache, "mscclpp", "_build_backend"],
        cwd=SOURCE, capture_output=True, text=True, timeout=300,
    )
checks.true(p.returncode == 0, f"mypy --strict:\n{p.stdout}{p.stderr}")
print(p.stdout.strip())
checks.done()
