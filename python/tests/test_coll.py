# SPDX-License-Identifier: MIT
"""Every collective, element type and operator through the Python package.

Run under ``mscclpp-run -n N`` (N >= 2): on the host backend with NumPy
arrays (CI), or on a GPU with ``cupy`` or ``torch`` as the argument (CuPy
arrays or PyTorch tensors, every call on a stream of the framework's own,
made current for the whole run; results are read back after the stream is
synchronised; scripts/gpu-run.sh py). Inputs are small
integers (and halves, for floating-point avg) chosen so that every result is
exact in every type and in any order of reduction, as mscclpp-perf's -c 1
does, and results are compared bit for bit. Each collective runs out of
place and in each in-place form the package offers (None for the output or
input, or the same array / the rank's slice passed as both); send/recv as a
grouped ring, a blocking pair and to this rank itself.
"""

from __future__ import annotations

import contextlib
import os
import sys

from harness import Checks, require_numpy, skip

np = require_numpy()

import mscclpp  # noqa: E402
from mscclpp import DataType, ReduceOp  # noqa: E402


# ---- where the arrays live ------------------------------------------------------
# Inputs and expected values are made with NumPy; dev() puts an array where the
# calls take it, host() reads a result back as the NumPy dtype wanted.


class HostArrays:
    name = "numpy"
    stream = None

    def dev(self, a):
        return a

    def host(self, d, dtype):
        return d

    def copy(self, d):
        return d.copy()

    def context(self):
        return contextlib.nullcontext()


class CupyArrays:
    name = "cupy"

    def __init__(self):
        try:
            import cupy
        except ImportError:
            skip("needs CuPy")
        self.cp = cupy
        cupy.cuda.Device(int(os.environ.get("MSCCLPP_LOCAL_RANK", "0")) % cupy.cuda.runtime.getDeviceCount()).use()
        self.stream = cupy.cuda.Stream(non_blocking=True)

    def dev(self, a):
        return self.cp.asarray(a)  # on the current stream: ours, for the whole run

    def host(self, d, dtype):
        h = d.get(stream=self.stream)
        self.stream.synchronize()
        return h.view(dtype)

    def copy(self, d):
        return d.copy()

    def context(self):
        return self.stream


class TorchArrays:
    """PyTorch lacks some unsigned types on the GPU in older versions: those
    travel as the signed type of the same width (the bits are the same), and
    are read back as the unsigned one."""

    name = "torch"
    SIGNED = {np.dtype(np.uint16): np.int16, np.dtype(np.uint32): np.int32, np.dtype(np.uint64): np.int64}

    def __init__(self):
        try:
            import torch
        except ImportError:
            skip("needs PyTorch")
        if not torch.cuda.is_available():
            skip("needs a GPU for PyTorch")
        self.torch = torch
        torch.cuda.set_device(int(os.environ.get("MSCCLPP_LOCAL_RANK", "0")) % torch.cuda.device_count())
        self.stream = torch.cuda.Stream()

    def dev(self, a):
        a = np.ascontiguousarray(a)
        try:
            t = self.torch.from_numpy(a).cuda()
        except (TypeError, RuntimeError):
            t = self.torch.from_numpy(a.view(self.SIGNED[a.dtype])).cuda()
        return t

    def host(self, d, dtype):
        h = d.cpu()  # waits for the current stream
        try:
            return h.numpy().view(dtype)
        except TypeError:  # an unsigned type NumPy conversion lacks: its signed twin's bits
            return h.view(getattr(self.torch, np.dtype(self.SIGNED[np.dtype(dtype)]).name)).numpy().view(dtype)

    def copy(self, d):
        return d.clone()

    def context(self):
        return self.torch.cuda.stream(self.stream)


ARR = {"numpy": HostArrays, "cupy": CupyArrays, "torch": TorchArrays}.get(sys.argv[1] if len(sys.argv) > 1 else "numpy")
if ARR is None:
    print(f"usage: {sys.argv[0]} [numpy|cupy|torch]", file=sys.stderr)
    sys.exit(2)
ARR = ARR()
ON_HOST = ARR.name == "numpy"
S = ARR.stream  # every call's stream (None on the host backend)
dev, copy = ARR.dev, ARR.copy

checks = Checks(f"test_coll {ARR.name}")
comm = mscclpp.Communicator.from_env()
R, N = comm.rank, comm.size
if ON_HOST != (comm.device < 0):
    skip(f"{ARR.name} arrays need {'the host backend' if ON_HOST else 'a GPU'}; this communicator is on device {comm.device}")
