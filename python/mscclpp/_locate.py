# SPDX-License-Identifier: MIT
"""Where the C library and its headers are, without importing anything else.

The library is looked for, in order:

1. ``MSCCLPP_LIBRARY``: the path of ``libmscclpp.so`` (nothing else is
   tried when it is set, so a wrong path is an error, not a silent fallback);
2. next to this package (``mscclpp/libmscclpp.so*``);
3. in a build tree of the source checkout this package sits in
   (``<clone>/build/`` first, then other ``<clone>/build*/`` trees built
   without sanitizers: a sanitized library cannot be loaded into Python,
   whose own runtime is not instrumented);
4. by the dynamic loader (``LD_LIBRARY_PATH``, ``ldconfig``'s cache: where
   ``cmake --install`` put it).
"""

from __future__ import annotations

import ctypes.util
import glob
import os
from typing import List, Optional, Tuple

_PKG_DIR = os.path.dirname(os.path.abspath(__file__))
# python/mscclpp/ -> the clone's top (holds include/mscclpp/core.h when this
# package is used from a source checkout).
_SOURCE_TOP = os.path.dirname(os.path.dirname(_PKG_DIR))
_LIB_NAMES = ("libmscclpp.so", "libmscclpp.so.0")


def _sanitized(build_dir: str) -> bool:
    cache = os.path.join(build_dir, "CMakeCache.txt")
    try:
        with open(cache, encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("MSCCLPP_SANITIZE:"):
                    return line.split("=", 1)[1].strip() != ""
    except OSError:
        pass
    return False


def _build_tree_candidates() -> List[str]:
    if not os.path.isfile(os.path.join(_SOURCE_TOP, "include", "mscclpp", "core.h")):
        return []
    first = os.path.join(_SOURCE_TOP, "build")
    others = sorted(d for d in glob.glob(os.path.join(_SOURCE_TOP, "build*")) if d != first)
    found = []
    for d in [first] + others:
        lib = os.path.join(d, "libmscclpp.so")
        if os.path.isfile(lib) and not _sanitized(d):
            found.append(lib)
    return found


def library_candidates() -> Tuple[List[str], bool]:
    """(paths or loader names to try in order, whether MSCCLPP_LIBRARY set them)."""
    env = os.environ.get("MSCCLPP_LIBRARY", "")
    if env:
        return [env], True
    cands: List[str] = []
    for name in _LIB_NAMES:
        p = os.path.join(_PKG_DIR, name)
        if os.path.isfile(p):
            cands.append(p)
    cands.extend(_build_tree_candidates())
    cands.extend(_LIB_NAMES)  # the dynamic loader's search
    found = ctypes.util.find_library("mscclpp")
    if found and found not in cands:
        cands.append(found)
    return cands, False


def include_dir_candidates(library_path: Optional[str]) -> List[str]:
    """Directories that may hold ``mscclpp/core.h``, best first."""
    cands = []
    cands.append(os.path.join(_PKG_DIR, "include"))  # copied into the wheel
    cands.append(os.path.join(_SOURCE_TOP, "include"))  # a source checkout
    if library_path and os.path.isabs(library_path):
        libdir = os.path.dirname(os.path.realpath(library_path))
        cands.append(os.path.join(os.path.dirname(libdir), "include"))  # <prefix>/lib -> <prefix>/include
        # a build tree: CMake's cache names the source directory
        try:
            with open(os.path.join(libdir, "CMakeCache.txt"), encoding="utf-8", errors="replace") as f:
                for line in f:
                    if line.startswith("mscclpp_SOURCE_DIR:"):
                        cands.append(os.path.join(line.split("=", 1)[1].strip(), "include"))
                        break
        except OSError:
            pass
    return cands
