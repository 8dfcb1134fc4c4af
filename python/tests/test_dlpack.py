# SPDX-License-Identifier: MIT
"""Arrays that speak only DLPack (``__dlpack__``), under ``mscclpp-run -n N``
on the host backend.

NumPy arrays export DLPack too (NumPy 1.22 and later); a wrapper that
offers nothing else (no buffer protocol, no ``__cuda_array_interface__``)
makes the package take the DLPack path, as it would for a JAX or
TensorFlow array: collectives in and out of place, results checked
element by element, every consumed tensor's deleter called once (the
exporter's reference count comes back), and the refusals: strided arrays,
element types without an mscclpp type, an exporter that refuses, a
capsule that is not a tensor.
"""

from __future__ import annotations

import gc
import sys

from harness import Checks, require_numpy, skip

np = require_numpy()

import mscclpp  # noqa: E402

if not hasattr(np.ndarray, "__dlpack__"):
    skip(f"NumPy {np.__version__} has no __dlpack__ (1.22 and later)")

checks = Checks("test_dlpack")
comm = mscclpp.Communicator.from_env()
R, N = comm.rank, comm.size


class OnlyDLPack:
    """An array that offers DLPack and nothing else."""

    def __init__(self, a):
        self.a = a

    def __dlpack__(self, stream=None):
        return self.a.__dlpack__()

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


class BadExporter:
    def __init__(self, what):
        self.what = what

    def __dlpack__(self, stream=None):
        if self.what == "refuse":
            raise BufferError("this exporter refuses")
        return "not a capsule"


def test_collectives():
    n = 7
    mine = (np.arange(n, dtype=np.float32) + 10 * R).astype(np.float32)
    want = sum((np.arange(n, dtype=np.float32) + 10 * q) for q in range(N)).astype(np.float32)
    out = np.full(n, -7, dtype=np.float32)
    src, dst = OnlyDLPack(mine), OnlyDLPack(out)
    refs = (sys.getrefcount(mine), sys.getrefcount(out))
    comm.all_reduce(src, dst)
    checks.true(np.array_equal(out, want), f"all_reduce through DLPack: {out} != {want}")
    buf = mine.copy()
    comm.all_reduce(OnlyDLPack(buf))
    checks.true(np.array_equal(buf, want), f"in-place all_reduce through DLPack: {buf}")
    g = np.full(N * 3, -1, dtype=np.int64)
    comm.all_gather(OnlyDLPack(np.full(3, R, dtype=np.int64)), OnlyDLPack(g))
    checks.true(np.array_equal(g, np.repeat(np.arange(N, dtype=np.int64), 3)), f"all_gather through DLPack: {g}")
    # mixed: a DLPack array with a NumPy one (both host memory)
    out2 = np.zeros(n, dtype=np.float32)
    comm.all_reduce(src, out2)
    checks.true(np.array_equal(out2, want), "all_reduce: DLPack input, NumPy output")
    gc.collect()
    checks.equal((sys.getrefcount(mine), sys.getrefcount(out)), refs,
                 "the exporters' reference counts after the calls (every tensor's deleter ran once)")


def test_refusals():
    x = np.arange(8, dtype=np.float32)
    checks.raises(ValueError, comm.all_reduce, OnlyDLPack(x[::2]), contains=("not contiguous", "DLPack"),
                  what="a strided DLPack array")
    checks.raises(TypeError, comm.all_reduce, OnlyDLPack(np.zeros(4, dtype=np.complex64)),
                  contains="no mscclpp element type", what="complex elements")
    checks.raises(TypeError, comm.all_reduce, OnlyDLPack(np.zeros(4, dtype=np.int16)),
                  contains="no mscclpp element type", what="int16 elements")
    # a uint16 DLPack array carries bfloat16 when asked to (dtype=), as a NumPy one does
    h = np.zeros(4, dtype=np.uint16)
    comm.all_reduce(OnlyDLPack(h), dtype="bfloat16")
    checks.true(not h.any(), "bfloat16 zeros in a uint16 DLPack array")
    checks.raises(TypeError, comm.all_reduce, BadExporter("refuse"), contains=("__dlpack__() failed", "refuses"))
    checks.raises(TypeError, comm.all_reduce, BadExporter("junk"), contains="not return a DLPack tensor capsule")
    ro = np.arange(4, dtype=np.float32)
    ro.flags.writeable = False
    checks.raises(TypeError, comm.all_reduce, OnlyDLPack(ro), contains="__dlpack__() failed",
                  what="an exporter that refuses read-only memory")


try:
    test_collectives()
    test_refusals()
finally:
    comm.destroy()
checks.done()
