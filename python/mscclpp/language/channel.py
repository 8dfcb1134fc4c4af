# SPDX-License-Identifier: MIT
"""Channels between two ranks and the operations over them.

A channel goes from ``src_rank`` (which runs its operations) to
``dst_rank``. Each ``MemoryChannel(dst, src)`` is a new channel; the k-th
channel from a to b is paired with the k-th channel of the same type from b
to a (a signal on one is what a wait on the other waits for), so create
them in the same order on both sides and keep the objects to reuse them.

- MemoryChannel: direct loads and stores into the peer's buffers (CUDA
  IPC; shared memory on the host backend): signal, wait (relaxed or not),
  put, get, reduce (reading peers' chunks), put_packets, read_put_packets.
- PortChannel: transfers made by the proxy: signal, wait, flush, put,
  put_with_signal, put_with_signal_and_flush, put_packets,
  read_put_packets.
- SwitchChannel (NVLink multicast) is refused: multicast is not allowed on
  the machines this library targets.
"""

from __future__ import annotations

from typing import Any, List, Optional

from ._context import get_program
from ._ops import ChannelSyncOp, GetOp, LocalRef, PutOp, ReduceOp, RemoteRef
from .rank import _tb_ids, _tbg
from .thread_block_group import ThreadBlockGroup
from .types import BufferType, ChannelType, Chunk, DSLError, Instruction, ReduceOperationType, SyncType


class _Channel:
    channel_type = ChannelType.none
    kind = "channel"

    def __init__(self, dst_rank: int, src_rank: int) -> None:
        prog = get_program()
        prog.check_rank(src_rank, f"{self.kind} src_rank")
        prog.check_rank(dst_rank, f"{self.kind} dst_rank")
        if src_rank == dst_rank:
            raise DSLError(f"a {self.kind} connects two ranks: src_rank and dst_rank are both {src_rank}")
        self.src_rank = src_rank
        self.dst_rank = dst_rank
        self.channel_id = prog.add_channel(self.channel_type, src_rank, dst_rank)
        self._program = prog

    def __repr__(self) -> str:
        return f"{self.kind}({self.src_rank}->{self.dst_rank}, id {self.channel_id})"

    def _prog(self, what: str) -> Any:
        prog = get_program()
        if self._program is not prog:
            raise DSLError(f"{what} on {self!r}: the channel does not exist in program {prog.name!r} "
                           "(it was made in another program)")
        return prog

    def _sync(self, name: Instruction, tb: int, data_sync: SyncType) -> None:
        prog = self._prog(name.name)
        if not isinstance(data_sync, SyncType):
            raise TypeError(f"data_sync must be a SyncType, not {data_sync!r}")
        t = prog.check_tb(tb)
        index = prog.channel_index(self.src_rank, t, self)
        prog.add_operation(self.src_rank, t, ChannelSyncOp(name, [index], self.channel_type, data_sync))
        if name in (Instruction.signal, Instruction.relaxed_signal):
            prog.register_signal(self, t)
        elif name in (Instruction.wait, Instruction.relaxed_wait):
            prog.register_wait(self, t)

    def _put(self, name: Instruction, what: str, dst_chunk: Chunk, src_chunk: Chunk, tb: Optional[int],
             tb_group: Optional[ThreadBlockGroup]) -> None:
        prog = self._prog(what)
        prog.check_chunk(src_chunk, f"{what} source", rank=self.src_rank)
        prog.check_chunk(dst_chunk, f"{what} destination", rank=self.dst_rank)
        if dst_chunk.size != src_chunk.size:
            raise DSLError(f"{what}: destination {dst_chunk.describe()} and source {src_chunk.describe()} "
                           "differ in size")
        if name in (Instruction.put_packet, Instruction.read_put_packet):
            prog.require_packets(what)
            prog.check_scratch(dst_chunk, f"{what} destination (packets)")
        if name == Instruction.read_put_packet:
            prog.check_scratch(src_chunk, f"{what} source (packets)")
        for t in _tb_ids(tb, tb_group, what):
            buffer_id = prog.remote_buffer_index(self.src_rank, t, dst_chunk, self.channel_type)
            index = prog.channel_index(self.src_rank, t, self)
            op = PutOp(name, [LocalRef(src_chunk.buffer, src_chunk.index, src_chunk.size)],
                       [RemoteRef(dst_chunk.buffer, dst_chunk.index, dst_chunk.size, buffer_id)], [index],
                       self.channel_type, _tbg(tb_group, t))
            prog.add_operation(self.src_rank, t, op)
            if name in (Instruction.put_with_signal, Instruction.put_with_signal_and_flush):
                prog.register_signal(self, t)

    def put_packets(self, dst_chunk: Chunk, src_chunk: Chunk, tb: Optional[int] = None,
                    tb_group: Optional[ThreadBlockGroup] = None) -> None:
        """Write src_chunk as LL packets into the peer's scratch chunk
        dst_chunk (the peer's reads wait for them: no signal needed)."""
        self._put(Instruction.put_packet, "put_packets", dst_chunk, src_chunk, tb, tb_group)

    def read_put_packets(self, dst_chunk: Chunk, src_chunk: Chunk, tb: Optional[int] = None,
                         tb_group: Optional[ThreadBlockGroup] = None) -> None:
        """Forward the LL packets of this rank's scratch chunk src_chunk
        (waiting for each) into the peer's scratch chunk dst_chunk."""
        self._put(Instruction.read_put_packet, "read_put_packets", dst_chunk, src_chunk, tb, tb_group)


