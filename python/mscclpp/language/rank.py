# SPDX-License-Identifier: MIT
"""Ranks, their buffers and semaphores, and the operations that stay on
one rank: copy (plain, into packets, out of packets), reduce, barrier."""

from __future__ import annotations

from typing import List, Optional

from ._context import get_program
from ._ops import BarrierOp, CopyOp, LocalRef, ReduceOp, SemaphoreOp, SyncOp, TbgInfo
from .thread_block_group import ThreadBlockGroup
from .types import BufferType, Chunk, DSLError, Instruction, ReduceOperationType, SyncType


class BaseBuffer:
    """``size`` chunks of buffer ``buffer_type`` of rank ``rank``, from chunk
    ``offset``. Slice it to get chunks: ``buf[0:2]`` (positions relative to
    the buffer; no step, no negative positions)."""

    def __init__(self, rank: int, buffer_type: BufferType, offset: int, size: int) -> None:
        self.rank = rank
        self.buffer_type = buffer_type
        self.offset = offset
        self.size = size
        self._program: Optional[object] = None

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, key: slice) -> Chunk:
        what = f"rank {self.rank}'s {self.buffer_type.name} buffer ({self.size} chunks)"
        if not isinstance(key, slice):
            raise TypeError(f"{what}: index it with a slice (buf[i:i+1]), not {type(key).__name__}")
        if key.step is not None and key.step != 1:
            raise DSLError(f"{what}: slices have no step (got step {key.step})")
        start = 0 if key.start is None else key.start
        stop = self.size if key.stop is None else key.stop
        for v in (start, stop):
            if isinstance(v, bool) or not isinstance(v, int):
                raise TypeError(f"{what}: slice bounds must be integers, not {v!r}")
        if start < 0 or stop < 0:
            raise DSLError(f"{what}: slice [{start}:{stop}] has a negative bound")
        if start >= stop:
            raise DSLError(f"{what}: slice [{start}:{stop}] is empty")
        if stop > self.size:
            raise DSLError(f"{what}: slice [{start}:{stop}] is out of range (chunks 0 to {self.size - 1})")
        return Chunk(self.rank, self.buffer_type, self.offset + start, stop - start, program=self._program)


class Buffer(BaseBuffer):
    """``size`` chunks of rank ``rank``'s scratch buffer, after the chunks
    the rank's earlier Buffers took."""

    def __init__(self, rank: int, size: int) -> None:
        prog = get_program()
        prog.check_rank(rank, "Buffer rank")
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise DSLError(f"a scratch Buffer needs a positive number of chunks, not {size!r}")
        super().__init__(rank, BufferType.scratch, prog.alloc_scratch(rank, size), size)
        self._program = prog


def _tb_ids(tb: Optional[int], tb_group: Optional[ThreadBlockGroup], what: str) -> List[int]:
    prog = get_program()
    if tb is not None and tb_group is not None:
        raise DSLError(f"{what}: give tb or tb_group, not both")
    if tb is not None:
        return [prog.check_tb(tb)]
    if tb_group is not None:
        if not isinstance(tb_group, ThreadBlockGroup):
            raise TypeError(f"{what}: tb_group must be a ThreadBlockGroup, not {type(tb_group).__name__}")
        return list(tb_group.tb_list)
    raise DSLError(f"{what}: give the thread block that runs it (tb=) or a ThreadBlockGroup (tb_group=)")


def _tbg(tb_group: Optional[ThreadBlockGroup], tb: int) -> Optional[TbgInfo]:
    return None if tb_group is None else TbgInfo(tb_group.get_internal_id(tb), tb_group.numtb())


