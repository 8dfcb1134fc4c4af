# SPDX-License-Identifier: MIT
"""The Python examples of README.md and python/README.md run as written.

``test_readme.py LAUNCHER``: takes the first ``python`` block of README.md's
"From Python" section and of python/README.md's "Use" section, and runs each
as README.md says, ``mscclpp-run -n 2 python3 FILE`` (with this interpreter),
on the host backend. README.md's example must print what its ranks compute.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile

from harness import Checks, require_numpy

require_numpy()
checks = Checks("test_readme")
launcher = sys.argv[1]
TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def block(path, heading):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    start = text.find(heading + "\n")
    if start < 0:
        checks.fail(f"{path}: no section {heading!r}")
        return None
    m = re.compile(r"```python\n(.*?)```", re.S).search(text, start)
    if not m:
        checks.fail(f"{path}: no python block after {heading!r}")
        return None
    return m.group(1)


def run(code, what, cwd=None):
    with tempfile.TemporaryDirectory(prefix="mscclpp-py-readme-") as d:
        path = os.path.join(d, "example.py")
        with open(path, "w", encoding="utf-8") as f:
            f.write(code)
        p = subprocess.run([launcher, "-n", "2", "--timeout", "60", sys.executable, path], capture_output=True,
                           text=True, timeout=90, cwd=cwd)
    checks.true(p.returncode == 0, f"{what}: exit status {p.returncode}\n{p.stdout}{p.stderr}")
    return p.stdout


code = block(os.path.join(TOP, "README.md"), "### From Python")
if code is not None:
    out = run(code, "README.md's example")
    for r in range(2):
        want = f"[{r}] rank {r}: [3. 3. 3. 3.] [ 0  0  1 10]"
        checks.true(want in out, f"README.md's example prints {want!r}; it printed:\n{out}")
code = block(os.path.join(TOP, "README.md"), "### Execution plans: algorithms as data")
if code is not None:
    # (its block is indented under a list item)
    code = "\n".join(line[2:] if line.startswith("  ") else line for line in code.splitlines()) + "\n"
    out = run(code, "README.md's execution plan example", cwd=TOP)
    for r in range(2):
        want = f"[{r}] allreduce-oneshot-2ranks-LL 2 3.0"
        checks.true(want in out, f"README.md's plan example prints {want!r}; it printed:\n{out}")
code = block(os.path.join(TOP, "python", "README.md"), "## Use")
if code is not None:
    run(code, "python/README.md's example")
checks.done()
