# SPDX-License-Identifier: MIT
"""Bad input through the Python package: clear exceptions, never a crash.

Run under ``mscclpp-run -n N`` (N >= 2). Every bad call here fails on the
calling rank before anything is exchanged (the package's own checks, or the
library's argument checks, which come before any communication), so the
ranks stay in step; a good collective between the groups of checks proves
it. Covered: wrong and mismatched element types, non-contiguous and
read-only arrays, wrong sizes, bad op/root/peer/stream/dtype arguments, a
misaligned buffer (the library's check, raised as InvalidArgumentError with
its message), device arrays on the host backend (refused by the package:
the library would read a device address), a group that mixes streams, bad communicator arguments, and
every call on a destroyed communicator.
"""

from __future__ import annotations

import pickle

from harness import Checks, require_numpy

np = require_numpy()

import mscclpp  # noqa: E402

checks = Checks("test_errors")
comm = mscclpp.Communicator.from_env()
R, N = comm.rank, comm.size


def in_step(what):
    """A collective all ranks make: they are still in step after `what`."""
    x = np.ones(3, dtype=np.int32)
    comm.all_reduce(x)
    checks.true(x.tolist() == [N] * 3, f"ranks in step after {what}")


def f32(n):
    return np.zeros(n, dtype=np.float32)


def test_types():
    # mismatched element types: both arguments named
    checks.raises(TypeError, comm.all_reduce, f32(4), np.zeros(4, dtype=np.int32), contains=("sendbuf", "recvbuf", "float32", "int32"))
    checks.raises(TypeError, comm.all_gather, np.zeros(2, dtype=np.int64), np.zeros(2 * N, dtype=np.uint64), contains=("int64", "uint64"))
    # element types mscclpp lacks: dtype= is suggested
    checks.raises(TypeError, comm.all_reduce, np.zeros(4, dtype=np.int16), contains=("sendbuf", "dtype="))
    checks.raises(TypeError, comm.all_reduce, np.zeros(4, dtype=bool), contains="sendbuf")
    checks.raises(TypeError, comm.all_reduce, np.zeros(4, dtype=np.complex64), contains="sendbuf")
    checks.raises(TypeError, comm.broadcast, np.zeros(4, dtype=">i4"), contains=("sendbuf", "byte order"))
    # dtype= that the array does not hold, or cannot carry
    checks.raises(TypeError, comm.all_reduce, np.zeros(4, dtype=np.int32), dtype="float32", contains=("int32", "float32"))
    checks.raises(TypeError, comm.all_reduce, np.zeros(4, dtype=np.float16), dtype="bfloat16", contains=("float16", "bfloat16"))
    checks.raises(TypeError, comm.all_reduce, np.zeros(4, dtype=np.uint32), dtype="bfloat16", contains="bfloat16")
    checks.raises(ValueError, comm.all_reduce, np.zeros(3, dtype=np.uint8), dtype="bfloat16", contains=("3 bytes", "bfloat16"))
    checks.raises(TypeError, comm.all_reduce, f32(4), dtype="float128", contains=("dtype", "float128"))
    checks.raises(TypeError, comm.all_reduce, f32(4), dtype=7, contains="dtype")
    # not arrays at all
    checks.raises(TypeError, comm.all_reduce, [1.0, 2.0], contains=("sendbuf", "list"))
    checks.raises(TypeError, comm.all_gather, f32(1), None, contains="recvbuf")
    checks.raises(TypeError, comm.send, "text", 0, contains=("buf", "str"))
    in_step("type errors")