class Rank:
    """Rank ``rank`` of the program: its buffers and local operations."""

    def __init__(self, rank: int) -> None:
        get_program().check_rank(rank, "Rank")
        self.rank = rank

    def __repr__(self) -> str:
        return f"Rank({self.rank})"

    def get_input_buffer(self) -> BaseBuffer:
        return get_program().buffer(self.rank, BufferType.input)

    def get_output_buffer(self) -> BaseBuffer:
        return get_program().buffer(self.rank, BufferType.output)

    def _copy(self, name: Instruction, dst_chunk: Chunk, src_chunk: Chunk, tb: Optional[int],
              tb_group: Optional[ThreadBlockGroup]) -> None:
        prog = get_program()
        what = {Instruction.copy: "copy", Instruction.copy_packet: "copy_packets",
                Instruction.unpack_packet: "unpack_packets"}[name]
        prog.check_chunk(dst_chunk, f"{what} destination", rank=self.rank)
        prog.check_chunk(src_chunk, f"{what} source", rank=self.rank)
        if dst_chunk.size != src_chunk.size:
            raise DSLError(f"{what}: destination {dst_chunk.describe()} and source {src_chunk.describe()} "
                           "differ in size")
        if name == Instruction.unpack_packet:
            prog.require_packets(what)
            prog.check_scratch(src_chunk, f"{what} source (packets)")
        if name == Instruction.copy_packet:
            prog.require_packets(what)
            prog.check_scratch(dst_chunk, f"{what} destination (packets)")
        for t in _tb_ids(tb, tb_group, what):
            op = CopyOp(name, [LocalRef(src_chunk.buffer, src_chunk.index, src_chunk.size)],
                        [LocalRef(dst_chunk.buffer, dst_chunk.index, dst_chunk.size)], _tbg(tb_group, t))
            prog.add_operation(self.rank, t, op)

    def copy(self, dst_chunk: Chunk, src_chunk: Chunk, tb: Optional[int] = None,
             tb_group: Optional[ThreadBlockGroup] = None) -> None:
        """Copy src_chunk to dst_chunk (both of this rank)."""
        self._copy(Instruction.copy, dst_chunk, src_chunk, tb, tb_group)

    def unpack_packets(self, dst_chunk: Chunk, src_chunk: Chunk, tb: Optional[int] = None,
                       tb_group: Optional[ThreadBlockGroup] = None) -> None:
        """Copy the LL packets of scratch chunk src_chunk (waiting for each
        to arrive) as plain data into dst_chunk."""
        self._copy(Instruction.unpack_packet, dst_chunk, src_chunk, tb, tb_group)

    def copy_packets(self, dst_chunk: Chunk, src_chunk: Chunk, tb: Optional[int] = None,
                     tb_group: Optional[ThreadBlockGroup] = None) -> None:
        """Write src_chunk as LL packets into scratch chunk dst_chunk."""
        self._copy(Instruction.copy_packet, dst_chunk, src_chunk, tb, tb_group)

    def reduce(self, src_chunk: Chunk, other_chunks: List[Chunk], tb: Optional[int] = None,
               tb_group: Optional[ThreadBlockGroup] = None, dst_chunk: Optional[Chunk] = None,
               reduce_op: ReduceOperationType = ReduceOperationType.sum, packet: bool = False) -> None:
        """dst_chunk (default: src_chunk) = src_chunk reduced with every
        chunk of other_chunks; with packet=True the others are LL packets in
        this rank's scratch buffer (waited for)."""
        prog = get_program()
        what = "reduce (packets)" if packet else "reduce"
        if dst_chunk is None:
            dst_chunk = src_chunk
        prog.check_chunk(src_chunk, f"{what} source", rank=self.rank)
        prog.check_chunk(dst_chunk, f"{what} destination", rank=self.rank)
        if dst_chunk.size != src_chunk.size:
            raise DSLError(f"{what}: destination {dst_chunk.describe()} and source {src_chunk.describe()} "
                           "differ in size")
        if not isinstance(other_chunks, (list, tuple)) or not other_chunks:
            raise DSLError(f"{what}: other_chunks must be a non-empty list of chunks")
        if packet:
            prog.require_packets(what)
        for i, c in enumerate(other_chunks):
            prog.check_chunk(c, f"{what} other_chunks[{i}]", rank=self.rank)
            if c.size != src_chunk.size:
                raise DSLError(f"{what}: other_chunks[{i}] {c.describe()} and source {src_chunk.describe()} "
                               "differ in size")
            if packet:
                prog.check_scratch(c, f"{what} other_chunks[{i}] (packets)")
        if not isinstance(reduce_op, ReduceOperationType):
            raise TypeError(f"{what}: reduce_op must be a ReduceOperationType, not {reduce_op!r}")
        for t in _tb_ids(tb, tb_group, what):
            op = ReduceOp([LocalRef(src_chunk.buffer, src_chunk.index, src_chunk.size)]
                          + [LocalRef(c.buffer, c.index, c.size) for c in other_chunks],
                          [LocalRef(dst_chunk.buffer, dst_chunk.index, dst_chunk.size)],
                          reduce_op=reduce_op, tbg=_tbg(tb_group, t), packet=packet)
            prog.add_operation(self.rank, t, op)

    def barrier(self, tb_list: List[int]) -> None:
        """Every thread block of tb_list waits for all of them here (one
        thread block: a synchronisation of its threads)."""
        prog = get_program()
        if not isinstance(tb_list, (list, tuple)) or not tb_list:
            raise DSLError("barrier: tb_list must be a non-empty list of thread blocks")
        tbs = [prog.check_tb(t) for t in tb_list]
        if len(set(tbs)) != len(tbs):
            raise DSLError(f"barrier: thread block list {tbs} has duplicates")
        if len(tbs) == 1:
            prog.add_operation(self.rank, tbs[0], SyncOp())
            return
        barrier_id = prog.barrier_id(self.rank, tbs)
        for t in tbs:
            prog.add_operation(self.rank, t, BarrierOp(barrier_id, len(tbs)))


class Semaphore:
    """A device semaphore of rank ``rank`` for ordering its thread blocks:
    release adds one, acquire waits for a positive value and takes one."""

    def __init__(self, rank: int, initial_value: int) -> None:
        prog = get_program()
        prog.check_rank(rank, "Semaphore rank")
        if isinstance(initial_value, bool) or not isinstance(initial_value, int) or initial_value < 0:
            raise DSLError(f"a Semaphore's initial value must be a non-negative integer, not {initial_value!r}")
        self.rank = rank
        self.initial_value = initial_value
        self.id = prog.add_semaphore(rank, initial_value)
        self._program = prog

    def _op(self, name: Instruction, tb: int, data_sync: SyncType) -> None:
        prog = get_program()
        if self._program is not prog:
            raise DSLError(f"semaphore {self.id} of rank {self.rank} belongs to another program")
        if not isinstance(data_sync, SyncType):
            raise TypeError(f"data_sync must be a SyncType, not {data_sync!r}")
        prog.add_operation(self.rank, prog.check_tb(tb), SemaphoreOp(name, [self.id], data_sync))

    def acquire(self, tb: int, data_sync: SyncType = SyncType.both) -> None:
        self._op(Instruction.sem_acquire, tb, data_sync)

    def release(self, tb: int, data_sync: SyncType = SyncType.both) -> None:
        self._op(Instruction.sem_release, tb, data_sync)


__all__ = ["Rank", "BaseBuffer", "Buffer", "Semaphore", "Chunk", "BufferType", "SyncType", "ReduceOperationType",
           "ThreadBlockGroup"]
