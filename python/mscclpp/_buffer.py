# SPDX-License-Identifier: MIT
"""Arrays handed to the collectives: their address, size and element type.

Three kinds of objects are accepted, looked for in this order:

- objects with ``__cuda_array_interface__`` (CuPy, PyTorch, Numba, ...):
  device memory, for communicators on a GPU;
- objects that export the buffer protocol (NumPy arrays, ``bytearray``,
  ``memoryview``, ``array.array``): host memory, for the host backend;
- objects with ``__dlpack__`` (JAX, TensorFlow, ... and the above): host
  memory (DLPack's CPU and CUDA-pinned devices) or device memory (CUDA and
  CUDA-managed), taken as the legacy unversioned capsule the protocol's
  consumers may ask for; the tensor is held (its deleter called when the
  call no longer needs it). A CUDA producer is asked for it without a
  stream, which makes it order the export after its work on the legacy
  default stream.

Either must be C-contiguous; an output must be writable. Every check raises
TypeError or ValueError naming the argument, before the library is called.
"""

from __future__ import annotations

import ctypes
from ctypes import POINTER, c_char_p, c_int, c_ssize_t, c_void_p
from dataclasses import dataclass
from typing import Any, List, Optional, Sequence, Tuple

from ._types import CARRIED_TYPES, DataType, kind_of, parse_struct_format, parse_typestr


class _PyBuffer(ctypes.Structure):
    # Py_buffer (Include/pybuffer.h), part of the stable ABI since 3.11 and
    # unchanged since 3.3.
    _fields_ = [
        ("buf", c_void_p),
        ("obj", c_void_p),
        ("len", c_ssize_t),
        ("itemsize", c_ssize_t),
        ("readonly", c_int),
        ("ndim", c_int),
        ("format", c_char_p),
        ("shape", POINTER(c_ssize_t)),
        ("strides", POINTER(c_ssize_t)),
        ("suboffsets", POINTER(c_ssize_t)),
        ("internal", c_void_p),
    ]


_PyBUF_SIMPLE = 0
_get_buffer = ctypes.pythonapi.PyObject_GetBuffer
_get_buffer.argtypes = [ctypes.py_object, POINTER(_PyBuffer), c_int]
_get_buffer.restype = c_int
_release_buffer = ctypes.pythonapi.PyBuffer_Release
_release_buffer.argtypes = [POINTER(_PyBuffer)]
_release_buffer.restype = None


def _address(view: memoryview) -> int:
    """The address of a C-contiguous memoryview's first byte. The memoryview
    keeps its exporter's buffer (and so this address) alive."""
    pb = _PyBuffer()
    _get_buffer(view, ctypes.byref(pb), _PyBUF_SIMPLE)
    try:
        return pb.buf or 0
    finally:
        _release_buffer(ctypes.byref(pb))


@dataclass
class Array:
    """What a collective needs to know of one argument."""

    name: str  # the argument's name, for messages
    ptr: int
    nbytes: int
    itemsize: int
    kind: Optional[str]  # NumPy kind: i, u, f, V (raw bytes); None: no mscclpp type
    what: str  # the element type as the exporter described it, for messages
    readonly: bool
    device: bool  # __cuda_array_interface__ (device memory)
    keep: Any  # holds the memory (and a buffer export) while it is used

    @property
    def dtype(self) -> Optional[DataType]:
        return kind_of(self.kind, self.itemsize) if self.kind else None

    def describe(self) -> str:
        t = self.dtype
        return t.name.lower() if t is not None else self.what


def _c_contiguous_strides(shape: Sequence[int], itemsize: int) -> List[int]:
    strides = []
    step = itemsize
    for extent in reversed(shape):
        strides.append(step)
        step *= max(int(extent), 1)
    return list(reversed(strides))


