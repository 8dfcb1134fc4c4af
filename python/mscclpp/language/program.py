# SPDX-License-Identifier: MIT
"""A program: one collective algorithm for a fixed number of ranks, written
inside ``with CollectiveProgram(...):`` and emitted as an execution plan
(``to_json()`` / ``JSON()``), in MSCCL++'s format."""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, Tuple

from . import _passes
from ._context import set_program
from ._layout import Gpu
from ._ops import Op, PipelineOp
from .channel import MemoryChannel, PortChannel, SwitchChannel
from .collectives import AllGather, AllReduce, AllToAll, Collective, ReduceScatter, SendRecv, TestCollective
from .rank import BaseBuffer, Semaphore
from .types import BufferType, ChannelType, Chunk, DSLError, ReduceOperationType, ReplicationPolicy, SyncType
from .utils import AlgoSpec

MAX_MESSAGE_SIZE = 2**64 - 1


def _flag(value: object, what: str) -> bool:
    if not isinstance(value, bool):
        raise DSLError(f"{what} must be True or False, not {value!r}")
    return value


def _int(value: object, what: str, low: int, high: int = MAX_MESSAGE_SIZE) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise DSLError(f"{what} must be an integer in [{low}, {high}], not {value!r}")
    return value


class CollectiveProgram:
    """An algorithm for ``collective`` on ``num_ranks`` ranks.

    Arguments (as MSCCL++'s DSL, and written into the plan):
        name: the plan's name.
        collective: an AllReduce, AllGather, ReduceScatter, AllToAll, ...
            for the same number of ranks.
        num_ranks: ranks the plan is for.
        instances: copies of the algorithm side by side (each with its own
            thread blocks, channels and semaphores, on interleaved chunks).
        protocol: "Simple", or "LL" for programs that use LL packets.
        instr_fusion: fuse neighbouring operations (see _ops).
        auto_sync: put a synchronisation between two operations of a thread
            block that touch the same local chunks.
        replication_policy: how instances share the chunks (interleaved:
            chunk i of instance k is chunk i * instances + k; none: every
            instance on the same chunks).
        reuse_resources, num_threads_per_block, use_double_scratch_buffer,
        buffer_alignment, min_message_size, max_message_size: copied into
            the plan for the executor (double scratch: consecutive calls
            alternate between two halves of the scratch buffer, which LL
            programs need; message sizes: the calls the plan is meant for,
            in bytes of input, of output for allgather).
    """

    def __init__(self, name: str, collective: Collective, num_ranks: int, instances: int = 1,
                 protocol: str = "Simple", instr_fusion: bool = True, auto_sync: bool = True,
                 replication_policy: ReplicationPolicy = ReplicationPolicy.interleaved, reuse_resources: bool = False,
                 num_threads_per_block: int = 1024, use_double_scratch_buffer: bool = False,
                 buffer_alignment: int = 16, min_message_size: int = 0, max_message_size: int = MAX_MESSAGE_SIZE) -> None:
        if not isinstance(name, str) or not name:
            raise DSLError(f"a program needs a non-empty name, not {name!r}")
        if not isinstance(collective, Collective):
            raise DSLError(f"collective must be a Collective (AllReduce(...), ...), not {collective!r}")
        _int(num_ranks, "num_ranks", 1, 1 << 16)
        if collective.num_ranks != num_ranks:
            raise DSLError(f"program {name!r} is for {num_ranks} ranks but its collective "
                           f"{type(collective).__name__} is for {collective.num_ranks}")
        if protocol not in ("Simple", "LL"):
            raise DSLError(f"protocol must be 'Simple' or 'LL', not {protocol!r}")
        if not isinstance(replication_policy, ReplicationPolicy):
            raise DSLError(f"replication_policy must be a ReplicationPolicy, not {replication_policy!r}")
        self.name = name
        self.collective = collective
        self.num_ranks = num_ranks
        self.instances = _int(instances, "instances", 1, 1 << 10)
        self.protocol = protocol
        self.instr_fusion = _flag(instr_fusion, "instr_fusion")
        self.auto_sync = _flag(auto_sync, "auto_sync")
        self.replication_policy = replication_policy
        self.reuse_resources = _flag(reuse_resources, "reuse_resources")
        self.num_threads_per_block = _int(num_threads_per_block, "num_threads_per_block", 1, 1024)
        self.use_double_scratch_buffer = _flag(use_double_scratch_buffer, "use_double_scratch_buffer")
        self.buffer_alignment = _int(buffer_alignment, "buffer_alignment", 1, 1 << 20)
        self.min_message_size = _int(min_message_size, "min_message_size", 0)
        self.max_message_size = _int(max_message_size, "max_message_size", 0)
        if self.min_message_size > self.max_message_size:
            raise DSLError(f"min_message_size {min_message_size} is above max_message_size {max_message_size}")

        self.buffers: List[Dict[BufferType, BaseBuffer]] = collective.init_buffers()
        for bufs in self.buffers:
            for b in bufs.values():
                b._program = self
        self.gpus: List[Gpu] = [Gpu(r, self.buffers[r][BufferType.input].size,
                                    self.buffers[r][BufferType.output].size) for r in range(num_ranks)]
        self.loop_context: Optional[Any] = None
        # (type, src, dst) -> the ids (on src) of src's channels to dst, in order
        self._pairs: Dict[Tuple[ChannelType, int, int], List[int]] = {}
        # (type, src, channel id) -> (signals, waits) issued on that channel
        self._sync_counts: Dict[Tuple[ChannelType, int, int], List[int]] = {}
        self._barriers: List[Dict[Tuple[int, ...], int]] = [{} for _ in range(num_ranks)]
        self._plan: Optional[Dict[str, Any]] = None

    @classmethod
    def from_spec(cls, spec: AlgoSpec) -> "CollectiveProgram":
        return cls(spec.name, spec.collective, spec.world_size, instances=spec.instances, protocol=spec.protocol,
                   instr_fusion=spec.instr_fusion, auto_sync=spec.auto_sync,
                   replication_policy=spec.replication_policy, reuse_resources=spec.reuse_resources,
                   num_threads_per_block=spec.num_threads_per_block,
                   use_double_scratch_buffer=spec.use_double_scratch_buffer, buffer_alignment=spec.buffer_alignment,
                   min_message_size=spec.min_message_size, max_message_size=spec.max_message_size)

    def __enter__(self) -> "CollectiveProgram":
        set_program(self)
        return self

    def __exit__(self, *exc: object) -> None:
        self.loop_context = None
        set_program(None)

    def __repr__(self) -> str:
        return f"CollectiveProgram({self.name!r}, {self.collective.name}, {self.num_ranks} ranks)"

    # --- checks the front end (rank.py, channel.py, loop.py) shares ---

    def _open(self) -> None:
        if self._plan is not None:
            raise DSLError(f"program {self.name!r} was already written out (to_json/JSON): it cannot change")

    def check_rank(self, rank: object, what: str) -> int:
        if isinstance(rank, bool) or not isinstance(rank, int):
            raise TypeError(f"{what} must be an integer, not {rank!r}")
        if not 0 <= rank < self.num_ranks:
            raise DSLError(f"{what} {rank} is out of range: program {self.name!r} has ranks 0 to "
                           f"{self.num_ranks - 1}")
        return rank

    def check_tb(self, tb: object) -> int:
        if isinstance(tb, bool) or not isinstance(tb, int):
            raise TypeError(f"a thread block id must be an integer, not {tb!r}")
        if tb < 0:
            raise DSLError(f"thread block id {tb} is negative")
        return tb

    def buffer(self, rank: int, buffer: BufferType) -> BaseBuffer:
        return self.buffers[rank][buffer]

    def chunk_count(self, rank: int, buffer: BufferType) -> int:
        if buffer == BufferType.scratch:
            return self.gpus[rank].scratch_chunks
        return self.buffers[rank][buffer].size

    def check_chunk(self, chunk: object, what: str, rank: Optional[int] = None) -> Chunk:
        if not isinstance(chunk, Chunk):
            raise TypeError(f"{what} must be a Chunk (a slice of a buffer), not {type(chunk).__name__}")
        if chunk.program is not None and chunk.program is not self:
            raise DSLError(f"{what} {chunk.describe()} was cut from a buffer of another program")
        self.check_rank(chunk.rank, f"{what} rank")
        if rank is not None and chunk.rank != rank:
            raise DSLError(f"{what} {chunk.describe()} is on rank {chunk.rank}, but the operation needs a chunk "
                           f"of rank {rank}")
        if not isinstance(chunk.buffer, BufferType):
            raise TypeError(f"{what}: buffer must be a BufferType, not {chunk.buffer!r}")
        n = self.chunk_count(chunk.rank, chunk.buffer)
        if chunk.index < 0 or chunk.size < 1 or chunk.index + chunk.size > n:
            raise DSLError(f"{what} {chunk.describe()} is out of range: rank {chunk.rank}'s "
                           f"{chunk.buffer.name} buffer has {n} chunks")
        return chunk

    def check_scratch(self, chunk: Chunk, what: str) -> None:
        if chunk.buffer != BufferType.scratch:
            raise DSLError(f"{what} {chunk.describe()} must be in a scratch Buffer (LL packets live in scratch)")

    def require_packets(self, what: str) -> None:
        if self.protocol != "LL":
            raise DSLError(f"{what} uses LL packets: program {self.name!r} must have protocol='LL' "
                           f"(not {self.protocol!r}), which sizes its scratch for packets")
        if self.loop_context is not None:
            raise DSLError(f"{what} uses LL packets, which cannot run inside a pipeline (LoopIterationContext)")

    # --- what the front end builds ---

    def alloc_scratch(self, rank: int, size: int) -> int:
        self._open()
        gpu = self.gpus[rank]
        offset = gpu.scratch_chunks
        gpu.scratch_chunks += size
        return offset

    def add_channel(self, ctype: ChannelType, src: int, dst: int) -> int:
        self._open()
        channel_id = self.gpus[src].add_channel(ctype, dst)
        self._pairs.setdefault((ctype, src, dst), []).append(channel_id)
        return channel_id

    def channel_index(self, rank: int, tb: int, channel: Any) -> int:
        self._open()
        return self.gpus[rank].tb(tb).channel_index(channel.channel_type, channel.channel_id)

    def remote_buffer_index(self, rank: int, tb: int, chunk: Chunk, ctype: ChannelType) -> int:
        self._open()
        gpu = self.gpus[rank]
        buffer_id = gpu.remote_buffer(chunk.rank, chunk.buffer, ctype)
        return gpu.tb(tb).remote_index(ctype, buffer_id)

    def add_semaphore(self, rank: int, initial_value: int) -> int:
        self._open()
        self.gpus[rank].semaphores.append(initial_value)
        return len(self.gpus[rank].semaphores) - 1

    def barrier_id(self, rank: int, tbs: List[int]) -> int:
        ids = self._barriers[rank]
        return ids.setdefault(tuple(tbs), len(ids))

    def add_operation(self, rank: int, tb: int, op: Op) -> None:
        self._open()
        if self.loop_context is not None:
            self.loop_context.add_operation(rank, tb, op)
        else:
            self.gpus[rank].tb(tb).ops.append(op)

    def add_pipeline(self, rank: int, tb: int, op: PipelineOp) -> None:
        self._open()
        self.gpus[rank].tb(tb).ops.append(op)

    def set_loop_context(self, context: Optional[Any]) -> None:
        if context is not None and self.loop_context is not None:
            raise DSLError("pipelines (LoopIterationContext) do not nest")
        self.loop_context = context

    def _count(self, channel: Any, which: int) -> None:
        key = (channel.channel_type, channel.src_rank, channel.channel_id)
        self._sync_counts.setdefault(key, [0, 0])[which] += 1

    def register_signal(self, channel: Any, tb: int) -> None:
        self._count(channel, 0)

    def register_wait(self, channel: Any, tb: int) -> None:
        self._count(channel, 1)

    # --- the plan ---

    def _check_signals(self) -> None:
        """Every channel's signals are matched by as many waits on its pair
        (the channel of the same position the other way), or the plan would
        hang or run ahead."""
        for (ctype, src, dst), ids in self._pairs.items():
            back = self._pairs.get((ctype, dst, src), [])
            for k, cid in enumerate(ids):
                signals, waits = self._sync_counts.get((ctype, src, cid), [0, 0])
                if k < len(back):
                    peer_waits = self._sync_counts.get((ctype, dst, back[k]), [0, 0])[1]
                    if signals != peer_waits:
                        raise DSLError(f"program {self.name!r}: rank {src}'s {ctype.value} channel {cid} to rank "
                                       f"{dst} (its channel #{k} to that rank) signals {signals} time(s), but its "
                                       f"pair, rank {dst}'s {ctype.value} channel {back[k]} to rank {src}, waits "
                                       f"{peer_waits} time(s); every signal needs one wait on the paired channel")
                elif signals or waits:
                    raise DSLError(f"program {self.name!r}: rank {src}'s {ctype.value} channel {cid} to rank {dst} "
                                   f"(its channel #{k} to that rank) signals {signals} and waits {waits} time(s), "
                                   f"but it has no pair: rank {dst} has only {len(back)} {ctype.value} channel(s) "
                                   f"to rank {src} (create one each way)")

    def to_dict(self) -> Dict[str, Any]:
        """The plan as a dict (the program cannot change afterwards)."""
        if self._plan is not None:
            return self._plan
        if self.loop_context is not None:
            raise DSLError(f"program {self.name!r}: a pipeline (LoopIterationContext) is still open")
        self._check_signals()
        for gpu in self.gpus:
            for tb in gpu.threadblocks:
                ops = tb.ops
                if self.instr_fusion:
                    ops = _passes.fuse(ops)
                ops = _passes.add_data_sync(ops)
                if self.auto_sync:
                    ops = _passes.resolve_dependencies(ops)
                tb.ops = ops
            gpu.replicate(self.instances, self.replication_policy == ReplicationPolicy.interleaved)
        self._plan = {
            "name": self.name,
            "collective": self.collective.name,
            "protocol": self.protocol,
            "inplace": self.collective.inplace,
            "reuse_resources": self.reuse_resources,
            "gpus": [gpu.to_dict() for gpu in self.gpus],
            "num_threads_per_block": self.num_threads_per_block,
            "use_double_scratch_buffer": self.use_double_scratch_buffer,
            "buffer_alignment": self.buffer_alignment,
            "min_message_size": self.min_message_size,
            "max_message_size": self.max_message_size,
        }
        return self._plan

    def to_json(self, indent: Optional[int] = 2, **kwargs: Any) -> str:
        """The plan as JSON text (MSCCL++'s layout: two-space indent)."""
        return json.dumps(self.to_dict(), indent=indent, **kwargs)


# `from mscclpp.language.program import *` gives what MSCCL++'s does.
__all__ = ["CollectiveProgram", "AlgoSpec", "ReplicationPolicy", "BufferType", "ChannelType", "DSLError",
           "Collective", "TestCollective", "AllGather", "AllReduce", "ReduceScatter", "AllToAll", "SendRecv",
           "MemoryChannel", "PortChannel", "SwitchChannel", "Semaphore", "SyncType", "ReduceOperationType"]
