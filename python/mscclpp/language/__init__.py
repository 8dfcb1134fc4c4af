# SPDX-License-Identifier: MIT
"""mscclpp.language: collective algorithms written in Python, emitted as
execution plans (MSCCL++'s JSON format) that the library's executor runs.

The API is MSCCL++'s DSL (``mscclpp.language`` of microsoft/mscclpp),
written anew; a program written for it emits the same plan here::

    from mscclpp.language import *

    with CollectiveProgram("allgather_2", AllGather(2, 1, True), 2) as prog:
        for src in range(2):
            dst = 1 - src
            out = Rank(src).get_output_buffer()
            ch = MemoryChannel(dst, src)
            ch.signal(tb=0, relaxed=True)
            ch.wait(tb=0, data_sync=SyncType.after, relaxed=True)
            ch.put(Rank(dst).get_output_buffer()[src:src + 1], out[src:src + 1], tb=0)
            ch.signal(tb=0, data_sync=SyncType.before)
            ch.wait(tb=0, data_sync=SyncType.after)
        plan = prog.to_json()

Mistakes raise :class:`DSLError` (a ValueError) naming what is wrong.
:func:`check_plan` checks a plan's structure (any plan, from this DSL or
not), :func:`simulate` runs it on symbolic data, and ``python3 -m
mscclpp.language.generate DIR`` writes the default plans
(``mscclpp.language.plans``).
"""

from __future__ import annotations

from .channel import MemoryChannel, PortChannel, SwitchChannel
from .check import PlanError, check_plan
from .collectives import AllGather, AllReduce, AllToAll, Collective, ReduceScatter, SendRecv, TestCollective
from .general import JSON
from .loop import LoopIterationContext
from .program import CollectiveProgram
from .rank import BaseBuffer, Buffer, Rank, Semaphore
from .simulator import SimulationError, simulate
from .thread_block_group import ThreadBlockGroup
from .types import BufferType, ChannelType, Chunk, DSLError, ReduceOperationType, ReplicationPolicy, SyncType
from .utils import AlgoSpec

__all__ = [
    "AlgoSpec", "AllGather", "AllReduce", "AllToAll", "BaseBuffer", "Buffer", "BufferType", "ChannelType", "Chunk",
    "Collective", "CollectiveProgram", "DSLError", "JSON", "LoopIterationContext", "MemoryChannel", "PlanError",
    "PortChannel", "Rank", "ReduceOperationType", "ReduceScatter", "ReplicationPolicy", "Semaphore", "SendRecv",
    "SimulationError", "SwitchChannel", "SyncType", "TestCollective", "ThreadBlockGroup", "check_plan", "simulate",
]
