# SPDX-License-Identifier: MIT
"""A ``torch.distributed`` backend over mscclpp, in Python.

    import torch, torch.distributed as dist
    import mscclpp.torch                      # registers the backend "mscclpp"
    torch.cuda.set_device(local_rank)
    dist.init_process_group("mscclpp")        # or "cuda:mscclpp,cpu:gloo"
    dist.all_reduce(x)                        # x: a CUDA tensor

Each process group (the default one and every ``new_group``) gets its own
mscclpp communicator, rendezvoused through the group's store (rank 0 puts a
unique id there): no second launcher, no ``LD_PRELOAD``. Every call is
enqueued on the tensor's device's current stream and returns without waiting
for the GPU or for the other ranks, as NCCL's calls do; ``Work.wait()``
therefore waits for nothing, except after ``barrier`` (which, as NCCL's,
blocks the host until the GPU is done). Calls can be captured in CUDA graphs.

Point-to-point: ``isend``/``irecv`` (and ``batch_isend_irecv``, which a
Python process group receives as separate calls) are queued and run as one
mscclpp group when any of their ``Work`` objects is waited on, or when the
next collective is called, so that pairs that send to each other first do
not wait on each other's stream. Blocking ``send``/``recv`` run at once.

Compared with the NCCL shim (``LD_PRELOAD=libmscclpp_nccl.so``): this
backend needs no preload and leaves PyTorch's own NCCL in place for other
groups, but each call pays Python's cost (a few microseconds); the shim is
the faster path for small messages in eager mode, and the one to use for
programs that call NCCL directly.

CPU tensors are not served: combine with gloo (``"cuda:mscclpp,cpu:gloo"``).
Not supported (an error that says so): ``recv`` from any source and
``PREMUL_SUM``. Do not pass ``device_id`` to ``init_process_group``: torch
then asks the group for a C++ backend object, which a Python group has not
(the communicator is made at once anyway).
"""

from __future__ import annotations

import datetime
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch
import torch.distributed as dist

from . import _lib
from ._comm import Communicator, UniqueId
from ._errors import InvalidUsageError, Status
from ._types import DataType, ReduceOp

BACKEND_NAME = "mscclpp"

_DTYPES: Dict[Any, DataType] = {
    torch.int8: DataType.INT8,
    torch.uint8: DataType.UINT8,
    torch.int32: DataType.INT32,
    torch.int64: DataType.INT64,
    torch.float16: DataType.FLOAT16,
    torch.float32: DataType.FLOAT32,
    torch.float64: DataType.FLOAT64,
    torch.bfloat16: DataType.BFLOAT16,
    torch.bool: DataType.UINT8,
}
for _name, _t in (("uint32", DataType.UINT32), ("uint64", DataType.UINT64),
                  ("float8_e4m3fn", DataType.FLOAT8_E4M3), ("float8_e5m2", DataType.FLOAT8_E5M2)):
    if hasattr(torch, _name):
        _DTYPES[getattr(torch, _name)] = _t

_OPS: List[Tuple[Any, ReduceOp]] = [
    (dist.ReduceOp.SUM, ReduceOp.SUM),
    (dist.ReduceOp.PRODUCT, ReduceOp.PROD),
    (dist.ReduceOp.MAX, ReduceOp.MAX),
    (dist.ReduceOp.MIN, ReduceOp.MIN),
    (dist.ReduceOp.AVG, ReduceOp.AVG),
]


def _op(op: Any, fn: str) -> ReduceOp:
    for theirs, ours in _OPS:
        if op == theirs:
            return ours
    raise ValueError(f"mscclpp backend: {fn}: reduction {op} is not supported (SUM, PRODUCT, MAX, MIN, AVG)")


