# SPDX-License-Identifier: MIT
"""The passes a program's operations go through before they are written,
per thread block, in MSCCL++'s order: fusion (``fuse``), the nops that
signals, waits, flushes and semaphores ask for (``add_data_sync``), and the
nops that keep two operations touching the same local chunks in order
(``resolve_dependencies``)."""

from __future__ import annotations

from typing import Dict, List

from ._ops import Access, DataSyncOp, Op, PipelineOp, SyncOp
from .types import BufferType, Instruction, SyncType


def fuse(ops: List[Op]) -> List[Op]:
    """Fuse each operation with as many of its successors as it can take,
    left to right (a pipeline's own operations first)."""
    out: List[Op] = []
    i = 0
    while i < len(ops):
        current = ops[i]
        if isinstance(current, PipelineOp):
            current.ops = fuse(current.ops)
        j = i + 1
        while j < len(ops):
            fused = current.fuse(ops[j])
            if fused is None:
                break
            current = fused
            j += 1
        out.append(current)
        i = j
    return out


def add_data_sync(ops: List[Op]) -> List[Op]:
    """A nop before / after every data-sync operation that asks for one."""
    out: List[Op] = []
    for op in ops:
        if isinstance(op, PipelineOp):
            op.ops = add_data_sync(op.ops)
        if isinstance(op, DataSyncOp) and op.data_sync.has(SyncType.before):
            out.append(SyncOp())
        out.append(op)
        if isinstance(op, DataSyncOp) and op.data_sync.has(SyncType.after):
            out.append(SyncOp())
    return out


class _Accesses:
    """The latest access to every chunk of the local buffers since the last
    synchronisation: disjoint intervals per buffer."""

    def __init__(self) -> None:
        self.intervals: Dict[BufferType, List[Access]] = {b: [] for b in BufferType}

    def clear(self) -> None:
        for lst in self.intervals.values():
            lst.clear()

    def record(self, acc: Access) -> bool:
        """Record acc; True if it conflicts with an earlier access (a
        synchronisation goes before it and everything else is forgotten)."""
        lst = self.intervals[acc.buffer]
        overlapping = [a for a in lst if a.overlaps(acc)]
        if any(acc.conflicts(a) for a in overlapping):
            self.clear()
            self.intervals[acc.buffer].append(acc)
            return True
        kept: List[Access] = []
        for a in lst:
            if not a.overlaps(acc):
                kept.append(a)
                continue
            # Keep the parts of an earlier access that acc does not cover.
            if a.start < acc.start:
                kept.append(Access(a.uid, a.start, acc.start - 1, a.buffer, a.kind))
            if a.end > acc.end:
                kept.append(Access(a.uid, acc.end + 1, a.end, a.buffer, a.kind))
        kept.append(acc)
        kept.sort(key=lambda a: (a.start, a.end))
        self.intervals[acc.buffer] = kept
        return False


def resolve_dependencies(ops: List[Op]) -> List[Op]:
    """A nop before every operation that touches local chunks an earlier
    operation of the thread block wrote (or reads what it writes) since
    the last nop or barrier."""
    seen = _Accesses()
    out: List[Op] = []
    for op in ops:
        if op.name in (Instruction.nop, Instruction.barrier):
            seen.clear()
        else:
            if isinstance(op, PipelineOp):
                op.ops = resolve_dependencies(op.ops)
            synced = False
            for acc in op.accesses():
                if seen.record(acc) and not synced:
                    out.append(SyncOp())
                    synced = True
        out.append(op)
    return out

