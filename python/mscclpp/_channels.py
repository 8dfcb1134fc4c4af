# SPDX-License-Identifier: MIT
"""Memory, connections and channels: what a kernel of your own needs.

    mem = comm.register_memory(buf)                 # any array, or comm.alloc(...)
    conn = comm.connect(peer, tag=0)
    ch = mscclpp.MemoryChannel(comm, conn, mem, tag=1)     # both ranks
    handle = ch.device_handle()                     # bytes: copy to the GPU
    # a kernel compiled at run time includes <mscclpp/memory_channel_device.h>
    # (mscclpp.include_dir()) and reads the handle from device memory.

Handles are the C structs (``mscclppMemoryChannelDeviceHandle``,
``mscclppPortChannelDeviceHandle``) as bytes, their size as this library
was built. Objects own their C handle: ``close()``/``destroy()`` frees it
(also as context managers); a closed object refuses every call.
"""

from __future__ import annotations

import ctypes
import enum
from ctypes import byref, c_int, c_size_t, c_void_p
from typing import TYPE_CHECKING, Any, Dict, Optional

from ._buffer import as_array
from ._errors import InvalidUsageError, Status
from ._lib import call, lib

if TYPE_CHECKING:
    from ._comm import Communicator


class MemKind(enum.IntEnum):
    """``mscclppMemKind_t``: where :meth:`Communicator.alloc` allocates."""

    HOST = 1
    HOST_SHARED = 2  # host memory other processes of the host map (the host backend's channels)
    HOST_PINNED = 3  # page-locked host memory the GPU maps
    DEVICE = 4  # cudaMalloc
    DEVICE_CUMEM = 5  # cuMemCreate + cuMemMap


class Transport(enum.IntFlag):
    """``mscclppTransport_t`` bits; AUTO lets the library choose."""

    AUTO = 0
    CUDA_IPC = 1
    HOST_SHM = 2
    NET = 4


class PortSemaphoreMem(enum.IntEnum):
    """``mscclppPortSemaphoreMem``: where a port channel's inbound semaphore lives."""

    AUTO = 0
    DEVICE = 1
    HOST_PINNED = 2


class Allocation:
    """Memory from :meth:`Communicator.alloc`: ``ptr``, ``nbytes``, ``kind``.
    Device kinds expose ``__cuda_array_interface__`` (bytes), host kinds the
    buffer protocol through :meth:`view`. :meth:`free` returns it."""

    def __init__(self, comm: "Communicator", kind: MemKind, ptr: int, nbytes: int) -> None:
        self._comm = comm
        self.kind = kind
        self._ptr: Optional[int] = ptr
        self.nbytes = nbytes

    @property
    def ptr(self) -> int:
        if self._ptr is None:
            raise InvalidUsageError(Status.INVALID_USAGE, "the allocation was freed")
        return self._ptr

    @property
    def is_device(self) -> bool:
        return self.kind in (MemKind.DEVICE, MemKind.DEVICE_CUMEM)

    @property
    def __cuda_array_interface__(self) -> Dict[str, Any]:
        if not self.is_device:
            raise AttributeError("host memory has no __cuda_array_interface__: use view()")
        return {"shape": (self.nbytes,), "typestr": "|u1", "data": (self.ptr, False), "version": 3}

    def view(self) -> memoryview:
        """The bytes, for host kinds (a NumPy array: ``numpy.frombuffer(a.view(), dtype)``)."""
        if self.is_device:
            raise InvalidUsageError(Status.INVALID_USAGE, "device memory cannot be viewed from the host")
        return memoryview((ctypes.c_char * self.nbytes).from_address(self.ptr)).cast("B")

    def free(self) -> None:
        if self._ptr is not None:
            ptr, self._ptr = self._ptr, None
            call("mscclppMemFree", self._comm._handle(), ptr)

    def __repr__(self) -> str:
        state = "freed" if self._ptr is None else f"{self.nbytes} bytes at {self._ptr:#x}"
        return f"<mscclpp.Allocation {self.kind.name} {state}>"


