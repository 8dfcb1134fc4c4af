# SPDX-License-Identifier: MIT
"""The C library: loading it, and the signature of every function used.

Every C function this package calls is declared in SIGNATURES, with the
argument and result types of its prototype in include/mscclpp/*.h
(python/tests/test_unit.py compares the two). Nothing else in the package
calls into the library except through :func:`call` or :func:`lib`.
"""

from __future__ import annotations

import ctypes
import threading
from ctypes import POINTER, c_char, c_char_p, c_int, c_size_t, c_uint, c_uint64, c_void_p
from typing import Any, Dict, List, Optional, Tuple

from . import _locate
from ._errors import make_error

UNIQUE_ID_BYTES = 128  # MSCCLPP_UNIQUE_ID_BYTES
REVOKE_DEFAULT = 0  # MSCCLPP_REVOKE_DEFAULT
SHRINK_DEFAULT = 0  # MSCCLPP_SHRINK_DEFAULT
SHRINK_ABORT = 1  # MSCCLPP_SHRINK_ABORT


class UniqueIdStruct(ctypes.Structure):
    """``mscclppUniqueId``: 128 opaque bytes, passed by value."""

    _fields_ = [("internal", c_char * UNIQUE_ID_BYTES)]


class ParamInfoStruct(ctypes.Structure):
    """``mscclppParamInfo``: one row of the parameter table."""

    _fields_ = [("name", c_char_p), ("type", c_char_p), ("defaultValue", c_char_p), ("help", c_char_p)]


class PlanInfoStruct(ctypes.Structure):
    """``mscclppPlanInfo`` (plan.h): what a plan is."""

    _fields_ = [
        ("structSize", c_size_t),
        ("name", c_char_p),
        ("collective", c_char_p),
        ("protocol", c_char_p),
        ("nranks", c_int),
        ("inplace", c_int),
        ("minMessageBytes", c_uint64),
        ("maxMessageBytes", c_uint64),
        ("threadblocks", c_int),
        ("threadsPerBlock", c_int),
        ("chunksPerBlock", c_int),
    ]


# C types by role, so that the table reads like the prototypes.
_result = c_int  # mscclppResult_t
_enum = c_int  # mscclppDataType_t, mscclppRedOp_t
_comm = c_void_p  # mscclppComm_t (struct mscclppComm*)
_stream = c_void_p  # mscclppStream_t (cudaStream_t)
_ptr = c_void_p  # void* / const void*
_int_out = POINTER(c_int)
_handle = c_void_p  # mscclppRegisteredMemory_t, mscclppConnection_t, channels, mscclppPlan_t (opaque pointers)

