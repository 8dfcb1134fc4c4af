# SPDX-License-Identifier: MIT
"""mscclpp from Python: communicators, their bootstrap and the collectives.

A thin layer over the C library's public API (include/mscclpp/*.h), through
``ctypes`` only: nothing to compile, no dependency outside the standard
library. The library is loaded at the first call that needs it (see
:func:`library_path` for where it is looked for; ``MSCCLPP_LIBRARY`` names
it). Failures raise :class:`MscclppError` (a subclass per status) carrying
the status and the library's reason; bad arguments raise TypeError or
ValueError naming the argument, before the library is called.

    import numpy as np, mscclpp
    with mscclpp.Communicator.from_env() as comm:    # under mscclpp-run -n N
        x = np.full(4, comm.rank, dtype=np.float32)
        comm.all_reduce(x)                            # in place: sum over ranks
"""

from __future__ import annotations

import os
from ctypes import byref, c_int, create_string_buffer
from typing import List, NamedTuple, Tuple

from . import _lib
from ._channels import (
    Allocation,
    Connection,
    MemKind,
    MemoryChannel,
    PortChannel,
    PortSemaphoreMem,
    RegisteredMemory,
    Transport,
)
from ._comm import ArrayLike, Communicator, StreamLike, UniqueId, coll_algo_names, group
from ._errors import (
    AbortedError,
    InProgressError,
    InternalError,
    InvalidArgumentError,
    InvalidUsageError,
    MscclppError,
    MscclppSystemError,
    MscclppTimeoutError,
    RemoteError,
    Status,
    UnhandledCudaError,
)
from ._lib import LibraryNotFoundError, ParamInfoStruct
from ._plan import Plan, PlanInfo
from ._locate import include_dir_candidates
from ._types import DataType, DTypeLike, OpLike, ReduceOp
from ._version import __version__

SUM = ReduceOp.SUM
PROD = ReduceOp.PROD
MAX = ReduceOp.MAX
MIN = ReduceOp.MIN
AVG = ReduceOp.AVG


def library_path() -> str:
    """The path of the loaded libmscclpp.so (loading it if needed).

    Looked for in order: ``MSCCLPP_LIBRARY`` (only there when set); next to
    this package; the build trees of the source checkout this package sits in
    (``build/`` first, sanitized trees skipped); the dynamic loader's path
    (``LD_LIBRARY_PATH``, ldconfig). Raises :class:`LibraryNotFoundError`.
    """
    return _lib.library_path()


def version() -> str:
    """The C library's version, ``"MAJOR.MINOR.PATCH"`` (``mscclppGetVersion``)."""
    v = c_int()
    _lib.call("mscclppGetVersion", byref(v))
    return f"{v.value // 10000}.{v.value // 100 % 100}.{v.value % 100}"


def include_dir() -> str:
    """The directory that holds ``mscclpp/*.h`` (pass it as ``-I`` to kernels
    compiled at run time): the headers copied into the installed package, the
    source checkout's ``include/``, or the one next to the library
    (``<prefix>/include`` for ``<prefix>/lib``, or a build tree's source).
    Raises FileNotFoundError when none has ``mscclpp/core.h``."""
    try:
        lib_path = _lib.library_path()
    except LibraryNotFoundError:
        lib_path = None
    cands = include_dir_candidates(lib_path)
    for d in cands:
        if os.path.isfile(os.path.join(d, "mscclpp", "core.h")):
            return os.path.abspath(d)
    raise FileNotFoundError("no mscclpp/core.h in any of: " + ", ".join(cands))


class Param(NamedTuple):
    """One row of the library's parameter table (``mscclppParamGetInfo``)."""

    name: str
    type: str
    default: str
    help: str


def params() -> List[Param]:
    """Every ``MSCCLPP_*`` environment variable the library reads, with its
    type, default and meaning (what ``mscclpp-info --params`` prints)."""
    lib = _lib.lib()
    out = []
    info = ParamInfoStruct()
    for i in range(lib.mscclppParamCount()):
        _lib.call("mscclppParamGetInfo", i, byref(info))
        out.append(Param(*((f or b"").decode() for f in (info.name, info.type, info.defaultValue, info.help))))
    return out


def params_check() -> None:
    """Raise :class:`InvalidArgumentError` naming the first ``MSCCLPP_*``
    variable of this process's environment that does not parse as its type,
    as a communicator made now would read it (``mscclppParamsCheck``)."""
    _lib.call("mscclppParamsCheck")


def net_description() -> Tuple[bool, str]:
    """What the network transport would open with this process's environment
    (``MSCCLPP_NET_PROVIDER``, ``MSCCLPP_NET_IFNAME``, ``MSCCLPP_NET_SIGNAL``),
    opening nothing: ``(True, "tcp;ofi_rxm on lo (...)")``, or ``(False,
    why)`` when a connection over the network would fail
    (``mscclppGetNetDescription``; what ``mscclpp-info`` prints). Parameters
    that do not parse raise :class:`InvalidArgumentError`."""
    buf = create_string_buffer(1024)
    rc = _lib.lib().mscclppGetNetDescription(buf, len(buf))
    if rc == Status.INVALID_ARGUMENT:
        _lib.check("mscclppGetNetDescription", rc)
    return rc == Status.SUCCESS, buf.value.decode(errors="replace")


__all__ = [
    "__version__",
    "AVG",
    "AbortedError",
    "Allocation",
    "ArrayLike",
    "Communicator",
    "Connection",
    "MemKind",
    "MemoryChannel",
    "PortChannel",
    "PortSemaphoreMem",
    "RegisteredMemory",
    "Transport",
    "DTypeLike",
    "DataType",
    "InProgressError",
    "InternalError",
    "InvalidArgumentError",
    "InvalidUsageError",
    "LibraryNotFoundError",
    "MAX",
    "MIN",
    "MscclppError",
    "MscclppSystemError",
    "MscclppTimeoutError",
    "OpLike",
    "PROD",
    "Param",
    "Plan",
    "PlanInfo",
    "ReduceOp",
    "RemoteError",
    "SUM",
    "Status",
    "StreamLike",
    "UnhandledCudaError",
    "UniqueId",
    "coll_algo_names",
    "group",
    "include_dir",
    "library_path",
    "net_description",
    "params",
    "params_check",
    "version",
]