class RegisteredMemory:
    """A registration of this rank's memory (:meth:`Communicator.register_memory`)
    or a peer's memory opened here (:meth:`Communicator.recv_memory`)."""

    def __init__(self, handle: c_void_p, opened: bool, keep: Any = None) -> None:
        self._h: Optional[c_void_p] = handle
        self.opened = opened
        self._keep = keep  # the array whose memory this is (kept alive)

    def _handle(self) -> c_void_p:
        if self._h is None:
            raise InvalidUsageError(Status.INVALID_USAGE, "the registered memory was closed")
        return self._h

    def _query(self, fn: str, ctype: Any) -> Any:
        out = ctype()
        call(fn, self._handle(), byref(out))
        return out.value

    @property
    def ptr(self) -> int:
        """The first byte as this process addresses it."""
        return int(self._query("mscclppMemoryPtr", c_void_p) or 0)

    @property
    def device_ptr(self) -> int:
        """The address kernels of this process use."""
        return int(self._query("mscclppMemoryDevicePtr", c_void_p) or 0)

    @property
    def size(self) -> int:
        return int(self._query("mscclppMemorySize", c_size_t))

    @property
    def rank(self) -> int:
        """The rank that registered it."""
        return int(self._query("mscclppMemoryRank", c_int))

    def send(self, comm: "Communicator", peer: int, tag: int = 0) -> None:
        """``mscclppMemorySend``: the record to ``peer``, who opens it with
        :meth:`Communicator.recv_memory` (same tag)."""
        call("mscclppMemorySend", comm._handle(), self._handle(), peer, tag)

    def close(self) -> None:
        """Deregister (this rank's memory) or unmap (a peer's). Idempotent."""
        if self._h is not None:
            h, self._h = self._h, None
            call("mscclppMemoryClose" if self.opened else "mscclppMemoryDeregister", h)

    def __enter__(self) -> "RegisteredMemory":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        if self._h is None:
            return "<mscclpp.RegisteredMemory closed>"
        return f"<mscclpp.RegisteredMemory {'opened' if self.opened else 'registered'} {self.size} bytes>"


class Connection:
    """``mscclppConnection_t`` to one peer (:meth:`Communicator.connect`)."""

    def __init__(self, handle: c_void_p) -> None:
        self._h: Optional[c_void_p] = handle

    def _handle(self) -> c_void_p:
        if self._h is None:
            raise InvalidUsageError(Status.INVALID_USAGE, "the connection was destroyed")
        return self._h

    @property
    def transport(self) -> Transport:
        out = c_int()
        call("mscclppConnectionTransport", self._handle(), byref(out))
        return Transport(out.value)

    @property
    def remote_rank(self) -> int:
        out = c_int()
        call("mscclppConnectionRemoteRank", self._handle(), byref(out))
        return out.value

    def write(self, dst: RegisteredMemory, dst_offset: int, src: RegisteredMemory, src_offset: int,
              nbytes: int) -> None:
        """``mscclppConnectionWrite``: copy from this rank's ``src`` to the
        peer's ``dst`` (opened here); complete after :meth:`flush`."""
        call("mscclppConnectionWrite", self._handle(), dst._handle(), dst_offset, src._handle(), src_offset, nbytes)

    def flush(self) -> None:
        call("mscclppConnectionFlush", self._handle())

    def destroy(self) -> None:
        if self._h is not None:
            h, self._h = self._h, None
            call("mscclppConnectionDestroy", h)

    def __enter__(self) -> "Connection":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.destroy()


class _ChannelConfig(ctypes.Structure):
    """``mscclppMemoryChannelConfig`` / ``mscclppPortChannelConfig`` (the
    port one has the extra field; its structSize says which)."""

    _fields_ = [("structSize", c_size_t), ("tag", c_int), ("local", c_void_p), ("semaphoreMem", c_int)]


class _MemoryChannelConfig(ctypes.Structure):
    _fields_ = [("structSize", c_size_t), ("tag", c_int), ("local", c_void_p)]