def _from_cuda_array_interface(obj: Any, name: str, cai: Any) -> Array:
    if not isinstance(cai, dict):
        raise TypeError(f"{name}: __cuda_array_interface__ is not a dict")
    try:
        shape = tuple(int(s) for s in cai["shape"])
        typestr = cai["typestr"]
        ptr, readonly = cai["data"]
    except (KeyError, TypeError, ValueError) as e:
        raise TypeError(f"{name}: malformed __cuda_array_interface__ ({e})") from None
    if cai.get("mask") is not None:
        raise ValueError(f"{name}: masked arrays are not supported")
    kind, itemsize, what = parse_typestr(typestr)
    if itemsize <= 0:
        raise TypeError(f"{name}: unsupported element type ({what})")
    n = 1
    for s in shape:
        n *= s
    strides = cai.get("strides")
    if strides is not None and n > 1:
        want = _c_contiguous_strides(shape, itemsize)
        # extents of 1 may carry any stride
        if any(int(s) != w and e != 1 for s, w, e in zip(strides, want, shape)):
            raise ValueError(f"{name} is not contiguous (shape {shape}, strides {tuple(strides)}): pass a contiguous copy")
    return Array(name, int(ptr or 0), n * itemsize, itemsize, kind, what, bool(readonly), True, obj)


def _from_buffer_protocol(obj: Any, name: str, view: Optional[memoryview]) -> Array:
    """``view``: memoryview(obj), or None when obj has no buffer protocol."""
    if view is None:
        raise TypeError(
            f"{name}: expected an array (an object with the buffer protocol, such as a NumPy array, or with "
            f"__cuda_array_interface__ or __dlpack__), got {type(obj).__name__}"
        )
    if not view.c_contiguous:
        raise ValueError(f"{name} is not contiguous (C order): pass a contiguous copy (numpy.ascontiguousarray)")
    kind, what = parse_struct_format(view.format, view.itemsize)
    ptr = _address(view) if view.nbytes > 0 else 0
    return Array(name, ptr, view.nbytes, view.itemsize, kind, what, view.readonly, False, view)