# name -> (restype, argtypes)
SIGNATURES: Dict[str, Tuple[Any, List[Any]]] = {
    # core.h
    "mscclppGetErrorString": (c_char_p, [_result]),
    "mscclppGetLastError": (c_char_p, []),
    "mscclppGetVersion": (_result, [_int_out]),
    "mscclppParamCount": (c_int, []),
    "mscclppParamGetInfo": (_result, [c_int, POINTER(ParamInfoStruct)]),
    "mscclppParamsCheck": (_result, []),
    "mscclppGetNetDescription": (_result, [c_char_p, c_size_t]),
    # comm.h
    "mscclppGetUniqueId": (_result, [POINTER(UniqueIdStruct)]),
    "mscclppCommInitRankFromId": (_result, [POINTER(_comm), c_int, UniqueIdStruct, c_int]),
    "mscclppCommInitRank": (_result, [POINTER(_comm), c_int, c_int, c_char_p]),
    "mscclppCommInitFromEnv": (_result, [POINTER(_comm)]),
    "mscclppCommDestroy": (_result, [_comm]),
    "mscclppCommRank": (_result, [_comm, _int_out]),
    "mscclppCommSize": (_result, [_comm, _int_out]),
    "mscclppCommLocalRank": (_result, [_comm, _int_out]),
    "mscclppCommLocalSize": (_result, [_comm, _int_out]),
    "mscclppCommGetDevice": (_result, [_comm, _int_out]),
    "mscclppCommGetAsyncError": (_result, [_comm, _int_out]),
    "mscclppCommRevoke": (_result, [_comm, c_int]),
    "mscclppCommShrink": (_result, [_comm, POINTER(c_int), c_int, POINTER(_comm), c_int]),
    "mscclppCommGrowId": (_result, [_comm, POINTER(UniqueIdStruct)]),
    "mscclppCommGrow": (_result, [_comm, c_int, POINTER(UniqueIdStruct), c_int, POINTER(_comm)]),
    "mscclppBootstrapAllGather": (_result, [_comm, _ptr, c_size_t]),
    "mscclppBootstrapBarrier": (_result, [_comm]),
    "mscclppBootstrapSend": (_result, [_comm, c_int, c_int, _ptr, c_size_t]),
    "mscclppBootstrapRecv": (_result, [_comm, c_int, c_int, _ptr, c_size_t]),
    # port_channel.h
    "mscclppCommAbort": (_result, [_comm, c_char_p]),
    # coll.h
    "mscclppDataTypeSize": (c_size_t, [_enum]),
    "mscclppDataTypeName": (c_char_p, [_enum]),
    "mscclppRedOpName": (c_char_p, [_enum]),
    "mscclppAllReduce": (_result, [_ptr, _ptr, c_size_t, _enum, _enum, _comm, _stream]),
    "mscclppAllGather": (_result, [_ptr, _ptr, c_size_t, _enum, _comm, _stream]),
    "mscclppReduceScatter": (_result, [_ptr, _ptr, c_size_t, _enum, _enum, _comm, _stream]),
    "mscclppBroadcast": (_result, [_ptr, _ptr, c_size_t, _enum, c_int, _comm, _stream]),
    "mscclppReduce": (_result, [_ptr, _ptr, c_size_t, _enum, _enum, c_int, _comm, _stream]),
    "mscclppAllToAll": (_result, [_ptr, _ptr, c_size_t, _enum, _comm, _stream]),
    "mscclppAllToAllv": (
        _result,
        [_ptr, c_size_t, POINTER(c_size_t), POINTER(c_size_t), _ptr, c_size_t, POINTER(c_size_t), POINTER(c_size_t),
         _enum, _comm, _stream],
    ),
    "mscclppSend": (_result, [_ptr, c_size_t, _enum, c_int, _comm, _stream]),
    "mscclppRecv": (_result, [_ptr, c_size_t, _enum, c_int, _comm, _stream]),
    "mscclppGroupStart": (_result, []),
    "mscclppGroupEnd": (_result, []),
    "mscclppCollAlgoNames": (c_char_p, [c_char_p]),
    # plan.h
    "mscclppPlanLoadFile": (_result, [c_char_p, POINTER(_handle)]),
    "mscclppPlanLoadString": (_result, [c_char_p, c_size_t, POINTER(_handle)]),
    "mscclppPlanDestroy": (_result, [_handle]),
    "mscclppPlanGetInfo": (_result, [_handle, POINTER(PlanInfoStruct)]),
    "mscclppPlanRegister": (_result, [_comm, _handle]),
    "mscclppPlanUnregister": (_result, [_comm, _handle]),
    "mscclppPlanRegisterDir": (_result, [_comm, c_char_p, _int_out]),
    "mscclppPlanRegisteredCount": (_result, [_comm, _int_out]),
    "mscclppPlanRegisteredAt": (_result, [_comm, c_int, POINTER(_handle)]),
    "mscclppPlanRunCount": (_result, [_comm, _handle, POINTER(c_uint64)]),
    "mscclppPlanExecute": (_result, [_comm, _handle, _ptr, _ptr, c_size_t, _enum, _enum, _stream]),
    # memory.h
    "mscclppMemAlloc": (_result, [_comm, _enum, c_size_t, POINTER(c_void_p)]),
    "mscclppMemFree": (_result, [_comm, _ptr]),
    "mscclppMemoryRegister": (_result, [_comm, _ptr, c_size_t, c_uint, POINTER(_handle)]),
    "mscclppMemoryDeregister": (_result, [_handle]),
    "mscclppMemoryClose": (_result, [_handle]),
    "mscclppMemorySend": (_result, [_comm, _handle, c_int, c_int]),
    "mscclppMemoryRecv": (_result, [_comm, c_int, c_int, POINTER(_handle)]),
    "mscclppMemoryPtr": (_result, [_handle, POINTER(c_void_p)]),
    "mscclppMemoryDevicePtr": (_result, [_handle, POINTER(c_void_p)]),
    "mscclppMemorySize": (_result, [_handle, POINTER(c_size_t)]),
    "mscclppMemoryRank": (_result, [_handle, _int_out]),
    # connection.h
    "mscclppConnectionCreate": (_result, [_comm, c_int, c_int, _enum, POINTER(_handle)]),
    "mscclppConnectionDestroy": (_result, [_handle]),
    "mscclppConnectionWrite": (_result, [_handle, _handle, c_uint64, _handle, c_uint64, c_uint64]),
    "mscclppConnectionFlush": (_result, [_handle]),
    "mscclppConnectionTransport": (_result, [_handle, _int_out]),
    "mscclppConnectionRemoteRank": (_result, [_handle, _int_out]),
    # memory_channel.h, port_channel.h (configs by pointer; handles into a byte buffer)
    "mscclppMemoryChannelCreate": (_result, [_comm, _handle, _ptr, POINTER(_handle)]),
    "mscclppMemoryChannelDestroy": (_result, [_handle]),
    "mscclppMemoryChannelGetDeviceHandle": (_result, [_handle, _ptr]),
    "mscclppMemoryChannelDeviceHandleSize": (c_size_t, []),
    "mscclppPortChannelCreate": (_result, [_comm, _handle, _ptr, POINTER(_handle)]),
    "mscclppPortChannelDestroy": (_result, [_handle]),
    "mscclppPortChannelGetDeviceHandle": (_result, [_handle, _ptr]),
    "mscclppPortChannelDeviceHandleSize": (c_size_t, []),
}