class _Channel:
    _create = ""
    _destroy = ""
    _get = ""
    _size_fn = ""

    def __init__(self) -> None:
        self._h: Optional[c_void_p] = None
        self._refs: Any = None

    def _handle(self) -> c_void_p:
        if self._h is None:
            raise InvalidUsageError(Status.INVALID_USAGE, f"the {type(self).__name__} was destroyed")
        return self._h

    def device_handle(self) -> bytes:
        """The handle kernels use, as bytes (the C struct)."""
        n = int(getattr(lib(), self._size_fn)())
        buf = ctypes.create_string_buffer(n)
        call(self._get, self._handle(), buf)
        return buf.raw

    def destroy(self) -> None:
        if self._h is not None:
            h, self._h = self._h, None
            call(self._destroy, h)

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.destroy()


class MemoryChannel(_Channel):
    """``mscclppMemoryChannelCreate``: kernels load and store the peer's
    memory directly. Both ranks create it with the same ``tag`` (collective
    between the pair, bounded by MSCCLPP_TIMEOUT)."""

    _destroy = "mscclppMemoryChannelDestroy"
    _get = "mscclppMemoryChannelGetDeviceHandle"
    _size_fn = "mscclppMemoryChannelDeviceHandleSize"

    def __init__(self, comm: "Communicator", conn: Connection, local: RegisteredMemory, tag: int = 0) -> None:
        super().__init__()
        cfg = _MemoryChannelConfig(ctypes.sizeof(_MemoryChannelConfig), tag, local._handle())
        h = c_void_p()
        call("mscclppMemoryChannelCreate", comm._handle(), conn._handle(), byref(cfg), byref(h))
        self._h = h
        self._refs = (conn, local)


class PortChannel(_Channel):
    """``mscclppPortChannelCreate``: kernels push puts and signals into a
    FIFO that the communicator's proxy thread carries out (DMA or RDMA)."""

    _destroy = "mscclppPortChannelDestroy"
    _get = "mscclppPortChannelGetDeviceHandle"
    _size_fn = "mscclppPortChannelDeviceHandleSize"

    def __init__(self, comm: "Communicator", conn: Connection, local: RegisteredMemory, tag: int = 0,
                 semaphore: PortSemaphoreMem = PortSemaphoreMem.AUTO) -> None:
        super().__init__()
        cfg = _ChannelConfig(ctypes.sizeof(_ChannelConfig), tag, local._handle(), int(semaphore))
        h = c_void_p()
        call("mscclppPortChannelCreate", comm._handle(), conn._handle(), byref(cfg), byref(h))
        self._h = h
        self._refs = (conn, local)


def register_memory(comm: "Communicator", buf: Any, transports: Transport = Transport.AUTO) -> RegisteredMemory:
    if isinstance(buf, Allocation):
        ptr, nbytes = buf.ptr, buf.nbytes
    else:
        arr = as_array(buf, "buf", False)
        ptr, nbytes = arr.ptr, arr.nbytes
    if nbytes == 0:
        raise ValueError("register_memory: buf is empty")
    h = c_void_p()
    call("mscclppMemoryRegister", comm._handle(), ptr, nbytes, int(transports), byref(h))
    return RegisteredMemory(h, opened=False, keep=buf)


def recv_memory(comm: "Communicator", peer: int, tag: int = 0) -> RegisteredMemory:
    h = c_void_p()
    call("mscclppMemoryRecv", comm._handle(), peer, tag, byref(h))
    return RegisteredMemory(h, opened=True)


def connect(comm: "Communicator", peer: int, tag: int = 0, transport: Transport = Transport.AUTO) -> Connection:
    h = c_void_p()
    call("mscclppConnectionCreate", comm._handle(), peer, tag, int(transport), byref(h))
    return Connection(h)


def alloc(comm: "Communicator", kind: MemKind, nbytes: int) -> Allocation:
    if nbytes <= 0:
        raise ValueError(f"alloc: nbytes is {nbytes}")
    p = c_void_p()
    call("mscclppMemAlloc", comm._handle(), int(MemKind(kind)), nbytes, byref(p))
    return Allocation(comm, MemKind(kind), int(p.value or 0), nbytes)