class MemoryChannel(_Channel):
    """A memory channel from src_rank to dst_rank."""

    channel_type = ChannelType.memory
    kind = "MemoryChannel"

    def signal(self, tb: int, data_sync: SyncType = SyncType.both, relaxed: bool = False) -> None:
        """Tell the peer (its paired channel's wait) that this rank got
        here; relaxed: without ordering earlier writes before it."""
        self._sync(Instruction.relaxed_signal if relaxed else Instruction.signal, tb, data_sync)

    def wait(self, tb: int, data_sync: SyncType = SyncType.both, relaxed: bool = False) -> None:
        """Wait for the peer's next signal on the paired channel."""
        self._sync(Instruction.relaxed_wait if relaxed else Instruction.wait, tb, data_sync)

    def put(self, dst_chunk: Chunk, src_chunk: Chunk, tb: Optional[int] = None,
            tb_group: Optional[ThreadBlockGroup] = None) -> None:
        """Write src_chunk (this rank) into dst_chunk (the peer's)."""
        self._put(Instruction.put, "put", dst_chunk, src_chunk, tb, tb_group)

    def get(self, dst_chunk: Chunk, src_chunk: Chunk, tb: Optional[int] = None,
            tb_group: Optional[ThreadBlockGroup] = None) -> None:
        """Read src_chunk (the peer's) into dst_chunk (this rank's)."""
        what = "get"
        prog = self._prog(what)
        prog.check_chunk(dst_chunk, f"{what} destination", rank=self.src_rank)
        prog.check_chunk(src_chunk, f"{what} source", rank=self.dst_rank)
        if dst_chunk.size != src_chunk.size:
            raise DSLError(f"{what}: destination {dst_chunk.describe()} and source {src_chunk.describe()} "
                           "differ in size")
        for t in _tb_ids(tb, tb_group, what):
            buffer_id = prog.remote_buffer_index(self.src_rank, t, src_chunk, self.channel_type)
            index = prog.channel_index(self.src_rank, t, self)
            op = GetOp([RemoteRef(src_chunk.buffer, src_chunk.index, src_chunk.size, buffer_id)],
                       [LocalRef(dst_chunk.buffer, dst_chunk.index, dst_chunk.size)], [index], self.channel_type,
                       _tbg(tb_group, t))
            prog.add_operation(self.src_rank, t, op)

    def reduce(self, local_src_chunk: Chunk, remote_src_chunks: List[Chunk], tb: Optional[int] = None,
               tb_group: Optional[ThreadBlockGroup] = None, local_dst_chunk: Optional[Chunk] = None,
               reduce_op: ReduceOperationType = ReduceOperationType.sum) -> None:
        """local_dst_chunk (default: local_src_chunk) = local_src_chunk
        reduced with the peer's chunks remote_src_chunks, read directly."""
        what = "reduce"
        prog = self._prog(what)
        if local_dst_chunk is None:
            local_dst_chunk = local_src_chunk
        prog.check_chunk(local_src_chunk, f"{what} local source", rank=self.src_rank)
        prog.check_chunk(local_dst_chunk, f"{what} local destination", rank=self.src_rank)
        if local_dst_chunk.size != local_src_chunk.size:
            raise DSLError(f"{what}: destination {local_dst_chunk.describe()} and source "
                           f"{local_src_chunk.describe()} differ in size")
        if not isinstance(remote_src_chunks, (list, tuple)) or not remote_src_chunks:
            raise DSLError(f"{what}: remote_src_chunks must be a non-empty list of the peer's chunks")
        for i, c in enumerate(remote_src_chunks):
            prog.check_chunk(c, f"{what} remote_src_chunks[{i}]", rank=self.dst_rank)
            if c.size != local_src_chunk.size:
                raise DSLError(f"{what}: remote_src_chunks[{i}] {c.describe()} and source "
                               f"{local_src_chunk.describe()} differ in size")
        if not isinstance(reduce_op, ReduceOperationType):
            raise TypeError(f"{what}: reduce_op must be a ReduceOperationType, not {reduce_op!r}")
        for t in _tb_ids(tb, tb_group, what):
            remote = [RemoteRef(c.buffer, c.index, c.size,
                                prog.remote_buffer_index(self.src_rank, t, c, self.channel_type))
                      for c in remote_src_chunks]
            index = prog.channel_index(self.src_rank, t, self)
            op = ReduceOp([LocalRef(local_src_chunk.buffer, local_src_chunk.index, local_src_chunk.size)],
                          [LocalRef(local_dst_chunk.buffer, local_dst_chunk.index, local_dst_chunk.size)],
                          remote_src=remote, channel_ids=[index], channel_type=self.channel_type,
                          reduce_op=reduce_op, tbg=_tbg(tb_group, t))
            prog.add_operation(self.src_rank, t, op)


