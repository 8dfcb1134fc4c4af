# SPDX-License-Identifier: MIT
"""What a program builds per rank and thread block, in the shape of the
plan: a rank's chunk counts, channels (``connected_to``), the peers'
buffers it reaches (``remote_buffers``) and semaphores; a thread block's
operations and the rank's channels and remote buffers it uses (its own ids
for them are positions in its lists). Replication (``instances``) happens
here, as the last step before the JSON."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Tuple

from ._ops import Op, clone_ops
from .types import BufferType, ChannelType


class ThreadBlock:
    def __init__(self, tb_id: int) -> None:
        self.id = tb_id
        self.ops: List[Op] = []
        # channel type -> the rank's channel ids this thread block uses (its
        # operations name them by position)
        self.channels: Dict[ChannelType, List[int]] = {}
        # access channel type -> the rank's remote buffer ids it uses
        self.remote_refs: Dict[ChannelType, List[int]] = {}

    def channel_index(self, ctype: ChannelType, channel_id: int) -> int:
        ids = self.channels.setdefault(ctype, [])
        if channel_id not in ids:
            ids.append(channel_id)
        return ids.index(channel_id)

    def remote_index(self, ctype: ChannelType, buffer_id: int) -> int:
        ids = self.remote_refs.setdefault(ctype, [])
        if buffer_id not in ids:
            ids.append(buffer_id)
        return ids.index(buffer_id)

    def replica(self, instance: int, instances: int, interleave: bool) -> "ThreadBlock":
        tb = ThreadBlock(self.id * instances + instance)
        tb.ops = clone_ops(self.ops)
        tb.channels = {t: [c * instances + instance for c in ids] for t, ids in self.channels.items()}
        tb.remote_refs = {t: list(ids) for t, ids in self.remote_refs.items()}
        for op in tb.ops:
            op.shift_buffers(instance, instances, interleave)
            op.shift_ids(instance, instances)
        return tb

    def to_dict(self) -> Dict[str, Any]:
        return {
            "id": self.id,
            "ops": [op.to_dict() for op in self.ops],
            "channels": [{"channel_type": t.value, "channel_ids": list(ids)} for t, ids in self.channels.items() if ids],
            "remote_buffer_refs": [{"access_channel_type": t.value, "remote_buffer_ids": list(ids)}
                                   for t, ids in self.remote_refs.items()],
        }


@dataclass
class RemoteBuffer:
    """A peer's buffer this rank reaches, and through which channel types."""

    buffer_id: int
    rank: int
    buffer: BufferType
    access: List[ChannelType] = field(default_factory=list)

    def to_dict(self) -> Dict[str, Any]:
        return {"rank": self.rank, "type": self.buffer.value, "access_channel_types": [t.value for t in self.access]}


class Gpu:
    def __init__(self, rank: int, input_chunks: int, output_chunks: int) -> None:
        self.id = rank
        self.input_chunks = input_chunks
        self.output_chunks = output_chunks
        self.scratch_chunks = 0
        self.threadblocks: List[ThreadBlock] = []
        # channel type -> peer of each of this rank's channels of the type
        # (the channel's id is its position)
        self.channels: Dict[ChannelType, List[int]] = {}
        self.remote_buffers: Dict[Tuple[int, BufferType], RemoteBuffer] = {}
        self.semaphores: List[int] = []  # initial values

    def tb(self, tb_id: int) -> ThreadBlock:
        while len(self.threadblocks) <= tb_id:
            self.threadblocks.append(ThreadBlock(len(self.threadblocks)))
        return self.threadblocks[tb_id]

    def add_channel(self, ctype: ChannelType, peer: int) -> int:
        peers = self.channels.setdefault(ctype, [])
        peers.append(peer)
        return len(peers) - 1

    def remote_buffer(self, peer: int, buffer: BufferType, access: ChannelType) -> int:
        rb = self.remote_buffers.get((peer, buffer))
        if rb is None:
            rb = RemoteBuffer(len(self.remote_buffers), peer, buffer)
            self.remote_buffers[(peer, buffer)] = rb
        if access not in rb.access:
            rb.access.append(access)
        return rb.buffer_id

    def replicate(self, instances: int, interleave: bool) -> None:
        if instances == 1:
            return  # every shift is the identity
        self.input_chunks *= instances
        self.output_chunks *= instances
        self.scratch_chunks *= instances
        self.channels = {t: [p for p in peers for _ in range(instances)] for t, peers in self.channels.items()}
        self.semaphores = [v for v in self.semaphores for _ in range(instances)]
        self.threadblocks = [tb.replica(i, instances, interleave) for tb in self.threadblocks for i in range(instances)]

    def to_dict(self) -> Dict[str, Any]:
        return {
            "id": self.id,
            "input_chunks": self.input_chunks,
            "output_chunks": self.output_chunks,
            "scratch_chunks": self.scratch_chunks,
            "threadblocks": [tb.to_dict() for tb in self.threadblocks],
            "channels": [{"channel_type": t.value, "connected_to": list(p)} for t, p in self.channels.items()],
            "remote_buffers": [rb.to_dict() for rb in self.remote_buffers.values()],
            "semaphores": [{"init_value": v} for v in self.semaphores],
        }