def test_layout():
    a = np.zeros(8, dtype=np.float32)
    checks.raises(ValueError, comm.all_reduce, a[::2], contains=("sendbuf", "contiguous"))
    checks.raises(ValueError, comm.all_reduce, f32(4), a[::2], contains=("recvbuf", "contiguous"))
    checks.raises(ValueError, comm.all_reduce, np.zeros((3, 4), dtype=np.float32, order="F"), contains="contiguous")
    checks.raises(ValueError, comm.all_gather, f32(1), np.zeros((N, 2), dtype=np.float32)[:, :1], contains=("recvbuf", "contiguous"))
    # read-only outputs: a flag, bytes, a read-only memoryview
    ro = f32(4)
    ro.setflags(write=False)
    checks.raises(ValueError, comm.all_reduce, ro, contains=("sendbuf", "read-only"))  # in place: written
    checks.raises(ValueError, comm.all_reduce, f32(4), ro, contains=("recvbuf", "read-only"))
    checks.raises(ValueError, comm.recv, bytes(4), 0, contains=("buf", "read-only"))
    checks.raises(ValueError, comm.broadcast, None, memoryview(bytes(4)).toreadonly(), root=(R + 1) % N, contains=("recvbuf", "read-only"))
    checks.raises(ValueError, comm.bootstrap_recv_into, b"abcd", 0, contains=("buf", "read-only"))
    in_step("layout errors")


def test_sizes():
    checks.raises(ValueError, comm.all_reduce, f32(4), f32(5), contains=("recvbuf", "5", "4"))
    checks.raises(ValueError, comm.all_gather, f32(2), f32(2 * N + 1), contains=("recvbuf", str(2 * N)))
    checks.raises(ValueError, comm.all_gather, None, f32(N + 1) if N > 1 else f32(3), contains="multiple")
    checks.raises(ValueError, comm.reduce_scatter, f32(2 * N + 1), f32(2), contains=("sendbuf", str(2 * N)))
    checks.raises(ValueError, comm.reduce_scatter, f32(N + 1), None, contains="multiple")
    checks.raises(ValueError, comm.all_to_all, f32(N + 1), contains="multiple")
    checks.raises(ValueError, comm.all_to_all, f32(N), f32(2 * N), contains="recvbuf")
    checks.raises(ValueError, comm.broadcast, f32(3), f32(4), root=0, contains="recvbuf")
    checks.raises(ValueError, comm.reduce, f32(3), f32(4), contains="recvbuf")
    in_step("size errors")


def test_arguments():
    checks.raises(ValueError, comm.all_reduce, f32(4), op="mean", contains=("op", "mean", "avg"))
    checks.raises(TypeError, comm.all_reduce, f32(4), op=3.5, contains="op")
    checks.raises(ValueError, comm.broadcast, f32(4), root=N, contains=("root", str(N)))
    checks.raises(ValueError, comm.reduce, f32(4), root=-1, contains="root")
    checks.raises(TypeError, comm.reduce, f32(4), root=0.0, contains="root")
    checks.raises(ValueError, comm.send, f32(4), N, contains="peer")
    checks.raises(ValueError, comm.recv, f32(4), -1, contains="peer")
    checks.raises(ValueError, comm.bootstrap_send, b"x", N + 5, contains="peer")
    checks.raises(TypeError, comm.all_reduce, f32(4), stream="default", contains="stream")
    checks.raises(ValueError, comm.all_reduce, f32(4), stream=-1, contains="stream")
    checks.raises(TypeError, comm.broadcast, None, None, contains="sendbuf")
    checks.raises(TypeError, comm.broadcast, None, f32(4), root=R, contains=("sendbuf", "root"))
    in_step("argument errors")


class FakeDeviceArray:
    """Claims device memory (__cuda_array_interface__) at an address no CPU may read."""

    __cuda_array_interface__ = {"shape": (4,), "typestr": "<f4", "data": (0x1000, False), "version": 3}


def test_memory_kinds():
    # the host backend here (CUDA_VISIBLE_DEVICES=""): device arrays are refused before the library
    # touches them (the CPU would read a device address: a crash)
    checks.equal(comm.device, -1, "comm.device on the host backend")
    for fn, args in (
        ("all_reduce", (FakeDeviceArray(),)),
        ("all_reduce", (f32(4), FakeDeviceArray())),
        ("send", (FakeDeviceArray(), (R + 1) % N)),
    ):
        checks.raises(TypeError, getattr(comm, fn), *args, contains=("device memory", "host backend"),
                      what=f"{fn} with a device array on the host backend")
    in_step("device arrays on the host backend")


