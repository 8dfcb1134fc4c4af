# SPDX-License-Identifier: MIT
"""Communicators and their bootstrap through the Python package.

Run under ``mscclpp-run -n N`` (N >= 2). Covers the three ways to make a
communicator (launcher environment; a UniqueId that rank 0 creates and hands
to the others through a file, no communicator involved; "ip:port"), the
properties, the bootstrap's send/recv/allgather/barrier on bytes, abort and
the asynchronous error, the context manager, and the library-wide calls
(version, include_dir, params, coll_algo_names).
"""

from __future__ import annotations

import os
import socket
import tempfile
import time

from harness import Checks, require_numpy

np = require_numpy()

import mscclpp  # noqa: E402

checks = Checks("test_comm")
comm = mscclpp.Communicator.from_env()
R, N = comm.rank, comm.size


def env_int(name):
    return int(os.environ[name])


def test_properties():
    checks.equal(R, env_int("MSCCLPP_RANK"), "rank")
    checks.equal(N, env_int("MSCCLPP_NRANKS"), "size")
    checks.equal(comm.local_rank, env_int("MSCCLPP_LOCAL_RANK"), "local_rank")
    checks.equal(comm.local_size, env_int("MSCCLPP_LOCAL_NRANKS"), "local_size")
    checks.true(comm.handle != 0 and not comm.closed, "a live communicator has a handle")
    checks.true(f"rank {R} of {N}" in repr(comm), f"repr: {comm!r}")


def test_bootstrap():
    nxt, prv = (R + 1) % N, (R - 1) % N
    # two tags sent in one order, received in the other: tags do not block each other
    comm.bootstrap_send(b"first from %d" % R, nxt, tag=1)
    comm.bootstrap_send(np.arange(3, dtype=np.int64) * R, nxt, tag=2)
    arr = np.zeros(3, dtype=np.int64)
    comm.bootstrap_recv_into(arr, prv, tag=2)
    checks.true(arr.tolist() == [0, prv, 2 * prv], f"bootstrap_recv_into tag 2: {arr.tolist()}")
    want = b"first from %d" % prv
    checks.equal(comm.bootstrap_recv(len(want), prv, tag=1), want, "bootstrap_recv tag 1")
    # to this rank, and an empty message
    comm.bootstrap_send(bytearray(b"self"), R, tag=7)
    checks.equal(comm.bootstrap_recv(4, R, tag=7), b"self", "bootstrap send/recv to this rank")
    comm.bootstrap_send(b"", nxt, tag=8)
    checks.equal(comm.bootstrap_recv(0, prv, tag=8), b"", "an empty bootstrap message")
    # a receive of the wrong size fails (and consumes the message)
    comm.bootstrap_send(b"12345", nxt, tag=9)
    checks.raises(mscclpp.InvalidUsageError, comm.bootstrap_recv, 4, prv, tag=9, what="bootstrap_recv of the wrong size")
    # allgather of bytes and of an array, barrier
    got = comm.bootstrap_all_gather(b"rank%03d" % R)
    checks.equal(got, [b"rank%03d" % r for r in range(N)], "bootstrap_all_gather")
    got = comm.bootstrap_all_gather(np.array([R, R * R], dtype=np.int32))
    checks.equal([np.frombuffer(g, dtype=np.int32).tolist() for g in got], [[r, r * r] for r in range(N)], "bootstrap_all_gather of arrays")
    checks.equal(comm.bootstrap_all_gather(b""), [b""] * N, "bootstrap_all_gather of nothing")
    comm.barrier()