class LibraryNotFoundError(OSError):
    """libmscclpp.so could not be loaded; the message lists where it was
    looked for and why each place failed."""


_lock = threading.Lock()
_lib: Optional[ctypes.CDLL] = None
_path: Optional[str] = None


def _declare(cdll: ctypes.CDLL, where: str) -> None:
    for name, (restype, argtypes) in SIGNATURES.items():
        try:
            fn = getattr(cdll, name)
        except AttributeError:
            raise LibraryNotFoundError(
                f"{where} has no {name}: it is not libmscclpp, or an older version than this package ({name} is used)"
            ) from None
        fn.restype = restype
        fn.argtypes = argtypes


def lib() -> ctypes.CDLL:
    """The loaded library, with every function of SIGNATURES declared.

    Loaded at the first call (see :mod:`mscclpp._locate` for where it is
    looked for). Raises :class:`LibraryNotFoundError`.
    """
    global _lib, _path
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is not None:
            return _lib
        cands, from_env = _locate.library_candidates()
        failures = []
        for cand in cands:
            try:
                cdll = ctypes.CDLL(cand)
            except OSError as e:
                failures.append(f"  {cand}: {e}")
                continue
            _declare(cdll, cand)
            _path = cand
            _lib = cdll
            return cdll
        if from_env:
            msg = f"cannot load MSCCLPP_LIBRARY={cands[0]}:\n" + "\n".join(failures)
        else:
            msg = (
                "cannot find libmscclpp.so; set MSCCLPP_LIBRARY to its path (e.g. build/libmscclpp.so), or add its "
                "directory to LD_LIBRARY_PATH. Tried:\n" + "\n".join(failures)
            )
        raise LibraryNotFoundError(msg)


def library_path() -> str:
    """The path (or loader name) the library was loaded from; loads it."""
    lib()
    assert _path is not None
    return _path


def _text(raw: Optional[bytes]) -> str:
    return raw.decode("utf-8", errors="replace") if raw else ""


def last_error() -> str:
    """``mscclppGetLastError()`` of the calling thread."""
    return _text(lib().mscclppGetLastError())


def error_string(status: int) -> str:
    """``mscclppGetErrorString(status)``."""
    return _text(lib().mscclppGetErrorString(status))


def check(function: str, rc: int) -> None:
    """Raise the MscclppError subclass for a failed status ``rc`` of
    ``function``, with the thread's last-error text (read at once: the next
    failing call on this thread replaces it)."""
    if rc == 0:
        return
    message = last_error() or error_string(rc)
    raise make_error(rc, message, function)


def call(function: str, *args: Any) -> None:
    """Call ``function`` (an mscclppResult_t function) and raise on failure."""
    check(function, getattr(lib(), function)(*args))