class PortChannel(_Channel):
    """A port channel from src_rank to dst_rank (the proxy moves the data)."""

    channel_type = ChannelType.port
    kind = "PortChannel"

    def signal(self, tb: int, data_sync: SyncType = SyncType.both) -> None:
        self._sync(Instruction.signal, tb, data_sync)

    def wait(self, tb: int, data_sync: SyncType = SyncType.both) -> None:
        self._sync(Instruction.wait, tb, data_sync)

    def flush(self, tb: int, data_sync: SyncType = SyncType.both) -> None:
        """Wait until the channel's earlier puts have completed."""
        self._sync(Instruction.flush, tb, data_sync)

    def put(self, dst_chunk: Chunk, src_chunk: Chunk, tb: int) -> None:
        self._put(Instruction.put, "put", dst_chunk, src_chunk, tb, None)

    def put_with_signal(self, dst_chunk: Chunk, src_chunk: Chunk, tb: int) -> None:
        """put, then a signal ordered after it (counts as a signal)."""
        self._put(Instruction.put_with_signal, "put_with_signal", dst_chunk, src_chunk, tb, None)

    def put_with_signal_and_flush(self, dst_chunk: Chunk, src_chunk: Chunk, tb: int) -> None:
        """put_with_signal, then wait for the put to complete."""
        self._put(Instruction.put_with_signal_and_flush, "put_with_signal_and_flush", dst_chunk, src_chunk, tb, None)


class SwitchChannel:
    """Refused: a switch channel is NVLink multicast (NVLS), and multicast
    is not allowed on the machines this library targets."""

    def __init__(self, rank_list: List[int], buffer_type: BufferType) -> None:
        raise DSLError(f"SwitchChannel(rank_list={rank_list!r}, buffer_type={buffer_type}) is refused: switch "
                       "channels use NVLink multicast (NVLS), which is not allowed on the machines this library "
                       "targets; use MemoryChannel (or PortChannel) operations instead")


__all__ = ["MemoryChannel", "PortChannel", "SwitchChannel", "Chunk", "BufferType", "ChannelType", "SyncType",
           "ReduceOperationType", "ThreadBlockGroup", "DSLError"]