def check_works(c, what):
    """c is a communicator of all N ranks with the right rank and size, and
    an all_reduce over it gives the right answer."""
    checks.equal((c.rank, c.size), (R, N), f"{what}: rank and size")
    x = np.array([R + 1, 1], dtype=np.int32)
    c.all_reduce(x)
    checks.equal(x.tolist(), [N * (N + 1) // 2, N], f"{what}: all_reduce")


def test_unique_id_through_a_file():
    # One directory per launcher run, the same on every rank: the run's
    # random secret names it. Rank 0 writes the id there (renamed into place,
    # so a reader never sees half of it); the others poll for it.
    tag = os.environ["MSCCLPP_COMM_SECRET"][:16]
    path = os.path.join(tempfile.gettempdir(), f"mscclpp-py-test-{tag}.uid")
    if R == 0:
        uid = mscclpp.UniqueId.create()
        raw = bytes(uid)
        checks.equal(len(raw), mscclpp.UniqueId.SIZE, "a unique id is 128 bytes")
        checks.equal(mscclpp.UniqueId.from_bytes(raw), uid, "bytes round trip")
        checks.true("secret" in repr(uid) and raw.hex() not in repr(uid), "repr does not show the id")
        with open(path + ".tmp", "wb") as f:
            f.write(raw)
        os.rename(path + ".tmp", path)
    else:
        deadline = time.monotonic() + 60
        while not os.path.exists(path):
            if time.monotonic() > deadline:
                checks.fail(f"no unique id in {path} after 60 s")
                return
            time.sleep(0.01)
        with open(path, "rb") as f:
            uid = mscclpp.UniqueId.from_bytes(f.read())
    with mscclpp.Communicator(N, R, uid) as c:
        check_works(c, "Communicator(nranks, rank, UniqueId)")
    checks.true(c.closed, "the context manager destroyed the communicator")
    comm.barrier()  # every rank has read the file
    if R == 0:
        os.unlink(path)
    # the id's bytes work as well as the object (rank 0 creates a new one)
    raw = bytes(mscclpp.UniqueId.create()) if R == 0 else b""
    raw = comm.bootstrap_all_gather(raw.ljust(mscclpp.UniqueId.SIZE, b"\0"))[0]
    c = mscclpp.Communicator(N, R, raw)
    check_works(c, "Communicator(nranks, rank, bytes)")
    c.destroy()
    c.destroy()  # a second destroy does nothing


class FileStore:
    """A key-value store in files, shaped like torch.distributed's Store
    (set/get, get waits), to make communicators through from_store."""

    def __init__(self, root):
        self.root = root
        os.makedirs(root, exist_ok=True)

    def _path(self, key):
        return os.path.join(self.root, key.replace("/", "_"))

    def set(self, key, value):
        with open(self._path(key) + ".tmp", "wb") as f:
            f.write(value)
        os.rename(self._path(key) + ".tmp", self._path(key))

    def get(self, key):
        deadline = time.monotonic() + 60
        while not os.path.exists(self._path(key)):
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {key} in the store after 60 s")
            time.sleep(0.01)
        with open(self._path(key), "rb") as f:
            return f.read()


def test_from_store():
    tag = os.environ["MSCCLPP_COMM_SECRET"][:16]
    store = FileStore(os.path.join(tempfile.gettempdir(), f"mscclpp-py-store-{tag}"))
    # two communicators through one store, each under its own key
    for key in ("first", "second"):
        with mscclpp.Communicator.from_store(store, R, N, key=key) as c:
            check_works(c, f"Communicator.from_store (key {key})")
    checks.raises(TypeError, mscclpp.Communicator.from_store, object(), R, N, what="from_store with a non-store")
    checks.raises(ValueError, mscclpp.Communicator.from_store, store, N, N, what="from_store with rank == size")
    comm.barrier()
    if R == 0:
        import shutil

        shutil.rmtree(store.root)


def test_ip_port():
    port = 0
    if R == 0:
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
    port = int.from_bytes(comm.bootstrap_all_gather(port.to_bytes(4, "little"))[0], "little")
    c = mscclpp.Communicator(N, R, f"127.0.0.1:{port}")
    check_works(c, "Communicator(nranks, rank, 'ip:port')")
    c.destroy()


def test_abort():
    uid_raw = bytes(mscclpp.UniqueId.create()) if R == 0 else b"\0" * mscclpp.UniqueId.SIZE
    uid = mscclpp.UniqueId(comm.bootstrap_all_gather(uid_raw)[0])
    c = mscclpp.Communicator(N, R, uid)
    checks.equal(c.async_error(), mscclpp.Status.SUCCESS, "no asynchronous error before the abort")
    c.check_async_error()
    c.abort("stopped by test_comm")
    checks.equal(c.async_error(), mscclpp.Status.ABORTED, "async_error after abort")
    e = checks.raises(mscclpp.AbortedError, c.check_async_error, contains="stopped by test_comm", what="check_async_error after abort")
    if e is not None:
        checks.equal(e.status, mscclpp.Status.ABORTED, "the exception's status")
        checks.true(isinstance(e, mscclpp.MscclppError), "AbortedError is an MscclppError")
    checks.raises(mscclpp.AbortedError, c.all_reduce, np.zeros(4, dtype=np.float32), what="all_reduce after abort")
    comm.barrier()  # every rank aborted before any destroys
    c.destroy()
    checks.true(c.closed, "an aborted communicator can be destroyed")


def test_context_manager_on_error():
    # An exception in the body aborts and destroys, and is the one that
    # propagates.
    uid_raw = bytes(mscclpp.UniqueId.create()) if R == 0 else b"\0" * mscclpp.UniqueId.SIZE
    uid = mscclpp.UniqueId(comm.bootstrap_all_gather(uid_raw)[0])
    kept = []

    def body():
        with mscclpp.Communicator(N, R, uid) as c:
            kept.append(c)
            raise KeyError("from the body")

    checks.raises(KeyError, body, contains="from the body", what="the body's exception propagates")
    checks.true(kept and kept[0].closed, "the communicator was destroyed")


def test_library():
    v = mscclpp.version()
    checks.equal(v, mscclpp.__version__, "version() is the package's version")
    inc = mscclpp.include_dir()
    checks.true(os.path.isfile(os.path.join(inc, "mscclpp", "coll.h")), f"include_dir() {inc} holds mscclpp/coll.h")
    checks.true(os.path.isfile(mscclpp.library_path()), "library_path() is a file")
    names = [p.name for p in mscclpp.params()]
    checks.true("MSCCLPP_TIMEOUT" in names and "MSCCLPP_DEBUG" in names, f"params(): {names}")
    mscclpp.params_check()  # this environment parses
    ok, text = mscclpp.net_description()
    checks.true(isinstance(ok, bool) and len(text) > 0, f"net_description(): {ok}, {text!r}")
    saved = os.environ.get("MSCCLPP_FIFO_SIZE")
    os.environ["MSCCLPP_FIFO_SIZE"] = "lots"
    try:
        checks.raises(mscclpp.InvalidArgumentError, mscclpp.params_check, contains='MSCCLPP_FIFO_SIZE="lots"')
        checks.raises(mscclpp.InvalidArgumentError, mscclpp.net_description, contains="MSCCLPP_FIFO_SIZE")
    finally:
        if saved is None:
            del os.environ["MSCCLPP_FIFO_SIZE"]
        else:
            os.environ["MSCCLPP_FIFO_SIZE"] = saved
    mscclpp.params_check()
    checks.true("rsag" in mscclpp.coll_algo_names("allreduce"), "coll_algo_names('allreduce')")
    checks.raises(ValueError, mscclpp.coll_algo_names, "allsorts", contains="allsorts")


test_properties()
test_bootstrap()
test_unique_id_through_a_file()
test_from_store()
test_ip_port()
test_abort()
test_context_manager_on_error()
test_library()
comm.destroy()
checks.done()
