# SPDX-License-Identifier: MIT
"""A PEP 517 build backend for the mscclpp Python package, standard library only.

Why not setuptools: with --no-build-isolation it needs the ``wheel`` package
too (setuptools before 70.1), which Debian's python3 lacks, and without it
pip fetches both from the network. The package is pure Python, so a wheel is
a zip of its files, the C headers (for kernels compiled at run time:
``mscclpp.include_dir()``) and three metadata files.

Hooks: build_wheel, build_sdist, build_editable (PEP 660: a .pth file
pointing at this directory) and their get_requires_* (nothing).
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile
from typing import Any, Dict, List, Optional, Tuple

NAME = "mscclpp"
SUMMARY = "Python bindings of mscclpp, a GPU-driven communication library (communicators, collectives)"
REQUIRES_PYTHON = ">=3.8"

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # python/
# The C headers: the checkout's include/ (building from python/ in a clone),
# or the include/ an sdist carries.
HEADER_DIRS = [os.path.join(HERE, "include"), os.path.join(os.path.dirname(HERE), "include")]
FIXED_TIME = (1980, 1, 1, 0, 0, 0)  # reproducible archives


def _version() -> str:
    with open(os.path.join(HERE, NAME, "_version.py"), encoding="utf-8") as f:
        m = re.search(r'^__version__ = "([^"]+)"', f.read(), re.M)
    if not m:
        raise RuntimeError("mscclpp/_version.py has no __version__")
    return m.group(1)


def _readme() -> str:
    try:
        with open(os.path.join(HERE, "README.md"), encoding="utf-8") as f:
            return f.read()
    except OSError:
        return ""


def _metadata(version: str) -> str:
    return (
        "Metadata-Version: 2.1\n"
        f"Name: {NAME}\n"
        f"Version: {version}\n"
        f"Summary: {SUMMARY}\n"
        "License: MIT\n"
        f"Requires-Python: {REQUIRES_PYTHON}\n"
        "Classifier: License :: OSI Approved :: MIT License\n"
        "Classifier: Operating System :: POSIX :: Linux\n"
        "Classifier: Typing :: Typed\n"
        "Description-Content-Type: text/markdown\n"
        "\n" + _readme()
    )


def _package_files() -> List[Tuple[str, str]]:
    """(archive name, path) of the package's files: its .py files, the
    py.typed marker, and the headers under mscclpp/include/mscclpp/."""
    out = []
    pkg = os.path.join(HERE, NAME)
    for root, dirs, files in os.walk(pkg):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__" and d != "include")
        for f in sorted(files):
            if f.endswith(".py") or f == "py.typed":
                path = os.path.join(root, f)
                out.append((os.path.relpath(path, HERE).replace(os.sep, "/"), path))
    for d in HEADER_DIRS:
        hdir = os.path.join(d, "mscclpp")
        if os.path.isfile(os.path.join(hdir, "core.h")):
            for f in sorted(os.listdir(hdir)):
                if f.endswith(".h"):
                    out.append((f"{NAME}/include/mscclpp/{f}", os.path.join(hdir, f)))
            break
    return out


def _zip_add(zf: zipfile.ZipFile, name: str, data: bytes, record: List[str]) -> None:
    info = zipfile.ZipInfo(name, FIXED_TIME)
    info.external_attr = 0o644 << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    zf.writestr(info, data)
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    record.append(f"{name},sha256={digest},{len(data)}")


def _write_wheel(wheel_directory: str, files: Dict[str, bytes]) -> str:
    version = _version()
    tag = "py3-none-any"
    dist_info = f"{NAME}-{version}.dist-info"
    filename = f"{NAME}-{version}-{tag}.whl"
    meta = {
        f"{dist_info}/METADATA": _metadata(version).encode(),
        f"{dist_info}/WHEEL": (
            f"Wheel-Version: 1.0\nGenerator: mscclpp_build\nRoot-Is-Purelib: true\nTag: {tag}\n"
        ).encode(),
        f"{dist_info}/top_level.txt": f"{NAME}\n".encode(),
    }
    record: List[str] = []
    with zipfile.ZipFile(os.path.join(wheel_directory, filename), "w") as zf:
        for name in sorted(files):
            _zip_add(zf, name, files[name], record)
        for name, data in meta.items():
            _zip_add(zf, name, data, record)
        record.append(f"{dist_info}/RECORD,,")
        info = zipfile.ZipInfo(f"{dist_info}/RECORD", FIXED_TIME)
        info.external_attr = 0o644 << 16
        zf.writestr(info, "\n".join(record) + "\n")
    return filename


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


# ---- PEP 517 / PEP 660 hooks ----------------------------------------------------


def get_requires_for_build_wheel(config_settings: Optional[Dict[str, Any]] = None) -> List[str]:
    return []


def get_requires_for_build_sdist(config_settings: Optional[Dict[str, Any]] = None) -> List[str]:
    return []


def get_requires_for_build_editable(config_settings: Optional[Dict[str, Any]] = None) -> List[str]:
    return []


def build_wheel(
    wheel_directory: str, config_settings: Optional[Dict[str, Any]] = None, metadata_directory: Optional[str] = None
) -> str:
    return _write_wheel(wheel_directory, {name: _read(path) for name, path in _package_files()})


def build_editable(
    wheel_directory: str, config_settings: Optional[Dict[str, Any]] = None, metadata_directory: Optional[str] = None
) -> str:
    # The package is imported from this directory (headers from the
    # checkout's include/, found by mscclpp.include_dir()).
    return _write_wheel(wheel_directory, {f"{NAME}_editable.pth": (HERE + "\n").encode()})


def build_sdist(sdist_directory: str, config_settings: Optional[Dict[str, Any]] = None) -> str:
    version = _version()
    top = f"{NAME}-{version}"
    filename = f"{top}.tar.gz"
    entries = [(n.replace(f"{NAME}/include/", "include/", 1) if "/include/" in n else n, p) for n, p in _package_files()]
    for extra in ("pyproject.toml", "README.md", "_build_backend/mscclpp_build.py"):
        if os.path.isfile(os.path.join(HERE, extra)):
            entries.append((extra, os.path.join(HERE, extra)))
    pkg_info = _metadata(version).encode()

    def add(tf: tarfile.TarFile, name: str, data: bytes) -> None:
        info = tarfile.TarInfo(f"{top}/{name}")
        info.size = len(data)
        info.mode = 0o644
        info.mtime = 315532800  # FIXED_TIME
        tf.addfile(info, io.BytesIO(data))

    with tarfile.open(os.path.join(sdist_directory, filename), "w:gz", format=tarfile.PAX_FORMAT) as tf:
        for name, path in sorted(entries):
            add(tf, name, _read(path))
        add(tf, "PKG-INFO", pkg_info)
    return filename
