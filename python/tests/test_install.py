# SPDX-License-Identifier: MIT
"""``pip install ./python`` works offline and the installed package imports.

One process, no launcher. Installs the package with
``pip install --no-build-isolation --no-deps --target DIR`` (and once more
with pip's default build isolation), with the package index switched off,
then imports it from DIR in a fresh interpreter that cannot see the source
tree, and checks that it loads the library (MSCCLPP_LIBRARY), reports its
version, and finds the headers installed with it. Skipped when this Python
has no pip.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile

from harness import Checks, skip

checks = Checks("test_install")
SOURCE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # python/

if subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True).returncode != 0:
    skip(f"needs pip for {sys.executable} (Debian: python3-pip)")

# No index, no network, no user configuration, no bytecode in the source tree.
ENV = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_CONFIG_FILE=os.devnull,
           PYTHONDONTWRITEBYTECODE="1", PIP_NO_CACHE_DIR="1")
ENV.pop("PYTHONPATH", None)

CHECK = r"""
import os, sys, mscclpp
target = sys.argv[1]
pkg = os.path.dirname(mscclpp.__file__)
assert pkg == os.path.join(target, "mscclpp"), ("imported from", pkg)
assert mscclpp.version() == mscclpp.__version__, (mscclpp.version(), mscclpp.__version__)
inc = mscclpp.include_dir()
assert inc == os.path.join(pkg, "include"), ("include_dir", inc)
assert os.path.isfile(os.path.join(inc, "mscclpp", "coll.h"))
assert os.path.isfile(os.path.join(pkg, "py.typed"))
print("installed", mscclpp.__version__, "from", pkg)
"""


def install(extra, what):
    target = tempfile.mkdtemp(prefix="mscclpp-py-install-")
    try:
        cmd = [sys.executable, "-m", "pip", "install", "--no-deps", "--target", target, *extra, SOURCE]
        p = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=300)
        if p.returncode != 0:
            checks.fail(f"{what}: {' '.join(cmd)} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
            return
        # a fresh interpreter that sees only the target (cwd there too)
        p = subprocess.run([sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {target!r})\n" + CHECK, target],
                           env=ENV, cwd=target, capture_output=True, text=True, timeout=60)
        checks.true(p.returncode == 0, f"{what}: the installed package: {p.stdout}{p.stderr}")
        if p.returncode == 0:
            print(f"{what}: {p.stdout.strip()}")
    finally:
        shutil.rmtree(target, ignore_errors=True)


install(["--no-build-isolation"], "pip install --no-build-isolation")
install([], "pip install (isolated build)")
checks.true(not os.path.exists(os.path.join(SOURCE, "build")), "the install left no build/ in python/")
checks.done()