COUNT = 5  # elements per rank: a multiple of nothing


# ---- element types: how a value is stored in each -------------------------------


def _enc_e4m3(values):
    """fp8 e4m3 (bias 7, 3 mantissa bits) of values that it holds exactly."""
    out = np.zeros(len(values), dtype=np.uint8)
    for k, v in enumerate(values):
        v = float(v)
        if v == 0:
            continue
        sign = 0x80 if v < 0 else 0
        m, e = np.frexp(abs(v))  # abs(v) = m * 2**e, 0.5 <= m < 1
        mant = (m * 2 - 1) * 8
        assert mant == int(mant) and -6 <= e - 1 <= 8, v
        out[k] = sign | ((e - 1 + 7) << 3) | int(mant)
    return out


def _enc_e5m2(values):
    """fp8 e5m2 is the top byte of float16 for values with 2 mantissa bits."""
    h = np.asarray(values, dtype=np.float16).view(np.uint16)
    assert not np.any(h & 0xFF), values
    return (h >> 8).astype(np.uint8)


def _enc_bf16(values):
    """bfloat16 is the top half of float32 for values with 7 mantissa bits."""
    f = np.asarray(values, dtype=np.float32).view(np.uint32)
    assert not np.any(f & 0xFFFF), values
    return (f >> 16).astype(np.uint16)


# type -> (NumPy dtype of the array, encoder for types NumPy lacks, kind)
TYPES = {
    DataType.INT8: (np.int8, None, "i"),
    DataType.UINT8: (np.uint8, None, "u"),
    DataType.INT32: (np.int32, None, "i"),
    DataType.UINT32: (np.uint32, None, "u"),
    DataType.INT64: (np.int64, None, "i"),
    DataType.UINT64: (np.uint64, None, "u"),
    DataType.FLOAT16: (np.float16, None, "f"),
    DataType.FLOAT32: (np.float32, None, "f"),
    DataType.FLOAT64: (np.float64, None, "f"),
    DataType.BFLOAT16: (np.uint16, _enc_bf16, "f"),
    DataType.FLOAT8_E4M3: (np.uint8, _enc_e4m3, "f"),
    DataType.FLOAT8_E5M2: (np.uint8, _enc_e5m2, "f"),
}


def make(t, values):
    """An array of type t holding values (exactly representable)."""
    npt, enc, _ = TYPES[t]
    return enc(values) if enc is not None else np.asarray(values).astype(npt)


def raw(t, values):
    """An array of type t whose elements are the bit patterns values (for
    copies, which move bits whatever they mean)."""
    return np.asarray(values).astype(TYPES[t][0])


def dtype_arg(t, k=0):
    """dtype= for type t: needed for carried types; for the others, left out
    or given in one of its accepted spellings (rotating with k)."""
    if TYPES[t][1] is not None:
        return [t, t.name.lower(), {"BFLOAT16": "bf16", "FLOAT8_E4M3": "fp8e4m3", "FLOAT8_E5M2": "float8_e5m2"}[t.name]][k % 3]
    return [None, t, np.dtype(TYPES[t][0]), None][k % 4]


# ---- inputs and expected results --------------------------------------------------


def value(op, t, r, i):
    """Rank r's input at global index i, for reduction op (None: a copy)."""
    kind = TYPES[t][2]
    if op in (None, ReduceOp.SUM):
        return (r + i) % 3 if op is not None else (r * 7 + i) % 11  # copies: distinct per rank
    if op == ReduceOp.PROD:
        return 1 + (r + i) % 2  # products up to 2**N: every type holds them
    if op in (ReduceOp.MAX, ReduceOp.MIN):
        v = (r * 3 + i) % 5
        return {"u": v * 50, "i": (v - 2) * 30, "f": v - 2}[kind]  # wide unsigned, signed, small floats
    if op == ReduceOp.AVG:
        # integers: truncating division of the sum; floating point: averages
        # of r + i % 3 over ranks, halves that every type holds (fp8e5m2,
        # with 2 mantissa bits, holds too few of the partial sums: the same
        # value on every rank there)
        if kind != "f":
            return (r + i) % 3
        return i % 3 - 1 if t == DataType.FLOAT8_E5M2 else r + i % 3
    raise AssertionError(op)


def inputs(op, t, r, n, base=0):
    return [value(op, t, r, base + i) for i in range(n)]


