# SPDX-License-Identifier: MIT
"""Communicators, their bootstrap, the collectives and groups."""

from __future__ import annotations

import ctypes
import os
import threading
import time
from ctypes import byref, c_int, c_void_p
from typing import Any, Iterable, List, Optional, Tuple, Union

from . import _lib
from . import _channels
from ._buffer import Array, as_array, resolve
from ._channels import Allocation, Connection, MemKind, RegisteredMemory, Transport
from ._errors import InvalidUsageError, Status
from ._plan import Plan, PlanInfo
from ._plan import info_of as plan_info_of
from ._lib import UNIQUE_ID_BYTES, UniqueIdStruct, call
from ._types import DataType, DTypeLike, OpLike, ReduceOp, to_datatype, to_reduce_op

_INT_MAX = 2**31 - 1
_INT_MIN = -(2**31)

# (send address, recv address, the C call's count, element type) of a collective call
_CallArgs = Tuple[Optional[int], Optional[int], int, DataType]

StreamLike = Any
"""``None`` or ``0`` (the legacy default stream), an ``int`` handle
(``cudaStream_t``), or an object that gives one: ``__cuda_stream__()``,
``.cuda_stream`` (PyTorch), ``.ptr`` (CuPy) or ``.handle``. Ignored on the
host backend."""

ArrayLike = Any
"""A C-contiguous array: a buffer-protocol object (NumPy array, bytearray,
memoryview, ...; host memory) or an object with ``__cuda_array_interface__``
(device memory)."""


def _int_arg(name: str, value: Any, lo: int = _INT_MIN, hi: int = _INT_MAX) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            value = value.__index__()
        except AttributeError:
            raise TypeError(f"{name} must be an int, not {type(value).__name__}") from None
    if not lo <= value <= hi:
        raise ValueError(f"{name} is {value}, outside {lo}..{hi}")
    return int(value)


def _stream_handle(stream: StreamLike) -> Optional[int]:
    if stream is None:
        return None
    if isinstance(stream, int) and not isinstance(stream, bool):
        if stream < 0:
            raise ValueError(f"stream handle {stream} is negative")
        return stream or None
    proto = getattr(stream, "__cuda_stream__", None)
    if callable(proto):
        value = proto()
        if isinstance(value, tuple) and len(value) == 2:
            return int(value[1]) or None
    for attr in ("cuda_stream", "ptr", "handle"):
        value = getattr(stream, attr, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return value or None
    raise TypeError(f"stream: expected an int handle or a CUDA stream object, got {type(stream).__name__}")


class UniqueId:
    """``mscclppUniqueId``: the root address and a random job secret.

    :meth:`create` makes one and starts the root listener in this process
    (which must stay alive until every rank has joined); the other ranks get
    it as bytes (``bytes(uid)``, 128 of them) through any channel you have (a
    file, MPI, a key-value store) and rebuild it with :meth:`from_bytes`.
    Whoever holds it can join the job: treat it as a secret.
    """

    SIZE = UNIQUE_ID_BYTES

    __slots__ = ("_data",)

    def __init__(self, data: Union[bytes, bytearray, memoryview]) -> None:
        data = bytes(data)
        if len(data) != UNIQUE_ID_BYTES:
            raise ValueError(f"a unique id is {UNIQUE_ID_BYTES} bytes, got {len(data)}")
        self._data = data

    @classmethod
    def create(cls) -> "UniqueId":
        """``mscclppGetUniqueId``: a new id, served by a listener thread of
        this process."""
        uid = UniqueIdStruct()
        call("mscclppGetUniqueId", byref(uid))
        return cls(ctypes.string_at(ctypes.addressof(uid), UNIQUE_ID_BYTES))

    @classmethod
    def from_bytes(cls, data: Union[bytes, bytearray, memoryview]) -> "UniqueId":
        """The id whose ``bytes()`` were ``data``."""
        return cls(data)

    def __bytes__(self) -> bytes:
        return self._data

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UniqueId) and other._data == self._data

    def __hash__(self) -> int:
        return hash(self._data)

    def __repr__(self) -> str:
        return "UniqueId(<secret>)"

    def _struct(self) -> UniqueIdStruct:
        s = UniqueIdStruct()
        ctypes.memmove(byref(s), self._data, UNIQUE_ID_BYTES)
        return s


# ---- groups ------------------------------------------------------------------

_group_state = threading.local()


def _group_keep(arrays: List[Array]) -> None:
    """Inside a group a send/recv runs at the group's end: keep its arrays
    (and their buffer exports) alive until then."""
    keep = getattr(_group_state, "keep", None)
    if keep is not None:
        keep.extend(a.keep for a in arrays)


class group:
    """``with mscclpp.group():`` groups the send/recv calls of this thread
    (``mscclppGroupStart``/``mscclppGroupEnd``): they all run at the end of
    the outermost group, in any pattern (rings, all-to-all) without deadlock.
    One group's operations use one communicator and one stream. Groups nest.

    The end raises the first error of the group's operations. When the body
    raises, the group is still ended (the C library has no way to drop it)
    and the body's exception is the one that propagates.
    """

    def __enter__(self) -> "group":
        call("mscclppGroupStart")
        depth = getattr(_group_state, "depth", 0)
        if depth == 0:
            _group_state.keep = []
        _group_state.depth = depth + 1
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        _group_state.depth -= 1
        try:
            rc = _lib.lib().mscclppGroupEnd()
            if exc_type is None:
                _lib.check("mscclppGroupEnd", rc)
        finally:
            if _group_state.depth == 0:
                _group_state.keep = None


# ---- communicators -----------------------------------------------------------