def _desc(t: Any, fn: str, what: str) -> Tuple[int, int, DataType]:
    """(address, element count, element type) of a contiguous CUDA tensor."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"mscclpp backend: {fn}: {what} is a {type(t).__name__}, not a tensor")
    if not t.is_cuda:
        raise ValueError(f"mscclpp backend: {fn}: {what} is on {t.device}; this backend serves CUDA tensors "
                         "(use \"cuda:mscclpp,cpu:gloo\" for CPU tensors)")
    if not t.is_contiguous():
        raise ValueError(f"mscclpp backend: {fn}: {what} is not contiguous: pass .contiguous()")
    dt = _DTYPES.get(t.dtype)
    if dt is None:
        raise TypeError(f"mscclpp backend: {fn}: {what} has dtype {t.dtype}, which mscclpp does not carry")
    return t.data_ptr(), t.numel(), dt


def _stream(t: Any) -> int:
    return int(torch.cuda.current_stream(t.device).cuda_stream)


class _Work(dist.Work):
    """A call already enqueued on the stream (see the module's text)."""

    def __init__(self, pg: "ProcessGroupMscclpp", result: Any, sync: Any = None) -> None:
        super().__init__()
        self._pg = pg
        self._result = result
        self._sync = sync  # a stream the host waits for (barrier)

    def wait(self, timeout: Optional[datetime.timedelta] = None) -> bool:
        self._pg._flush()
        if self._sync is not None:
            self._sync.synchronize()
        return True

    def is_completed(self) -> bool:
        self._pg._flush()
        return True

    def is_success(self) -> bool:
        return True

    def exception(self) -> Any:
        return None

    def result(self) -> Any:
        return self._result

    def get_future(self) -> Any:
        self._pg._flush()
        fut: Any = torch.futures.Future()
        fut.set_result(self._result)
        return fut


class ProcessGroupMscclpp(dist.ProcessGroup):
    """One mscclpp communicator serving a ``torch.distributed`` group."""

    def __init__(self, store: Any, rank: int, size: int, timeout: Any = None) -> None:
        super().__init__(rank, size)
        self._rank = rank
        self._size = size
        self._comm: Optional[Communicator] = Communicator.from_store(store, rank, size)
        self._pending: List[Tuple[str, Any, int]] = []  # queued ("send"|"recv", tensor, peer)
        self._mscclpp_group_name: Optional[str] = None

    # -- plumbing

    def getBackendName(self) -> str:
        return BACKEND_NAME

    @property
    def group_name(self) -> str:
        # torch uses a ProcessGroup subclass as the group itself and, in
        # some versions (2.11), never names it: destroy_process_group then
        # fails reading the name. torch's own table has it.
        try:
            return str(super().group_name)
        except RuntimeError:
            # the creator's name (destroy_process_group drops torch's own
            # table entry before it reads the name), else torch's table
            name = getattr(self, "_mscclpp_group_name", None)
            if name is None:
                name = getattr(dist.distributed_c10d, "_world").pg_names.get(self)
            if name is None:
                raise
            return str(name)

    @property
    def communicator(self) -> Communicator:
        """The mscclpp communicator (for registering memory, channels, ...)."""
        if self._comm is None:
            raise InvalidUsageError(Status.INVALID_USAGE, "the mscclpp process group was shut down")
        return self._comm

    def _h(self) -> Any:
        return self.communicator._handle()

    def _flush(self) -> None:
        """Run the queued point-to-point calls as one group."""
        if not self._pending:
            return
        ops, self._pending = self._pending, []
        h = self._h()
        _lib.call("mscclppGroupStart")
        try:
            for kind, t, peer in ops:
                p, n, dt = _desc(t, kind, "tensor")
                fn = "mscclppSend" if kind == "send" else "mscclppRecv"
                _lib.call(fn, p, n, dt, peer, h, _stream(t))
        finally:
            _lib.call("mscclppGroupEnd")

    def _done(self, result: Any) -> _Work:
        return _Work(self, result)

    # -- collectives

    def allreduce(self, tensors: List[Any], opts: Any = None) -> _Work:
        self._flush()
        # opts: AllreduceOptions, or a bare ReduceOp (the binding's other form)
        op = _op(getattr(opts, "reduceOp", opts) if opts is not None else dist.ReduceOp.SUM, "all_reduce")
        for t in tensors:
            p, n, dt = _desc(t, "all_reduce", "tensor")
            _lib.call("mscclppAllReduce", p, p, n, dt, op, self._h(), _stream(t))
        return self._done(tensors)

    def allreduce_coalesced(self, tensors: List[Any], opts: Any = None) -> _Work:
        return self.allreduce(tensors, opts)

    def _allgather_base(self, output: Any, input: Any, opts: Any = None) -> _Work:
        self._flush()
        po, no, dto = _desc(output, "all_gather_into_tensor", "output")
        pi, ni, dti = _desc(input, "all_gather_into_tensor", "input")
        if dto != dti or no != ni * self._size:
            raise ValueError(f"mscclpp backend: all_gather_into_tensor: output has {no} {dto.name} elements, "
                             f"needs {self._size} x input's {ni} {dti.name}")
        _lib.call("mscclppAllGather", pi, po, ni, dti, self._h(), _stream(input))
        return self._done([output])

    def allgather_into_tensor_coalesced(self, outputs: List[Any], inputs: List[Any], opts: Any = None) -> _Work:
        for o, i in zip(outputs, inputs):
            self._allgather_base(o, i, opts)
        return self._done(outputs)

    def allgather(self, output_lists: List[List[Any]], inputs: List[Any], opts: Any = None) -> _Work:
        for outs, inp in zip(output_lists, inputs):
            if len(outs) != self._size:
                raise ValueError(f"mscclpp backend: all_gather: {len(outs)} output tensors for {self._size} ranks")
            flat = torch.empty((self._size,) + tuple(inp.shape), dtype=inp.dtype, device=inp.device)
            self._allgather_base(flat, inp.contiguous(), opts)
            for r, o in enumerate(outs):
                o.copy_(flat[r])
        return self._done(output_lists)

    def _reduce_scatter_base(self, output: Any, input: Any, opts: Any = None) -> _Work:
        self._flush()
        op = _op(opts.reduceOp if opts is not None else dist.ReduceOp.SUM, "reduce_scatter_tensor")
        po, no, dto = _desc(output, "reduce_scatter_tensor", "output")
        pi, ni, dti = _desc(input, "reduce_scatter_tensor", "input")
        if dto != dti or ni != no * self._size:
            raise ValueError(f"mscclpp backend: reduce_scatter_tensor: input has {ni} {dti.name} elements, "
                             f"needs {self._size} x output's {no} {dto.name}")
        _lib.call("mscclppReduceScatter", pi, po, no, dto, op, self._h(), _stream(output))
        return self._done([output])

    def reduce_scatter_tensor_coalesced(self, outputs: List[Any], inputs: List[Any], opts: Any = None) -> _Work:
        for o, i in zip(outputs, inputs):
            self._reduce_scatter_base(o, i, opts)
        return self._done(outputs)

    def reduce_scatter(self, outputs: List[Any], input_lists: List[List[Any]], opts: Any = None) -> _Work:
        for out, ins in zip(outputs, input_lists):
            if len(ins) != self._size:
                raise ValueError(f"mscclpp backend: reduce_scatter: {len(ins)} input tensors for {self._size} ranks")
            flat = torch.stack([i.reshape(out.shape) for i in ins])
            self._reduce_scatter_base(out, flat, opts)
        return self._done(outputs)

    def broadcast(self, tensors: List[Any], opts: Any = None) -> _Work:
        self._flush()
        root = int(opts.rootRank) if opts is not None else 0
        for t in tensors:
            p, n, dt = _desc(t, "broadcast", "tensor")
            _lib.call("mscclppBroadcast", p, p, n, dt, root, self._h(), _stream(t))
        return self._done(tensors)

    def reduce(self, tensors: List[Any], opts: Any = None) -> _Work:
        self._flush()
        root = int(opts.rootRank) if opts is not None else 0
        op = _op(opts.reduceOp if opts is not None else dist.ReduceOp.SUM, "reduce")
        for t in tensors:
            p, n, dt = _desc(t, "reduce", "tensor")
            _lib.call("mscclppReduce", p, p, n, dt, op, root, self._h(), _stream(t))
        return self._done(tensors)

    def _exchange(self, fn: str, sends: Sequence[Tuple[Any, int]], recvs: Sequence[Tuple[Any, int]]) -> None:
        """One group of sends and receives (tensor, peer), empty ones left out."""
        self._flush()
        h = self._h()
        _lib.call("mscclppGroupStart")
        try:
            for kind, items in (("mscclppSend", sends), ("mscclppRecv", recvs)):
                for t, peer in items:
                    if t.numel() == 0:
                        continue
                    p, n, dt = _desc(t, fn, "a slice")
                    _lib.call(kind, p, n, dt, peer, h, _stream(t))
        finally:
            _lib.call("mscclppGroupEnd")

    def alltoall_base(self, output: Any, input: Any, output_splits: List[int], input_splits: List[int],
                      opts: Any = None) -> _Work:
        _desc(output, "all_to_all_single", "output")
        _desc(input, "all_to_all_single", "input")
        if not output_splits and not input_splits:
            self._flush()
            if input.numel() % self._size or output.numel() != input.numel():
                raise ValueError(f"mscclpp backend: all_to_all_single: {input.numel()} input and "
                                 f"{output.numel()} output elements for {self._size} ranks")
            pi, ni, dt = _desc(input, "all_to_all_single", "input")
            po, _, _ = _desc(output, "all_to_all_single", "output")
            _lib.call("mscclppAllToAll", pi, po, ni // self._size, dt, self._h(), _stream(output))
            return self._done([output])
        outs = list(output.split(output_splits or [output.shape[0] // self._size] * self._size))
        ins = list(input.split(input_splits or [input.shape[0] // self._size] * self._size))
        self._exchange("all_to_all_single", [(t, r) for r, t in enumerate(ins)],
                       [(t, r) for r, t in enumerate(outs)])
        return self._done([output])

    def alltoall(self, outputs: List[Any], inputs: List[Any], opts: Any = None) -> _Work:
        if len(outputs) != self._size or len(inputs) != self._size:
            raise ValueError(f"mscclpp backend: all_to_all: {len(inputs)} inputs and {len(outputs)} outputs "
                             f"for {self._size} ranks")
        self._exchange("all_to_all", [(t, r) for r, t in enumerate(inputs)],
                       [(t, r) for r, t in enumerate(outputs)])
        return self._done(outputs)

    def barrier(self, opts: Any = None) -> _Work:
        self._flush()
        dev = torch.device("cuda", torch.cuda.current_device())
        t = torch.zeros(1, dtype=torch.int32, device=dev)
        p, n, dt = _desc(t, "barrier", "tensor")
        _lib.call("mscclppAllReduce", p, p, n, dt, ReduceOp.SUM, self._h(), _stream(t))
        return _Work(self, None, sync=torch.cuda.current_stream(dev))

    # -- point to point

    def send(self, tensors: List[Any], dst: int, tag: int = 0) -> _Work:
        for t in tensors:
            _desc(t, "send", "tensor")
            self._pending.append(("send", t, int(dst)))
        return self._done(tensors)

    def recv(self, tensors: List[Any], src: int, tag: int = 0) -> _Work:
        for t in tensors:
            _desc(t, "recv", "tensor")
            self._pending.append(("recv", t, int(src)))
        return self._done(tensors)

    def recv_anysource(self, tensors: List[Any], tag: int = 0) -> _Work:
        raise RuntimeError("mscclpp backend: recv from any source is not supported: name the source rank")

    def gather(self, outputs: List[List[Any]], inputs: List[Any], opts: Any = None) -> _Work:
        root = int(opts.rootRank) if opts is not None else 0
        outs = outputs[0] if self._rank == root else []
        if self._rank == root and len(outs) != self._size:
            raise ValueError(f"mscclpp backend: gather: {len(outs)} output tensors for {self._size} ranks")
        self._exchange("gather", [(inputs[0], root)], [(t, r) for r, t in enumerate(outs)])
        return self._done(outputs)

    def scatter(self, outputs: List[Any], inputs: List[List[Any]], opts: Any = None) -> _Work:
        root = int(opts.rootRank) if opts is not None else 0
        ins = inputs[0] if self._rank == root else []
        if self._rank == root and len(ins) != self._size:
            raise ValueError(f"mscclpp backend: scatter: {len(ins)} input tensors for {self._size} ranks")
        self._exchange("scatter", [(t, r) for r, t in enumerate(ins)], [(outputs[0], root)])
        return self._done(outputs)

    # torch.distributed's _coalescing_manager: the calls inside it reach this
    # group as one allreduce_coalesced (or its allgather/reduce-scatter
    # forms), which run back to back on the stream; nothing to open or close.
    def _start_coalescing(self, device: Any) -> None:
        self._flush()

    def _end_coalescing(self, device: Any) -> _Work:
        self._flush()
        return self._done(None)

    # torch renames the methods a Python group overrides (2.10 onward:
    # all_gather_single for _allgather_base, ...; its C++ side then looks
    # only for the new names, with fallbacks for some): answer to both.
    all_gather_single = _allgather_base
    all_gather_single_coalesced = allgather_into_tensor_coalesced
    reduce_scatter_single = _reduce_scatter_base
    reduce_scatter_single_coalesced = reduce_scatter_tensor_coalesced
    all_to_all_single = alltoall_base
    start_coalescing = _start_coalescing
    end_coalescing = _end_coalescing

    # -- life

    def shutdown(self) -> None:
        """Destroy the communicator (collective: every rank of the group)."""
        comm, self._comm = self._comm, None
        if comm is not None:
            self._pending = []
            comm.destroy()

    def abort(self) -> None:
        """Abort the communicator's work and free it (no waiting for peers)."""
        comm, self._comm = self._comm, None
        if comm is not None:
            self._pending = []
            comm.abort("torch.distributed abort")
            comm.destroy()


def _create(opts: Any, backend_options: Any = None) -> ProcessGroupMscclpp:
    # The extended creator form: it brings the group's name. torch uses a
    # ProcessGroup subclass as the group itself, and some of its versions
    # then leave the name unset (destroy_process_group fails on it).
    pg = ProcessGroupMscclpp(opts.store, opts.group_rank, opts.group_size, opts.timeout)
    name = getattr(opts, "group_id", None)
    if name:
        pg._mscclpp_group_name = str(name)
        if hasattr(pg, "_set_group_name"):
            pg._set_group_name(name)
    return pg


def communicator(group: Any = None) -> Communicator:
    """A new mscclpp communicator of the ranks of a ``torch.distributed``
    group (default: the world) of any backend, rendezvoused through that
    group (collective over it). For a group of this backend, its own
    communicator is ``group.communicator``."""
    rank = dist.get_rank(group)
    size = dist.get_world_size(group)
    box: List[Any] = [bytes(UniqueId.create()) if rank == 0 else None]
    src = dist.get_global_rank(group, 0) if group is not None else 0
    dist.broadcast_object_list(box, src=src, group=group)
    return Communicator(size, rank, box[0])


def _register() -> None:
    if BACKEND_NAME.upper() not in getattr(dist.Backend, "_plugins", {}):
        dist.Backend.register_backend(BACKEND_NAME, _create, extended_api=True, devices=["cuda"])


_register()

__all__ = ["ProcessGroupMscclpp", "communicator", "BACKEND_NAME"]
