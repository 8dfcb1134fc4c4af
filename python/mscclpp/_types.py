# SPDX-License-Identifier: MIT
"""Element types and reduction operators, and how Python names map to them."""

from __future__ import annotations

import enum
import struct
import sys
from typing import Any, Dict, Optional, Tuple, Union


class DataType(enum.IntEnum):
    """``mscclppDataType_t`` (include/mscclpp/coll.h; NCCL's values)."""

    INT8 = 0
    UINT8 = 1
    INT32 = 2
    UINT32 = 3
    INT64 = 4
    UINT64 = 5
    FLOAT16 = 6
    FLOAT32 = 7
    FLOAT64 = 8
    BFLOAT16 = 9
    FLOAT8_E4M3 = 10
    FLOAT8_E5M2 = 11

    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        return _SIZES[self]


class ReduceOp(enum.IntEnum):
    """``mscclppRedOp_t`` (include/mscclpp/coll.h; NCCL's values). AVG is the
    sum divided by the number of ranks (integers: truncating division)."""

    SUM = 0
    PROD = 1
    MAX = 2
    MIN = 3
    AVG = 4


_SIZES = {
    DataType.INT8: 1,
    DataType.UINT8: 1,
    DataType.INT32: 4,
    DataType.UINT32: 4,
    DataType.INT64: 8,
    DataType.UINT64: 8,
    DataType.FLOAT16: 2,
    DataType.FLOAT32: 4,
    DataType.FLOAT64: 8,
    DataType.BFLOAT16: 2,
    DataType.FLOAT8_E4M3: 1,
    DataType.FLOAT8_E5M2: 1,
}

# Names accepted for dtype=: ours (the C library's mscclppDataTypeName, the
# enum's), NumPy's, PyTorch's and ml_dtypes' spellings, and mscclpp-perf's.
_NAMES: Dict[str, DataType] = {}
for _t in DataType:
    _NAMES[_t.name.lower()] = _t
_NAMES.update(
    {
        "char": DataType.INT8,
        "half": DataType.FLOAT16,
        "float": DataType.FLOAT32,
        "double": DataType.FLOAT64,
        "bf16": DataType.BFLOAT16,
        "fp8e4m3": DataType.FLOAT8_E4M3,
        "f8e4m3": DataType.FLOAT8_E4M3,
        "e4m3": DataType.FLOAT8_E4M3,
        "float8_e4m3fn": DataType.FLOAT8_E4M3,
        "fp8e5m2": DataType.FLOAT8_E5M2,
        "f8e5m2": DataType.FLOAT8_E5M2,
        "e5m2": DataType.FLOAT8_E5M2,
    }
)

# Types NumPy has no dtype for: their elements travel in unsigned integer
# arrays of the same width (or in byte buffers) with an explicit dtype=.
CARRIED_TYPES = frozenset({DataType.BFLOAT16, DataType.FLOAT8_E4M3, DataType.FLOAT8_E5M2})

DTypeLike = Union[DataType, str, Any]
"""A :class:`DataType`, a name (``"float32"``, ``"bfloat16"``, ``"fp8e4m3"``,
``"float8_e5m2"``, ...) or an object whose ``name``/``__name__``/``str()`` is
one (``numpy.float32``, ``numpy.dtype("int8")``, ``torch.bfloat16``)."""

OpLike = Union[ReduceOp, str]
"""A :class:`ReduceOp` or its name: ``"sum"``, ``"prod"``, ``"max"``,
``"min"``, ``"avg"``."""


def to_datatype(dtype: DTypeLike, argname: str = "dtype") -> DataType:
    """The :class:`DataType` that ``dtype`` names; TypeError when none."""
    if isinstance(dtype, DataType):
        return dtype
    if isinstance(dtype, bool) or isinstance(dtype, int):
        raise TypeError(f"{argname}: give a DataType or a type name, not the number {dtype!r}")
    candidates = []
    if isinstance(dtype, str):
        candidates.append(dtype)
    else:
        for attr in ("name", "__name__"):
            value = getattr(dtype, attr, None)
            if isinstance(value, str):
                candidates.append(value)
        candidates.append(str(dtype))
    for text in candidates:
        key = text.strip().lower()
        if key.startswith("torch."):
            key = key[len("torch.") :]
        if key in _NAMES:
            return _NAMES[key]
    raise TypeError(f"{argname}: {dtype!r} is not an mscclpp element type ({', '.join(t.name.lower() for t in DataType)})")