class Communicator:
    """A communicator: ``nranks`` processes joined through a bootstrap.

    Made in one of three ways:

    - ``Communicator.from_env()``: rank, size and root address from the
      launcher (``mscclpp-run``, Open MPI, Slurm, torchrun; see README);
    - ``Communicator(nranks, rank, uid)`` with a :class:`UniqueId` (or its
      bytes) that rank 0 created and shipped to the others;
    - ``Communicator(nranks, rank, "ip:port")``: rank 0 listens there.

    Creation waits until every rank has joined (bounded by
    ``MSCCLPP_TIMEOUT``). Use it as a context manager, or call
    :meth:`destroy`: destroying waits for every rank too, so it is not left
    to the garbage collector. Any call after :meth:`destroy` raises
    :class:`InvalidUsageError`.

    Collectives take arrays (:data:`ArrayLike`); counts come from their
    sizes, the element type from their dtype (or ``dtype=`` for types NumPy
    lacks: bfloat16 in uint16 arrays, fp8 in uint8 arrays). On the host
    backend (no GPU) they are host arrays and each call returns when this
    rank's part is done; on a GPU communicator they are device arrays and
    each call is enqueued on ``stream``.
    """

    def __init__(self, nranks: int, rank: int, root: Union["UniqueId", bytes, str]) -> None:
        nranks = _int_arg("nranks", nranks, 1)
        rank = _int_arg("rank", rank, 0, nranks - 1)
        handle = c_void_p()
        if isinstance(root, str):
            call("mscclppCommInitRank", byref(handle), nranks, rank, root.encode())
        elif isinstance(root, (UniqueId, bytes, bytearray, memoryview)):
            uid = root if isinstance(root, UniqueId) else UniqueId(root)
            call("mscclppCommInitRankFromId", byref(handle), nranks, uid._struct(), rank)
        else:
            raise TypeError(f"root: expected a UniqueId, its bytes, or an 'ip:port' string, got {type(root).__name__}")
        self._adopt(handle)

    @classmethod
    def from_env(cls) -> "Communicator":
        """``mscclppCommInitFromEnv``: a communicator from the launcher's
        environment (MSCCLPP_RANK/NRANKS/COMM_ID as ``mscclpp-run`` sets
        them, or Open MPI's, Slurm's, torchrun's variables)."""
        handle = c_void_p()
        call("mscclppCommInitFromEnv", byref(handle))
        return cls._from_handle(handle)

    @classmethod
    def from_store(cls, store: Any, rank: int, size: int, key: str = "mscclpp/unique_id") -> "Communicator":
        """A communicator rendezvoused through a key-value store that every
        rank reaches: rank 0 puts a new :class:`UniqueId` under ``key``, the
        others read it (``store.get`` waits for it, bounded by the store's
        own timeout). A ``torch.distributed`` store (TCPStore, FileStore,
        PrefixStore) fits, as does any object with ``set(key, bytes)`` and
        ``get(key) -> bytes``. Use a new key for each communicator made
        through one store."""
        size = _int_arg("size", size, 1)
        rank = _int_arg("rank", rank, 0, size - 1)
        if not (callable(getattr(store, "set", None)) and callable(getattr(store, "get", None))):
            raise TypeError(f"store: expected an object with set(key, value) and get(key), got {type(store).__name__}")
        if rank == 0:
            uid = UniqueId.create()
            store.set(key, bytes(uid))
        else:
            data = store.get(key)
            if not isinstance(data, (bytes, bytearray, memoryview)):
                raise TypeError(f"store.get({key!r}) returned a {type(data).__name__}, not bytes")
            uid = UniqueId(data)
        return cls(size, rank, uid)

    @classmethod
    def _from_handle(cls, handle: c_void_p) -> "Communicator":
        self = cls.__new__(cls)
        self._adopt(handle)
        return self

    @classmethod
    def join(cls, nranks: int, rank: int, uid: Union["UniqueId", bytes]) -> "Communicator":
        """``mscclppCommGrow(NULL, ...)``: a new process joins the ranks of a
        communicator that grows to ``nranks``, as rank ``rank`` (from the old
        size up), with the id the members got from :meth:`grow_id`. The
        members call :meth:`grow` with the same id and ``nranks``; everyone
        waits until all have joined (``MSCCLPP_TIMEOUT``). A rank number that
        a member holds, or members that are not all there, fail on every
        rank (:class:`RemoteError` or :class:`InvalidUsageError`)."""
        nranks = _int_arg("nranks", nranks, 2)
        rank = _int_arg("rank", rank, 1, nranks - 1)
        if not isinstance(uid, (UniqueId, bytes, bytearray, memoryview)):
            raise TypeError(f"uid: expected a UniqueId or its bytes, got {type(uid).__name__}")
        uid = uid if isinstance(uid, UniqueId) else UniqueId(uid)
        handle = c_void_p()
        id_struct = uid._struct()
        call("mscclppCommGrow", None, nranks, byref(id_struct), rank, byref(handle))
        return cls._from_handle(handle)

    def _adopt(self, handle: c_void_p) -> None:
        self._h: Optional[c_void_p] = handle
        self._lock = threading.Lock()
        out = c_int()
        values = []
        for fn in (
            "mscclppCommRank",
            "mscclppCommSize",
            "mscclppCommLocalRank",
            "mscclppCommLocalSize",
            "mscclppCommGetDevice",
        ):
            call(fn, handle, byref(out))
            values.append(out.value)
        self._rank, self._size, self._local_rank, self._local_size, self._device = values

    # -- state

    def _handle(self) -> c_void_p:
        h = self._h
        if h is None:
            raise InvalidUsageError(Status.INVALID_USAGE, "the communicator was destroyed")
        return h

    @property
    def rank(self) -> int:
        """This process's rank, 0..size-1."""
        return self._rank

    @property
    def size(self) -> int:
        """The number of ranks."""
        return self._size

    @property
    def local_rank(self) -> int:
        """This rank among the ranks of its host."""
        return self._local_rank

    @property
    def local_size(self) -> int:
        """The number of ranks on this host."""
        return self._local_size

    @property
    def device(self) -> int:
        """Where the collectives run: the CUDA device (0 and up) whose
        arrays they take, or -1 for the host backend, which takes host
        arrays (``mscclppCommGetDevice``)."""
        return self._device

    @property
    def closed(self) -> bool:
        """True once :meth:`destroy` has run."""
        return self._h is None

    @property
    def handle(self) -> int:
        """The ``mscclppComm_t`` as an int, for code that calls the C API
        itself; the communicator keeps ownership."""
        return self._handle().value or 0

    def __repr__(self) -> str:
        state = "destroyed" if self.closed else f"rank {self._rank} of {self._size}"
        return f"<mscclpp.Communicator {state}>"

    def destroy(self) -> None:
        """``mscclppCommDestroy``: leave the job and free everything. Waits
        for the other ranks (bounded). Safe after a peer failure or an
        abort; a second call does nothing."""
        with self._lock:
            h = self._h
            if h is None:
                return
            call("mscclppCommDestroy", h)
            self._h = None

    def abort(self, reason: Optional[str] = None) -> None:
        """``mscclppCommAbort``: raise the abort flag: every wait of this
        communicator (host calls, kernels, proxy) returns
        :class:`AbortedError`, and :meth:`async_error` reports ABORTED. The
        communicator can still be destroyed."""
        call("mscclppCommAbort", self._handle(), reason.encode() if reason is not None else None)

    def async_error(self) -> Status:
        """``mscclppCommGetAsyncError``: the first asynchronous error (a
        failed proxy operation, a lost peer, a timeout in a device wait), or
        ``Status.SUCCESS``. :meth:`check_async_error` raises it instead."""
        out = c_int()
        call("mscclppCommGetAsyncError", self._handle(), byref(out))
        try:
            return Status(out.value)
        except ValueError:
            return out.value  # type: ignore[return-value]

    def check_async_error(self) -> None:
        """Raise the asynchronous error, if there is one, as an
        :class:`MscclppError` with its reason."""
        status = self.async_error()
        if status != Status.SUCCESS:
            _lib.check("mscclppCommGetAsyncError", int(status))

    # -- after a failure: revoke, shrink; grow back

    def revoke(self, timeout: float = 0.0) -> bool:
        """``mscclppCommRevoke``: stop everything in flight on this
        communicator, on this rank only (no peer takes part). Calls waiting
        on other threads (collectives, the bootstrap, channel waits, and on
        a GPU the kernels at their next poll) return :class:`AbortedError`;
        from then on its collectives, send/recv and channels fail with its
        first error, and :meth:`async_error` reports it. What still works:
        :meth:`shrink` (no ``abort`` needed), new bootstrap operations
        (:meth:`barrier`, ...) and :meth:`destroy`.

        Returns True once no call on this communicator is running on another
        thread (it is quiescent), False if one still is after ``timeout``
        seconds of asking again (0, the default: ask once). Calling it again
        only asks again."""
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 <= timeout < 1e9:
            raise ValueError(f"revoke: timeout must be a number of seconds >= 0, not {timeout!r}")
        h = self._handle()
        deadline = time.monotonic() + timeout
        while True:
            rc = _lib.lib().mscclppCommRevoke(h, _lib.REVOKE_DEFAULT)
            if rc == Status.SUCCESS:
                return True
            if rc != Status.IN_PROGRESS:
                _lib.check("mscclppCommRevoke", rc)
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.001)

    def shrink(self, exclude: Iterable[int] = (), *, abort: bool = False) -> "Communicator":
        """``mscclppCommShrink``: a new communicator of this one's ranks
        other than ``exclude`` (any order, repeats allowed), renumbered in
        order: the rank that was ``r`` becomes ``r`` minus the excluded ranks
        below it. Every member (every rank not excluded) calls it with the
        same list; the excluded ranks do not (they may be dead, rank 0
        included). No new unique id and nothing from the excluded ranks is
        needed.

        ``abort=False`` (``MSCCLPP_SHRINK_DEFAULT``) is the planned shrink
        of a healthy or revoked (:meth:`revoke`) communicator, which stays
        usable.
        After a failure (a peer lost, a timeout) pass ``abort=True``
        (``MSCCLPP_SHRINK_ABORT``): this communicator is revoked first; a
        failed communicator that was not revoked refuses ``abort=False``
        (:class:`InvalidUsageError`).

        The new communicator shares nothing with this one, which stays until
        :meth:`destroy` (every rank calls it, after destroying the memory and
        channels made on it). A shrink is not atomic across the members: if
        a member dies during it, some members raise :class:`RemoteError`
        while others may already hold the new communicator. Agree that every
        member succeeded (a store, the launcher) before going on; otherwise
        destroy the new one and shrink this one again without the newly
        dead rank. Members passing different lists raise
        :class:`InvalidUsageError` naming both lists. Bounded by
        ``MSCCLPP_TIMEOUT``.

        Raises ValueError (before the library is called, nothing exchanged)
        when ``exclude`` names this rank or a rank outside ``0..size-1``,
        TypeError when it is not a collection of ints, and
        :class:`InvalidUsageError` on a destroyed communicator."""
        h = self._handle()
        if isinstance(exclude, (str, bytes, bytearray)) or not hasattr(exclude, "__iter__"):
            raise TypeError(f"shrink: exclude must be a collection of ranks (ints), not {type(exclude).__name__}")
        ranks = []
        for r in exclude:
            if isinstance(r, bool) or not isinstance(r, int):
                try:
                    r = r.__index__()
                except AttributeError:
                    raise TypeError(f"shrink: exclude holds a {type(r).__name__} ({r!r}), not a rank") from None
            if not 0 <= r < self._size:
                raise ValueError(f"shrink: exclude names rank {r}, which is not a rank of this communicator "
                                 f"(0..{self._size - 1})")
            if r == self._rank:
                raise ValueError(f"shrink: exclude names this rank ({r}); excluded ranks do not call shrink")
            ranks.append(int(r))
        if not isinstance(abort, bool):
            raise TypeError(f"shrink: abort must be a bool, not {type(abort).__name__}")
        arr = (c_int * max(1, len(ranks)))(*ranks)
        handle = c_void_p()
        flags = _lib.SHRINK_ABORT if abort else _lib.SHRINK_DEFAULT
        call("mscclppCommShrink", h, arr if ranks else None, len(ranks), byref(handle), flags)
        return Communicator._from_handle(handle)

    def grow_id(self) -> "UniqueId":
        """``mscclppCommGrowId``: the id new processes join with
        (:meth:`join`) when this communicator grows (:meth:`grow`). Every
        rank calls it; rank 0 makes the id and serves its rendezvous in its
        own process (which stays alive until the new ranks have joined), the
        others receive it. Treat it as a secret."""
        h = self._handle()
        uid = UniqueIdStruct()
        call("mscclppCommGrowId", h, byref(uid))
        return UniqueId(ctypes.string_at(ctypes.addressof(uid), UNIQUE_ID_BYTES))

    def grow(self, nranks: int, uid: Union["UniqueId", bytes]) -> "Communicator":
        """``mscclppCommGrow``: a new communicator of ``nranks`` ranks,
        this one's (which keep their numbers) and new processes that call
        :meth:`join` with ranks from :attr:`size` up. Every member passes
        the id of :meth:`grow_id` and the same ``nranks``, and waits until
        all have joined (``MSCCLPP_TIMEOUT``). The new communicator shares
        nothing with this one, which stays until it is destroyed. Raises
        ValueError when ``nranks`` is not above :attr:`size`; a new rank that
        took a member's number fails on every rank."""
        h = self._handle()
        nranks = _int_arg("nranks", nranks)
        if nranks <= self._size:
            raise ValueError(f"grow: nranks is {nranks}; it must be above this communicator's size ({self._size})")
        if not isinstance(uid, (UniqueId, bytes, bytearray, memoryview)):
            raise TypeError(f"uid: expected a UniqueId or its bytes, got {type(uid).__name__}")
        uid = uid if isinstance(uid, UniqueId) else UniqueId(uid)
        id_struct = uid._struct()
        handle = c_void_p()
        call("mscclppCommGrow", h, nranks, byref(id_struct), -1, byref(handle))
        return Communicator._from_handle(handle)

    def __enter__(self) -> "Communicator":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.destroy()
            return
        # The body failed: tell this rank's waits to stop before leaving, and
        # let the body's exception, not a failed destroy, propagate.
        try:
            if not self.closed:
                self.abort(f"exception in the application: {exc_type.__name__}: {exc}"[:200])
            self.destroy()
        except Exception:
            pass

    # -- bootstrap (host bytes, blocking, bounded by MSCCLPP_TIMEOUT)

    def barrier(self) -> None:
        """``mscclppBootstrapBarrier``: returns when every rank has entered."""
        call("mscclppBootstrapBarrier", self._handle())

    def bootstrap_send(self, data: Any, peer: int, tag: int = 0) -> None:
        """``mscclppBootstrapSend``: send the bytes of ``data`` (any
        buffer-protocol object) to ``peer`` (may be this rank) with ``tag``.
        Never waits for the matching receive."""
        h = self._handle()
        peer = _int_arg("peer", peer, 0, self._size - 1)
        tag = _int_arg("tag", tag)
        arr = as_array(data, "data", writable=False)
        if arr.device:
            raise TypeError("data: the bootstrap carries host memory, not device arrays")
        call("mscclppBootstrapSend", h, peer, tag, arr.ptr, arr.nbytes)

    def bootstrap_recv_into(self, buf: Any, peer: int, tag: int = 0) -> None:
        """``mscclppBootstrapRecv`` into ``buf`` (writable, buffer protocol):
        the message from ``peer`` with ``tag`` must be exactly its size
        (:class:`InvalidUsageError` otherwise, and the message is consumed)."""
        h = self._handle()
        peer = _int_arg("peer", peer, 0, self._size - 1)
        tag = _int_arg("tag", tag)
        arr = as_array(buf, "buf", writable=True)
        if arr.device:
            raise TypeError("buf: the bootstrap carries host memory, not device arrays")
        call("mscclppBootstrapRecv", h, peer, tag, arr.ptr, arr.nbytes)

    def bootstrap_recv(self, nbytes: int, peer: int, tag: int = 0) -> bytes:
        """``mscclppBootstrapRecv`` of a message of exactly ``nbytes`` bytes
        from ``peer`` with ``tag``, returned as bytes."""
        nbytes = _int_arg("nbytes", nbytes, 0, 2**62)
        buf = bytearray(nbytes)
        self.bootstrap_recv_into(buf, peer, tag)
        return bytes(buf)

    def bootstrap_all_gather(self, data: Any) -> List[bytes]:
        """``mscclppBootstrapAllGather``: every rank's ``data`` (the same
        length on every rank), indexed by rank."""
        h = self._handle()
        arr = as_array(data, "data", writable=False)
        if arr.device:
            raise TypeError("data: the bootstrap carries host memory, not device arrays")
        n = arr.nbytes
        buf = bytearray(n * self._size)
        base = ctypes.addressof((ctypes.c_char * len(buf)).from_buffer(buf)) if buf else 0
        if n:
            ctypes.memmove(base + self._rank * n, arr.ptr, n)
        call("mscclppBootstrapAllGather", h, base, n)
        return [bytes(buf[r * n : (r + 1) * n]) for r in range(self._size)]

    # -- memory and connections (channels: mscclpp.MemoryChannel, PortChannel)

    def alloc(self, kind: MemKind, nbytes: int) -> Allocation:
        """``mscclppMemAlloc``: memory of ``kind`` that peers can map (host
        shared memory for the host backend's channels, device memory, ...)."""
        return _channels.alloc(self, kind, _int_arg("nbytes", nbytes, 1, 2**63 - 1))

    def register_memory(self, buf: Any, transports: Transport = Transport.AUTO) -> RegisteredMemory:
        """``mscclppMemoryRegister`` of all of ``buf`` (an array, device or
        host, or an :class:`Allocation`), for ``transports``."""
        return _channels.register_memory(self, buf, transports)

    def recv_memory(self, peer: int, tag: int = 0) -> RegisteredMemory:
        """``mscclppMemoryRecv``: open the memory ``peer`` sent with
        :meth:`RegisteredMemory.send` under ``tag``."""
        return _channels.recv_memory(self, _int_arg("peer", peer, 0, self._size - 1), _int_arg("tag", tag))

    def connect(self, peer: int, tag: int = 0, transport: Transport = Transport.AUTO) -> Connection:
        """``mscclppConnectionCreate`` to ``peer`` (both ranks call it, same
        tag)."""
        return _channels.connect(self, _int_arg("peer", peer, 0, self._size - 1), _int_arg("tag", tag), transport)

    # -- collectives

    def _args(self, specs: List[Any], dtype: Optional[DTypeLike]) -> Tuple[DataType, List[Array], List[int]]:
        """Describe (object, argument name, written?) triples and resolve
        their element type and counts (see :func:`mscclpp._buffer.resolve`)."""
        arrays = [as_array(obj, name, writable) for obj, name, writable in specs]
        self._check_memory(arrays)
        t = to_datatype(dtype) if dtype is not None else None
        t, counts = resolve(arrays, t)
        return t, arrays, counts

    def _check_memory(self, arrays: List[Array]) -> None:
        """Host arrays on the host backend, device arrays on a GPU: the other
        way round a kernel would read a host address, or the CPU a device one
        (a crash, not an error), so it is refused here."""
        for a in arrays:
            if a.nbytes == 0 or a.device == (self._device >= 0):
                continue
            if a.device:
                raise TypeError(
                    f"{a.name} is in device memory, but this communicator runs on the host backend (no GPU; "
                    "CUDA_VISIBLE_DEVICES may hide them): pass host arrays (NumPy)"
                )
            raise TypeError(
                f"{a.name} is in host memory, but this communicator runs on GPU {self._device}: pass device arrays "
                "(CuPy, PyTorch, or anything with __cuda_array_interface__ or DLPack on the device)"
            )

    def _size_error(self, fn: str, a: Array, have: int, want: int, why: str) -> ValueError:
        return ValueError(f"{fn}: {a.name} has {have} elements, {why} needs {want}")

    def all_reduce(
        self,
        sendbuf: ArrayLike,
        recvbuf: Optional[ArrayLike] = None,
        op: OpLike = ReduceOp.SUM,
        *,
        dtype: Optional[DTypeLike] = None,
        stream: StreamLike = None,
    ) -> None:
        """``recvbuf[i] = op over ranks of sendbuf[i]`` on every rank.
        ``recvbuf=None`` (or the same array) works in place on ``sendbuf``."""
        h = self._handle()
        rop = to_reduce_op(op)
        send, recv, n, t = self._all_reduce_args("all_reduce", sendbuf, recvbuf, dtype)
        call("mscclppAllReduce", send, recv, n, t, rop, h, _stream_handle(stream))

    def _all_reduce_args(self, fn: str, sendbuf: Any, recvbuf: Any, dtype: Optional[DTypeLike]) -> _CallArgs:
        if recvbuf is None:
            t, (a,), (n,) = self._args([(sendbuf, "sendbuf", True)], dtype)
            return a.ptr, a.ptr, n, t
        t, (send, recv), (n, m) = self._args([(sendbuf, "sendbuf", False), (recvbuf, "recvbuf", True)], dtype)
        if m != n:
            raise self._size_error(fn, recv, m, n, "sendbuf's size")
        return send.ptr, recv.ptr, n, t

    def all_gather(
        self,
        sendbuf: Optional[ArrayLike],
        recvbuf: ArrayLike,
        *,
        dtype: Optional[DTypeLike] = None,
        stream: StreamLike = None,
    ) -> None:
        """``recvbuf[r * n + i] = sendbuf of rank r [i]``, where ``recvbuf``
        holds ``size * n`` elements. ``sendbuf=None`` works in place: this
        rank's slice of ``recvbuf`` (at ``rank * n``) is its input, as is a
        ``sendbuf`` that is that slice."""
        h = self._handle()
        send, recv, n, t = self._all_gather_args("all_gather", sendbuf, recvbuf, dtype)
        call("mscclppAllGather", send, recv, n, t, h, _stream_handle(stream))

    def _all_gather_args(self, fn: str, sendbuf: Any, recvbuf: Any, dtype: Optional[DTypeLike]) -> _CallArgs:
        if sendbuf is None:
            t, (recv,), (total,) = self._args([(recvbuf, "recvbuf", True)], dtype)
            if total % self._size:
                raise ValueError(f"{fn}: recvbuf has {total} elements, not a multiple of size {self._size}")
            n = total // self._size
            return recv.ptr + self._rank * n * t.itemsize, recv.ptr, n, t
        t, (send, recv), (n, total) = self._args([(sendbuf, "sendbuf", False), (recvbuf, "recvbuf", True)], dtype)
        if total != n * self._size:
            raise self._size_error(fn, recv, total, n * self._size, f"size {self._size} x sendbuf's")
        return send.ptr, recv.ptr, n, t

    def reduce_scatter(
        self,
        sendbuf: ArrayLike,
        recvbuf: Optional[ArrayLike],
        op: OpLike = ReduceOp.SUM,
        *,
        dtype: Optional[DTypeLike] = None,
        stream: StreamLike = None,
    ) -> None:
        """``recvbuf[i] = op over ranks of sendbuf[rank * n + i]``, where
        ``sendbuf`` holds ``size * n`` elements. ``recvbuf=None`` works in
        place: the result is written to this rank's slice of ``sendbuf`` (at
        ``rank * n``), as it is when ``recvbuf`` is that slice."""
        h = self._handle()
        rop = to_reduce_op(op)
        send, recv, n, t = self._reduce_scatter_args("reduce_scatter", sendbuf, recvbuf, dtype)
        call("mscclppReduceScatter", send, recv, n, t, rop, h, _stream_handle(stream))

    def _reduce_scatter_args(self, fn: str, sendbuf: Any, recvbuf: Any, dtype: Optional[DTypeLike]) -> _CallArgs:
        if recvbuf is None:
            t, (send,), (total,) = self._args([(sendbuf, "sendbuf", True)], dtype)
            if total % self._size:
                raise ValueError(f"{fn}: sendbuf has {total} elements, not a multiple of size {self._size}")
            n = total // self._size
            return send.ptr, send.ptr + self._rank * n * t.itemsize, n, t
        t, (send, recv), (total, n) = self._args([(sendbuf, "sendbuf", False), (recvbuf, "recvbuf", True)], dtype)
        if total != n * self._size:
            raise self._size_error(fn, send, total, n * self._size, f"size {self._size} x recvbuf's")
        return send.ptr, recv.ptr, n, t

    def broadcast(
        self,
        sendbuf: Optional[ArrayLike],
        recvbuf: Optional[ArrayLike] = None,
        root: int = 0,
        *,
        dtype: Optional[DTypeLike] = None,
        stream: StreamLike = None,
    ) -> None:
        """``recvbuf = root's sendbuf`` on every rank. In place:
        ``broadcast(buf, root=r)`` everywhere. ``sendbuf`` is read on the
        root only and may be None elsewhere."""
        h = self._handle()
        root = _int_arg("root", root, 0, self._size - 1)
        is_root = root == self._rank
        if recvbuf is None:
            if sendbuf is None:
                raise TypeError("broadcast: give sendbuf, recvbuf or both")
            t, (a,), (n,) = self._args([(sendbuf, "sendbuf", not is_root)], dtype)
            send_ptr, recv_ptr = a.ptr, a.ptr
        elif sendbuf is None:
            if is_root:
                raise TypeError(f"broadcast: sendbuf is required on the root (rank {root})")
            t, (recv,), (n,) = self._args([(recvbuf, "recvbuf", True)], dtype)
            send_ptr, recv_ptr = None, recv.ptr
        else:
            t, (send, recv), (m, n) = self._args([(sendbuf, "sendbuf", False), (recvbuf, "recvbuf", True)], dtype)
            if m != n:
                raise self._size_error("broadcast", recv, n, m, "sendbuf's size")
            send_ptr, recv_ptr = send.ptr, recv.ptr
        call("mscclppBroadcast", send_ptr, recv_ptr, n, t, root, h, _stream_handle(stream))

    def reduce(
        self,
        sendbuf: ArrayLike,
        recvbuf: Optional[ArrayLike] = None,
        op: OpLike = ReduceOp.SUM,
        root: int = 0,
        *,
        dtype: Optional[DTypeLike] = None,
        stream: StreamLike = None,
    ) -> None:
        """The root's ``recvbuf[i] = op over ranks of sendbuf[i]``.
        ``recvbuf`` is written on the root only; ``None`` there works in
        place on ``sendbuf``, and is fine elsewhere."""
        h = self._handle()
        rop = to_reduce_op(op)
        root = _int_arg("root", root, 0, self._size - 1)
        is_root = root == self._rank
        if recvbuf is None:
            t, (send,), (n,) = self._args([(sendbuf, "sendbuf", is_root)], dtype)
            recv_ptr = send.ptr if is_root else None
        else:
            t, (send, recv), (n, m) = self._args([(sendbuf, "sendbuf", False), (recvbuf, "recvbuf", True)], dtype)
            if m != n:
                raise self._size_error("reduce", recv, m, n, "sendbuf's size")
            recv_ptr = recv.ptr
        call("mscclppReduce", send.ptr, recv_ptr, n, t, rop, root, h, _stream_handle(stream))

    def all_to_all(
        self,
        sendbuf: ArrayLike,
        recvbuf: Optional[ArrayLike] = None,
        *,
        dtype: Optional[DTypeLike] = None,
        stream: StreamLike = None,
    ) -> None:
        """``recvbuf[r * n + i] = sendbuf of rank r [rank * n + i]``: ``n``
        elements to and from each rank, both arrays ``size * n`` long.
        ``recvbuf=None`` (or the same array) works in place."""
        h = self._handle()
        send, recv, n, t = self._all_to_all_args("all_to_all", sendbuf, recvbuf, dtype)
        call("mscclppAllToAll", send, recv, n, t, h, _stream_handle(stream))

    def _all_to_all_args(self, fn: str, sendbuf: Any, recvbuf: Any, dtype: Optional[DTypeLike]) -> _CallArgs:
        if recvbuf is None:
            t, (send,), (total,) = self._args([(sendbuf, "sendbuf", True)], dtype)
            recv = send
        else:
            t, (send, recv), (total, m) = self._args([(sendbuf, "sendbuf", False), (recvbuf, "recvbuf", True)], dtype)
            if m != total:
                raise self._size_error(fn, recv, m, total, "sendbuf's size")
        if total % self._size:
            raise ValueError(f"{fn}: sendbuf has {total} elements, not a multiple of size {self._size}")
        return send.ptr, recv.ptr, total // self._size, t

    def all_to_all_v(
        self,
        sendbuf: ArrayLike,
        sendcounts: ArrayLike,
        sdispls: ArrayLike,
        recvbuf: ArrayLike,
        recvcounts: ArrayLike,
        rdispls: ArrayLike,
        *,
        dtype: Optional[DTypeLike] = None,
        stream: StreamLike = None,
    ) -> None:
        """``mscclppAllToAllv``: ``sendcounts[d]`` elements from
        ``sendbuf[sdispls[d]:]`` to each rank ``d``. The call fills
        ``recvcounts[s]`` (what rank ``s`` sent here) and ``rdispls[s]``
        (where it starts in ``recvbuf``, packed in rank order). The four
        count arrays hold ``size`` 64-bit unsigned integers (``size_t``) in
        the same memory as the buffers: on a GPU they stay there (the host
        never reads them, nothing waits), as an MoE router leaves them.
        Counts that do not fit ``recvbuf`` or ``sendbuf`` are dropped, never
        written out of bounds, and reported as the communicator's
        asynchronous error (:meth:`async_error`; on the host backend this
        call raises it). Not in place."""
        h = self._handle()
        t, (send, recv), (ns, nr) = self._args([(sendbuf, "sendbuf", False), (recvbuf, "recvbuf", True)], dtype)
        counts = []
        for obj, name, writable in (
            (sendcounts, "sendcounts", False),
            (sdispls, "sdispls", False),
            (recvcounts, "recvcounts", True),
            (rdispls, "rdispls", True),
        ):
            a = as_array(obj, name, writable)
            if a.itemsize != 8 or a.kind not in ("u", "i") or a.nbytes != 8 * self._size:
                raise TypeError(
                    f"all_to_all_v: {name} must hold {self._size} 64-bit integers (size_t), one per rank; "
                    f"it holds {a.describe()}"
                )
            if a.device != send.device:
                where = "device" if send.device else "host"
                raise TypeError(f"all_to_all_v: {name} must be in {where} memory, as sendbuf is")
            counts.append(a)
        # size_t* arguments: the arrays' addresses (device ones too) as such
        sc, sd, rc, rd = (ctypes.cast(a.ptr, ctypes.POINTER(ctypes.c_size_t)) for a in counts)
        call(
            "mscclppAllToAllv",
            send.ptr,
            ns,
            sc,
            sd,
            recv.ptr,
            nr,
            rc,
            rd,
            t,
            h,
            _stream_handle(stream),
        )

    # -- execution plans (mscclpp.Plan)

    def register_plan(self, plan: Plan) -> None:
        """``mscclppPlanRegister``: from now on this communicator's collective
        calls that ``plan`` matches (its collective, rank count, in-place or
        out-of-place form, message size range) run it instead of the built-in
        algorithm; of several matching plans the first registered runs, and
        ``MSCCLPP_ALGO`` forcing an algorithm for the collective keeps plans
        out. Every rank must register the same plans in the same order. The
        communicator keeps its own reference: ``plan`` may be closed after.
        A plan for another rank count raises :class:`InvalidArgumentError`,
        one registered already :class:`InvalidUsageError`."""
        if not isinstance(plan, Plan):
            raise TypeError(f"plan: expected an mscclpp.Plan, got {type(plan).__name__}")
        call("mscclppPlanRegister", self._handle(), plan._handle())

    def register_plan_dir(self, path: Union[str, "os.PathLike[str]"]) -> int:
        """``mscclppPlanRegisterDir``: register every ``*.json`` plan of the
        directory ``path`` in file name order, as ``MSCCLPP_CACHE_DIR`` does at
        creation: plans for another rank count are skipped, a file that does
        not load is skipped with a warning naming it. Returns how many were
        registered."""
        path = os.fspath(path)
        if not isinstance(path, str):
            raise TypeError(f"path: expected a str or os.PathLike, got {type(path).__name__}")
        n = c_int()
        call("mscclppPlanRegisterDir", self._handle(), path.encode(), byref(n))
        return n.value

    def _registered(self) -> List[Tuple[c_void_p, PlanInfo]]:
        h = self._handle()
        n = c_int()
        call("mscclppPlanRegisteredCount", h, byref(n))
        out = []
        for i in range(n.value):
            ph = c_void_p()
            call("mscclppPlanRegisteredAt", h, i, byref(ph))
            out.append((ph, plan_info_of(ph)))
        return out

    @property
    def plans(self) -> List[PlanInfo]:
        """The plans registered on this communicator, in registration order
        (``mscclppPlanRegisteredCount``/``At``): their :class:`PlanInfo`."""
        return [info for _, info in self._registered()]

    def _plan_handle(self, plan: Union[Plan, str], fn: str) -> c_void_p:
        """A plan's handle: an open Plan's own, or the registered plan of that
        name (a closed Plan, or a name)."""
        if isinstance(plan, Plan) and not plan.closed:
            return plan._handle()
        if isinstance(plan, Plan):
            name = plan.name
        elif isinstance(plan, str):
            name = plan
        else:
            raise TypeError(f"plan: expected an mscclpp.Plan or a plan's name, got {type(plan).__name__}")
        for ph, info in self._registered():
            if info.name == name:
                return ph
        raise ValueError(f"{fn}: no execution plan named {name!r} is registered on rank {self._rank}")

    def unregister_plan(self, plan: Union[Plan, str]) -> None:
        """``mscclppPlanUnregister``: ``plan`` (a Plan, or the name of a
        registered plan) no longer runs this communicator's calls; its
        resources here go."""
        call("mscclppPlanUnregister", self._handle(), self._plan_handle(plan, "unregister_plan"))

    def plan_runs(self, plan: Union[Plan, str]) -> int:
        """``mscclppPlanRunCount``: how many calls of this communicator
        ``plan`` (a Plan, or the name of a registered plan) has run, picked
        by the selection or through :meth:`execute_plan`: whether the calls
        meant for it take it. 0 for a plan it never ran; unregistering
        forgets the count."""
        runs = ctypes.c_uint64()
        call("mscclppPlanRunCount", self._handle(), self._plan_handle(plan, "plan_runs"), byref(runs))
        return runs.value

    def execute_plan(
        self,
        plan: Plan,
        sendbuf: Optional[ArrayLike],
        recvbuf: Optional[ArrayLike] = None,
        op: OpLike = ReduceOp.SUM,
        *,
        dtype: Optional[DTypeLike] = None,
        stream: StreamLike = None,
    ) -> None:
        """``mscclppPlanExecute``: run ``plan`` for one call, registered or
        not, with the arguments of the collective it implements, as that
        collective's method takes them: :meth:`all_reduce`,
        :meth:`all_gather`, :meth:`reduce_scatter` (``op`` for these two
        reductions) or :meth:`all_to_all` (``None`` for the in-place forms).
        Every rank calls it with the same plan and sizes. A call whose
        in-place form, size or rank count the plan does not take raises
        :class:`InvalidArgumentError` naming the values; a communicator with
        no executor for plans, :class:`InvalidUsageError`."""
        if not isinstance(plan, Plan):
            raise TypeError(f"plan: expected an mscclpp.Plan, got {type(plan).__name__}")
        h = self._handle()
        ph = plan._handle()
        rop = to_reduce_op(op)
        parse = {
            "allreduce": self._all_reduce_args,
            "allgather": self._all_gather_args,
            "reducescatter": self._reduce_scatter_args,
            "alltoall": self._all_to_all_args,
        }.get(plan.collective)
        if parse is None:
            raise ValueError(f"execute_plan: plan {plan.name} is a {plan.collective!r} plan, which this package "
                             "cannot call")
        send, recv, n, t = parse("execute_plan", sendbuf, recvbuf, dtype)
        call("mscclppPlanExecute", h, ph, send, recv, n, t, rop, _stream_handle(stream))

    def send(
        self, buf: ArrayLike, peer: int, *, dtype: Optional[DTypeLike] = None, stream: StreamLike = None
    ) -> None:
        """``mscclppSend`` of all of ``buf`` to ``peer`` (may be this rank).
        Outside a :class:`group` it waits for the matching :meth:`recv`;
        inside one it runs at the group's end."""
        h = self._handle()
        peer = _int_arg("peer", peer, 0, self._size - 1)
        t, (a,), (n,) = self._args([(buf, "buf", False)], dtype)
        call("mscclppSend", a.ptr, n, t, peer, h, _stream_handle(stream))
        _group_keep([a])

    def recv(
        self, buf: ArrayLike, peer: int, *, dtype: Optional[DTypeLike] = None, stream: StreamLike = None
    ) -> None:
        """``mscclppRecv`` into all of ``buf`` from ``peer``: the sender's
        array must have the same size. Grouped as :meth:`send`."""
        h = self._handle()
        peer = _int_arg("peer", peer, 0, self._size - 1)
        t, (a,), (n,) = self._args([(buf, "buf", True)], dtype)
        call("mscclppRecv", a.ptr, n, t, peer, h, _stream_handle(stream))
        _group_keep([a])


def coll_algo_names(collective: str) -> List[str]:
    """``mscclppCollAlgoNames``: the algorithms of ``collective``
    ("allreduce", "allgather", "reducescatter", "broadcast", "reduce",
    "alltoall", "sendrecv", "alltoallv"), for ``MSCCLPP_ALGO``."""
    raw = _lib.lib().mscclppCollAlgoNames(collective.encode())
    if raw is None:
        raise ValueError(f"{collective!r} is not a collective (allreduce, allgather, reducescatter, broadcast, "
                         "reduce, alltoall, sendrecv, alltoallv)")
    return [n for n in raw.decode().split(",") if n]


__all__ = ["Communicator", "UniqueId", "group", "coll_algo_names", "DataType", "ReduceOp"]