def test_library_checks():
    # a buffer not aligned to its elements: the library's own check
    raw = bytearray(4 * 5)
    misaligned = np.frombuffer(raw, dtype=np.int32, count=4, offset=1)
    e = checks.raises(mscclpp.InvalidArgumentError, comm.all_reduce, misaligned, contains=("mscclppAllReduce", "aligned"))
    if e is not None:
        checks.equal(e.status, mscclpp.Status.INVALID_ARGUMENT, "status of the library's refusal")
        checks.equal(e.function, "mscclppAllReduce", "the failed function")
        checks.true(isinstance(e, ValueError), "InvalidArgumentError is a ValueError")
        checks.true(e.message != "" and e.message in str(e), "the message is in str()")
        copy = pickle.loads(pickle.dumps(e))
        checks.true(type(copy) is type(e) and (copy.status, copy.message, copy.function) == (e.status, e.message, e.function), "the exception pickles")
    # a group that mixes streams fails at the second call, and its end (run
    # by the context manager) drops the group: nothing was sent
    def mixed():
        with mscclpp.group():
            comm.send(f32(2), R)
            comm.recv(f32(2), R, stream=0x1000)

    e = checks.raises(mscclpp.InvalidUsageError, mixed, contains="one stream", what="a group with two streams")
    if e is not None:
        checks.equal(e.status, mscclpp.Status.INVALID_USAGE, "status of the mixed group")
    # bad communicator arguments, refused before any connection
    uid = bytes(mscclpp.UniqueId.create())
    checks.raises(ValueError, mscclpp.Communicator, N, N, uid, contains="rank")
    checks.raises(ValueError, mscclpp.Communicator, 0, 0, uid, contains="nranks")
    checks.raises(ValueError, mscclpp.Communicator, N, R, b"short", contains="128")
    checks.raises(TypeError, mscclpp.Communicator, N, R, 12345, contains="root")
    checks.raises(mscclpp.InvalidArgumentError, mscclpp.Communicator, 2, 0, b"\x07" * 128, what="an id that is not one")
    checks.raises(mscclpp.InvalidArgumentError, mscclpp.Communicator, 2, 1, "no-port-here", what="a malformed ip:port")
    in_step("library checks")


def test_destroyed():
    uid_raw = bytes(mscclpp.UniqueId.create()) if R == 0 else b"\0" * mscclpp.UniqueId.SIZE
    c = mscclpp.Communicator(N, R, comm.bootstrap_all_gather(uid_raw)[0])
    c.destroy()
    checks.true(c.closed and "destroyed" in repr(c), "closed after destroy")
    x = f32(4)
    calls = {
        "all_reduce": lambda: c.all_reduce(x),
        "all_gather": lambda: c.all_gather(None, f32(4 * N)),
        "reduce_scatter": lambda: c.reduce_scatter(f32(4 * N), None),
        "broadcast": lambda: c.broadcast(x),
        "reduce": lambda: c.reduce(x),
        "all_to_all": lambda: c.all_to_all(f32(N)),
        "send": lambda: c.send(x, 0),
        "recv": lambda: c.recv(x, 0),
        "barrier": c.barrier,
        "bootstrap_send": lambda: c.bootstrap_send(b"x", 0),
        "bootstrap_recv": lambda: c.bootstrap_recv(1, 0),
        "bootstrap_all_gather": lambda: c.bootstrap_all_gather(b"x"),
        "abort": c.abort,
        "async_error": c.async_error,
        "handle": lambda: c.handle,
    }
    for name, fn in calls.items():
        e = checks.raises(mscclpp.InvalidUsageError, fn, contains="destroyed", what=f"{name} after destroy")
        if e is not None:
            checks.equal(e.status, mscclpp.Status.INVALID_USAGE, f"{name} after destroy: status")
    c.destroy()  # again: nothing
    in_step("calls on a destroyed communicator")


test_types()
test_layout()
test_sizes()
test_arguments()
test_memory_kinds()
test_library_checks()
test_destroyed()
comm.destroy()
checks.done()