def to_reduce_op(op: OpLike, argname: str = "op") -> ReduceOp:
    """The :class:`ReduceOp` that ``op`` names; ValueError/TypeError when none."""
    if isinstance(op, ReduceOp):
        return op
    if isinstance(op, str):
        try:
            return ReduceOp[op.strip().upper()]
        except KeyError:
            pass
        raise ValueError(f"{argname}: {op!r} is not a reduction ({', '.join(o.name.lower() for o in ReduceOp)})")
    raise TypeError(f"{argname}: expected a ReduceOp or its name, got {type(op).__name__}")


# (kind, itemsize) -> type, kind as in NumPy's typestr: i signed, u unsigned,
# f floating point. Everything else (int16, bool, complex, records) has no
# mscclpp type.
_BY_KIND: Dict[Tuple[str, int], DataType] = {
    ("i", 1): DataType.INT8,
    ("u", 1): DataType.UINT8,
    ("i", 4): DataType.INT32,
    ("u", 4): DataType.UINT32,
    ("i", 8): DataType.INT64,
    ("u", 8): DataType.UINT64,
    ("f", 2): DataType.FLOAT16,
    ("f", 4): DataType.FLOAT32,
    ("f", 8): DataType.FLOAT64,
    ("B", 2): DataType.BFLOAT16,  # a DLPack bfloat16 tensor (NumPy has no such kind)
}

_STRUCT_KINDS = {
    "b": "i", "h": "i", "i": "i", "l": "i", "q": "i", "n": "i",
    "B": "u", "H": "u", "I": "u", "L": "u", "Q": "u", "N": "u",
    "e": "f", "f": "f", "d": "f",
    "c": "V",  # a byte of a bytes object: raw, like NumPy's "V"
}


def kind_of(kind: str, itemsize: int) -> Optional[DataType]:
    """The type of elements of NumPy kind ``kind`` and size ``itemsize``."""
    return _BY_KIND.get((kind, itemsize))


def parse_struct_format(fmt: str, itemsize: int) -> Tuple[Optional[str], str]:
    """(kind, description) of a buffer-protocol format string; kind is None
    for a format with no mscclpp type (the description says what it is)."""
    order = ""
    body = fmt
    if body and body[0] in "@=<>!":
        order, body = body[0], body[1:]
    big = order in (">", "!")
    if (big and sys.byteorder == "little") or (order == "<" and sys.byteorder == "big"):
        return None, f"non-native byte order ({fmt!r})"
    if len(body) != 1 or body not in _STRUCT_KINDS:
        return None, f"format {fmt!r}"
    try:
        if order in ("", "@") and struct.calcsize(body) != itemsize:
            return None, f"format {fmt!r}"
    except struct.error:
        return None, f"format {fmt!r}"
    return _STRUCT_KINDS[body], f"format {fmt!r}"


def parse_typestr(typestr: str) -> Tuple[Optional[str], int, str]:
    """(kind, itemsize, description) of an array interface typestr
    (``"<f4"``, ``"|u1"``); kind is None when it has no mscclpp type."""
    if not isinstance(typestr, str) or len(typestr) < 3:
        return None, 0, f"typestr {typestr!r}"
    order, kind, size = typestr[0], typestr[1], typestr[2:]
    try:
        itemsize = int(size)
    except ValueError:
        return None, 0, f"typestr {typestr!r}"
    native = "<" if sys.byteorder == "little" else ">"
    if order not in ("|", "=", native):
        return None, itemsize, f"non-native byte order ({typestr!r})"
    if kind not in ("i", "u", "f", "V"):
        return None, itemsize, f"typestr {typestr!r}"
    return kind, itemsize, f"typestr {typestr!r}"