# ---- DLPack (dlpack.h, v0.8 ABI: the legacy unversioned capsule) ----


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", c_int), ("device_id", c_int)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", c_void_p),
        ("device", _DLDevice),
        ("ndim", c_int),
        ("dtype", _DLDataType),
        ("shape", POINTER(ctypes.c_int64)),
        ("strides", POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


_DLDeleter = ctypes.CFUNCTYPE(None, c_void_p)


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", c_void_p), ("deleter", _DLDeleter)]


_DL_HOST = {1: "CPU", 3: "CUDA host (pinned)"}  # kDLCPU, kDLCUDAHost
_DL_DEVICE = {2: "CUDA", 13: "CUDA managed"}  # kDLCUDA, kDLCUDAManaged
# (type code, bits) -> NumPy-style kind; 'B' stands for bfloat16, which NumPy lacks
_DL_KINDS = {0: "i", 1: "u", 2: "f"}  # kDLInt, kDLUInt, kDLFloat
_DL_BFLOAT = 4
_DL_NAMES = {0: "int", 1: "uint", 2: "float", 3: "opaque handle", 4: "bfloat", 5: "complex", 6: "bool"}

_capsule_valid = ctypes.pythonapi.PyCapsule_IsValid
_capsule_valid.argtypes = [ctypes.py_object, c_char_p]
_capsule_valid.restype = c_int
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.argtypes = [ctypes.py_object, c_char_p]
_capsule_pointer.restype = c_void_p
_capsule_rename = ctypes.pythonapi.PyCapsule_SetName
_capsule_rename.argtypes = [ctypes.py_object, c_char_p]
_capsule_rename.restype = c_int


class _DLPackHold:
    """A consumed DLPack tensor, kept while a call uses its memory; its
    deleter runs when this goes (the protocol: the consumer calls it once)."""

    __slots__ = ("_ptr", "_deleter", "_source")

    def __init__(self, ptr: int, deleter: Any, source: Any) -> None:
        self._ptr = ptr
        self._deleter = deleter
        self._source = source  # the exporter, alive as long as its tensor

    def __del__(self) -> None:
        ptr, self._ptr = self._ptr, 0
        if ptr and self._deleter:
            self._deleter(ptr)


def _from_dlpack(obj: Any, name: str) -> Array:
    try:
        capsule = obj.__dlpack__()
    except Exception as e:  # noqa: BLE001 - the exporter's refusal (BufferError, TypeError, ...) is the reason
        raise TypeError(f"{name}: its __dlpack__() failed: {type(e).__name__}: {e}") from None
    if not _capsule_valid(capsule, b"dltensor"):
        raise TypeError(f"{name}: __dlpack__() did not return a DLPack tensor capsule (named 'dltensor')")
    ptr = _capsule_pointer(capsule, b"dltensor")
    managed = _DLManagedTensor.from_address(ptr)
    # ours now: renamed, the capsule's destructor leaves the tensor to us
    _capsule_rename(capsule, b"used_dltensor")
    hold = _DLPackHold(ptr, managed.deleter, obj)
    t = managed.dl_tensor
    dev = t.device.device_type
    if dev not in _DL_HOST and dev not in _DL_DEVICE:
        raise TypeError(f"{name}: a DLPack tensor on device type {dev}; host (CPU, CUDA host) or CUDA memory only")
    code, bits, lanes = t.dtype.code, t.dtype.bits, t.dtype.lanes
    what = f"DLPack {_DL_NAMES.get(code, f'type code {code}')}{bits}" + (f"x{lanes}" if lanes != 1 else "")
    if lanes != 1 or bits % 8 != 0 or bits == 0:
        raise TypeError(f"{name}: {what} elements are not supported")
    itemsize = bits // 8
    kind = _DL_KINDS.get(code)
    if code == _DL_BFLOAT and itemsize == 2:
        kind = "B"
    shape = [int(t.shape[i]) for i in range(t.ndim)]
    n = 1
    for extent in shape:
        n *= extent
    if t.strides and n > 1:
        strides = [int(t.strides[i]) for i in range(t.ndim)]  # in elements
        want = [w // itemsize for w in _c_contiguous_strides(shape, itemsize)]
        if any(st != w and e != 1 for st, w, e in zip(strides, want, shape)):
            raise ValueError(
                f"{name} is not contiguous (DLPack shape {tuple(shape)}, strides {tuple(strides)} elements): pass a "
                "contiguous copy"
            )
    data = (t.data or 0) + int(t.byte_offset)
    # the legacy capsule says nothing of read-only memory (exporters refuse to export it)
    return Array(name, data if n else 0, n * itemsize, itemsize, kind, what, False, dev in _DL_DEVICE, hold)


def as_array(obj: Any, name: str, writable: bool) -> Array:
    """Describe ``obj`` (see the module's text); ``writable`` for an output."""
    if obj is None:
        raise TypeError(f"{name} is required")
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is not None:
        arr = _from_cuda_array_interface(obj, name, cai)
    else:
        try:
            view: Optional[memoryview] = memoryview(obj)
        except TypeError:
            view = None
        if view is None and callable(getattr(obj, "__dlpack__", None)):
            arr = _from_dlpack(obj, name)
        else:
            arr = _from_buffer_protocol(obj, name, view)
    if writable and arr.readonly:
        raise ValueError(f"{name} is read-only, and it is written")
    return arr


def resolve(arrays: Sequence[Array], dtype: Optional[DataType]) -> Tuple[DataType, List[int]]:
    """The call's element type and each array's element count.

    Without ``dtype`` every array must have the same mscclpp type. With it,
    each array must hold that type, or carry it: a byte buffer (any type), or
    an unsigned integer array of the same width for the types NumPy lacks
    (bfloat16 in uint16, fp8 in uint8). Arrays must all be in host memory or
    all on the device.
    """
    devices = {a.device for a in arrays}
    if len(devices) > 1:
        dev = [a.name for a in arrays if a.device]
        host = [a.name for a in arrays if not a.device]
        raise TypeError(
            f"{', '.join(dev)} in device memory (__cuda_array_interface__) but {', '.join(host)} in host memory: "
            "one call takes one kind"
        )
    if dtype is None:
        for a in arrays:
            if a.dtype is None:
                raise TypeError(f"{a.name}: {a.what} has no mscclpp element type; pass dtype= to say what it holds")
        first = arrays[0]
        for a in arrays[1:]:
            if a.dtype != first.dtype:
                raise TypeError(
                    f"{first.name} holds {first.describe()} but {a.name} holds {a.describe()}: pass arrays of one type"
                )
        t = first.dtype
        assert t is not None
    else:
        t = dtype
        size = t.itemsize
        for a in arrays:
            if a.dtype == t:
                continue
            raw = a.kind in ("u", "V") and a.itemsize == 1
            carrier = t in CARRIED_TYPES and a.kind in ("u", "V") and a.itemsize == size
            if raw or carrier:
                if a.nbytes % size != 0:
                    raise ValueError(f"{a.name}: {a.nbytes} bytes is not a whole number of {t.name.lower()} elements")
                continue
            raise TypeError(f"{a.name} holds {a.describe()}, not {t.name.lower()} (dtype=)")
    return t, [a.nbytes // t.itemsize for a in arrays]