def reduced(op, t, n, base=0):
    cols = [inputs(op, t, r, n, base) for r in range(N)]
    out = []
    for i in range(n):
        vals = [c[i] for c in cols]
        if op == ReduceOp.SUM:
            out.append(sum(vals))
        elif op == ReduceOp.PROD:
            p = 1
            for v in vals:
                p *= v
            out.append(p)
        elif op == ReduceOp.MAX:
            out.append(max(vals))
        elif op == ReduceOp.MIN:
            out.append(min(vals))
        else:
            out.append(sum(vals) // N if TYPES[t][2] != "f" else sum(vals) / N)
    return out


def same(got, want_values, t, what, encode=make):
    want = encode(t, want_values)
    got = ARR.host(got, want.dtype)
    ok = got.dtype == want.dtype and got.shape == want.shape and got.tobytes() == want.tobytes()
    checks.true(ok, f"{what} ({t.name}): got {got.tolist()}, want {want.tolist()}")


def poison(t, n):
    """An output's contents before the call: a value no result has."""
    return dev(raw(t, [99] * n))


# ---- the collectives ------------------------------------------------------------


def test_all_reduce(t, op, k):
    x = dev(make(t, inputs(op, t, R, COUNT)))
    want = reduced(op, t, COUNT)
    out = poison(t, COUNT)
    comm.all_reduce(x, out, op, dtype=dtype_arg(t, k), stream=S)
    same(out, want, t, f"all_reduce {op.name} out of place")
    y = copy(x)
    comm.all_reduce(y, op=op.name.lower(), dtype=dtype_arg(t, k + 1), stream=S)
    same(y, want, t, f"all_reduce {op.name} in place (recvbuf=None)")
    z = copy(x)
    comm.all_reduce(z, z, op, dtype=dtype_arg(t, k + 2), stream=S)
    same(z, want, t, f"all_reduce {op.name} in place (same array)")


def test_reduce_scatter(t, op, k):
    full = dev(make(t, inputs(op, t, R, COUNT * N)))
    want = reduced(op, t, COUNT * N)[R * COUNT : (R + 1) * COUNT]
    out = poison(t, COUNT)
    comm.reduce_scatter(full, out, op, dtype=dtype_arg(t, k), stream=S)
    same(out, want, t, f"reduce_scatter {op.name} out of place")
    a = copy(full)
    comm.reduce_scatter(a, None, op, dtype=dtype_arg(t, k + 1), stream=S)
    same(a[R * COUNT : (R + 1) * COUNT], want, t, f"reduce_scatter {op.name} in place (recvbuf=None)")
    b = copy(full)
    comm.reduce_scatter(b, b[R * COUNT : (R + 1) * COUNT], op, dtype=dtype_arg(t, k + 2), stream=S)
    same(b[R * COUNT : (R + 1) * COUNT], want, t, f"reduce_scatter {op.name} in place (the rank's slice)")


def read_only(x):
    """x, read only where the array type has such a thing (NumPy): a buffer
    that is only read must be taken read only."""
    if ON_HOST:
        x.setflags(write=False)
    return x


def test_reduce(t, op, k):
    x = dev(make(t, inputs(op, t, R, COUNT)))
    want = reduced(op, t, COUNT)
    for root in range(N):
        out = poison(t, COUNT)
        before = ARR.host(copy(out), np.dtype(TYPES[t][0]))
        comm.reduce(x, out, op, root, dtype=dtype_arg(t, k + root), stream=S)
        if R == root:
            same(out, want, t, f"reduce {op.name} root {root} out of place")
        else:
            after = ARR.host(out, before.dtype)
            checks.true(after.tobytes() == before.tobytes(), f"reduce {op.name} root {root}: a non-root's recvbuf was written")
        y = copy(x)
        if R == root:
            comm.reduce(y, None, op, root=root, dtype=dtype_arg(t, k + root + 1), stream=S)
            same(y, want, t, f"reduce {op.name} root {root} in place")
        else:
            comm.reduce(read_only(y), None, op, root=root, dtype=dtype_arg(t, k + root + 1), stream=S)


def test_all_gather(t, k):
    mine = dev(raw(t, inputs(None, t, R, COUNT)))
    want = [v for r in range(N) for v in inputs(None, t, r, COUNT)]
    out = poison(t, COUNT * N)
    comm.all_gather(mine, out, dtype=dtype_arg(t, k), stream=S)
    same(out, want, t, "all_gather out of place", encode=raw)
    a = poison(t, COUNT * N)
    a[R * COUNT : (R + 1) * COUNT] = mine
    comm.all_gather(None, a, dtype=dtype_arg(t, k + 1), stream=S)
    same(a, want, t, "all_gather in place (sendbuf=None)", encode=raw)
    b = poison(t, COUNT * N)
    b[R * COUNT : (R + 1) * COUNT] = mine
    comm.all_gather(b[R * COUNT : (R + 1) * COUNT], b, dtype=dtype_arg(t, k + 2), stream=S)
    same(b, want, t, "all_gather in place (the rank's slice)", encode=raw)


def test_broadcast(t, k):
    for root in range(N):
        src = dev(raw(t, inputs(None, t, root, COUNT)))
        want = inputs(None, t, root, COUNT)
        out = poison(t, COUNT)
        if R == root:
            comm.broadcast(read_only(copy(src)), out, root, dtype=dtype_arg(t, k + root), stream=S)
        else:
            comm.broadcast(None, out, root=root, dtype=dtype_arg(t, k + root), stream=S)
        same(out, want, t, f"broadcast root {root} out of place", encode=raw)
        buf = copy(src) if R == root else poison(t, COUNT)
        comm.broadcast(buf, root=root, dtype=dtype_arg(t, k + root + 1), stream=S)
        same(buf, want, t, f"broadcast root {root} in place", encode=raw)


def test_all_to_all(t, k):
    # rank r sends chunk p (elements p*COUNT..) to rank p; value encodes (r, p, i)
    def chunk(r, p):
        return [(r * 5 + p * 3 + i) % 13 for i in range(COUNT)]

    send = dev(raw(t, [v for p in range(N) for v in chunk(R, p)]))
    want = [v for r in range(N) for v in chunk(r, R)]
    out = poison(t, COUNT * N)
    comm.all_to_all(send, out, dtype=dtype_arg(t, k), stream=S)
    same(out, want, t, "all_to_all out of place", encode=raw)
    a = copy(send)
    comm.all_to_all(a, dtype=dtype_arg(t, k + 1), stream=S)
    same(a, want, t, "all_to_all in place (recvbuf=None)", encode=raw)


def test_all_to_all_v(t, k):
    # rank r sends cnt(r, d) elements to rank d, blocks one element apart;
    # the counts and displacements where the data is (on the GPU: device memory)
    def cnt(r, d):
        return (r + 2 * d) % 3 + 1

    def block(r, d):
        return [(r * 5 + d * 3 + i) % 13 for i in range(cnt(r, d))]

    sc = np.array([cnt(R, d) for d in range(N)], dtype=np.uint64)
    sd = np.array([sum(cnt(R, j) + 1 for j in range(d)) for d in range(N)], dtype=np.uint64)
    vals = [0] * int(sd[-1] + sc[-1] + 1)
    for d in range(N):
        vals[int(sd[d]):int(sd[d] + sc[d])] = block(R, d)
    send = dev(raw(t, vals))
    want = [v for s in range(N) for v in block(s, R)]
    out = poison(t, len(want) + 2)  # room to spare: only what arrives is written
    rc = dev(np.full(N, 77, dtype=np.uint64))
    rd = dev(np.full(N, 77, dtype=np.uint64))
    comm.all_to_all_v(send, dev(sc), dev(sd), out, rc, rd, dtype=dtype_arg(t, k), stream=S)
    same(out[: len(want)], want, t, "all_to_all_v", encode=raw)
    checks.equal(ARR.host(rc, np.uint64).tolist(), [cnt(s, R) for s in range(N)], "all_to_all_v recvcounts")
    checks.equal(ARR.host(rd, np.uint64).tolist(), [sum(cnt(j, R) for j in range(s)) for s in range(N)],
                 "all_to_all_v rdispls")
    tail = raw(t, [99] * 2)
    got_tail = ARR.host(out[len(want):], tail.dtype)
    checks.true(bytes(got_tail.tobytes()) == bytes(tail.tobytes()), "all_to_all_v wrote past what arrived")


def test_all_to_all_v_errors():
    """Count arrays of the wrong type or length are refused before any call."""
    x = dev(np.zeros(8, dtype=np.float32))
    good = dev(np.zeros(N, dtype=np.uint64))
    bads = ((dev(np.zeros(N, dtype=np.int32)), "32-bit counts"), (dev(np.zeros(N + 1, dtype=np.uint64)), "N+1 counts"))
    for bad, what in bads:
        try:
            comm.all_to_all_v(x, bad, good, copy(x), copy(good), copy(good), stream=S)
            checks.true(False, f"all_to_all_v with {what} was accepted")
        except TypeError as e:
            checks.true("size_t" in str(e), f"all_to_all_v with {what}: {e}")


def test_send_recv(t, k):
    nxt, prv = (R + 1) % N, (R - 1) % N
    mine = dev(raw(t, inputs(None, t, R, COUNT)))
    got = poison(t, COUNT)
    with mscclpp.group():
        comm.send(mine, nxt, dtype=dtype_arg(t, k), stream=S)
        comm.recv(got, prv, dtype=dtype_arg(t, k), stream=S)
    same(got, inputs(None, t, prv, COUNT), t, "send/recv ring in a group", encode=raw)
    # to this rank, grouped (temporaries must live until the group's end)
    back = poison(t, COUNT)
    with mscclpp.group():
        comm.send(dev(raw(t, inputs(None, t, R, COUNT))), R, dtype=dtype_arg(t, k), stream=S)
        comm.recv(back, R, dtype=dtype_arg(t, k), stream=S)
    same(back, inputs(None, t, R, COUNT), t, "send/recv to this rank in a group", encode=raw)
    # a blocking pair outside a group: 0 <-> 1, the others sit it out
    if R in (0, 1):
        peer = 1 - R
        other = poison(t, COUNT)
        if R == 0:
            comm.send(mine, peer, dtype=dtype_arg(t, k), stream=S)
            comm.recv(other, peer, dtype=dtype_arg(t, k), stream=S)
        else:
            comm.recv(other, peer, dtype=dtype_arg(t, k), stream=S)
            comm.send(mine, peer, dtype=dtype_arg(t, k), stream=S)
        same(other, inputs(None, t, peer, COUNT), t, "send/recv pair outside a group", encode=raw)


def test_sizes():
    """Zero elements do nothing; larger calls cross the host backend's
    pipeline (1 MiB scratch per peer) several times, and on the GPU take the
    scratch, then (the same buffers again) the zero-copy paths."""
    z = dev(np.zeros(0, dtype=np.float32))
    comm.all_reduce(z, stream=S)
    comm.all_gather(z, dev(np.zeros(0, dtype=np.float32)), stream=S)
    comm.broadcast(z, root=0, stream=S)
    for mib in (3,) if ON_HOST else (3, 40):
        n = mib * 1024 * 1024 // 4 + 7
        base = np.arange(n, dtype=np.int32) % 1000
        want = ((np.arange(n, dtype=np.int64) % 1000) * N + N * (N - 1) // 2).astype(np.int32)
        x = dev(base + R)
        big = dev(np.zeros(n * N, dtype=np.int32))
        mine = dev(np.full(n, R, dtype=np.int32))
        for again in range(1 if ON_HOST else 2):
            y = copy(x)
            comm.all_reduce(y, stream=S)
            checks.true(np.array_equal(ARR.host(y, np.int32), want), f"all_reduce of {n} int32 (call {again}): wrong result")
            comm.all_gather(mine, big, stream=S)
            checks.true(np.array_equal(ARR.host(big, np.int32), np.repeat(np.arange(N, dtype=np.int32), n)),
                        f"all_gather of {n} int32 per rank (call {again})")


def test_shapes():
    """Multi-dimensional arrays count all their elements; memoryview and
    bytearray (the host backend) work as well as NumPy arrays."""
    x = dev(np.full((2, 3), R + 1, dtype=np.float64))
    comm.all_reduce(x, stream=S)
    got = ARR.host(x, np.float64)
    checks.true(bool(np.all(got == N * (N + 1) / 2)), f"all_reduce of a 2x3 array: {got.tolist()}")
    if not ON_HOST:
        return
    b = bytearray([R + 1] * 4)
    comm.all_reduce(b, op="max")  # format 'B': uint8
    checks.equal(bytes(b), bytes([N] * 4), "all_reduce max of a bytearray")
    m = memoryview(bytearray(8)).cast("i")  # int32 through a memoryview
    m[0] = R
    m[1] = 1
    comm.all_reduce(m)
    checks.equal(m.tolist(), [N * (N - 1) // 2, N], "all_reduce of an int32 memoryview")


with ARR.context():
    for k, t in enumerate(DataType):
        for j, op in enumerate(ReduceOp):
            test_all_reduce(t, op, k + j)
            test_reduce_scatter(t, op, k + j)
            test_reduce(t, op, k + j)
        test_all_gather(t, k)
        test_broadcast(t, k)
        test_all_to_all(t, k)
        test_all_to_all_v(t, k)
        test_send_recv(t, k)
    test_sizes()
    test_shapes()
    test_all_to_all_v_errors()
checks.true(comm.async_error() == mscclpp.Status.SUCCESS, "no asynchronous error at the end")
comm.destroy()
checks.done()
