# SPDX-License-Identifier: MIT
"""The DSL's vocabulary: buffer, channel and synchronisation kinds, chunks,
and the exception every mistake in a program raises.

The enum values are the strings of MSCCL++'s execution-plan format ("i",
"o", "s" for buffers; "memory", "port" for channels; "sum" for reductions).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Dict, Optional


class DSLError(ValueError):
    """A program written in the DSL is wrong: a chunk out of range, an
    operation on a channel that does not belong to the program, a rank
    count that does not match the collective, a switch channel, ...

    The message names the object and the value at fault. A ValueError, so
    ``except ValueError`` catches it too."""


_SYNC_BITS = {"none": 0, "before": 1, "after": 2, "both": 3}


class SyncType(enum.Enum):
    """Where a synchronisation of the threads of one thread block
    (``__syncthreads``) goes around a signal, wait, flush or semaphore
    operation: none, before it, after it, or both. Combine with ``|``,
    ``&`` and ``^`` (bitwise on before=1, after=2)."""

    none = "none"
    before = "before"
    after = "after"
    both = "both"

    def __str__(self) -> str:
        return self.value

    @property
    def bits(self) -> int:
        return _SYNC_BITS[self.value]

    @staticmethod
    def from_bits(bits: int) -> "SyncType":
        return (SyncType.none, SyncType.before, SyncType.after, SyncType.both)[bits & 3]

    def __or__(self, other: object) -> "SyncType":
        if not isinstance(other, SyncType):
            return NotImplemented
        return SyncType.from_bits(self.bits | other.bits)

    def __and__(self, other: object) -> "SyncType":
        if not isinstance(other, SyncType):
            return NotImplemented
        return SyncType.from_bits(self.bits & other.bits)

    def __xor__(self, other: object) -> "SyncType":
        if not isinstance(other, SyncType):
            return NotImplemented
        return SyncType.from_bits(self.bits ^ other.bits)

    def has(self, other: "SyncType") -> bool:
        """Whether every bit of ``other`` is set here."""
        return (self.bits & other.bits) == other.bits


class ReduceOperationType(enum.Enum):
    """The reduction a reduce operation applies (the plan's ``reduce_op``).
    The executor may apply the call's operator instead (ours does)."""

    sum = "sum"
    min = "min"
    max = "max"

    def __str__(self) -> str:
        return self.value


class BufferType(enum.Enum):
    """A rank's buffers: the collective's input and output, and the
    scratch buffer the executor allocates per plan."""

    input = "i"
    output = "o"
    scratch = "s"

    def __str__(self) -> str:
        return self.value

    @property
    def label(self) -> str:
        return self.name


class ChannelType(enum.Enum):
    """Channel kinds. ``switch`` (NVLS multicast) exists in the format but
    is refused by this DSL: multicast is not allowed on the machines this
    library targets. ``none`` marks a purely local operation."""

    port = "port"
    memory = "memory"
    switch = "switch"
    none = "none"

    def __str__(self) -> str:
        return self.value


class Instruction(enum.Enum):
    """Operation names, as the plan spells them."""

    nop = "nop"
    barrier = "barrier"
    copy = "copy"
    copy_packet = "cpkt"
    unpack_packet = "upkt"
    reduce = "re"
    reduce_packet = "repkt"
    reduce_copy_packet = "recpkt"
    reduce_send = "res"
    reduce_send_packet = "respkt"
    reduce_copy_send_packet = "recspkt"
    read_reduce = "rre"
    read_reduce_send = "rres"
    sem_acquire = "sem_acquire"
    sem_release = "sem_release"
    signal = "signal"
    wait = "wait"
    relaxed_signal = "rlxsignal"
    relaxed_wait = "rlxwait"
    flush = "flush"
    get = "get"
    put = "put"
    put_packet = "ppkt"
    read_put_packet = "rppkt"
    put_with_signal = "pws"
    put_with_signal_and_flush = "pwsf"
    pipeline = "pipeline"

    def __str__(self) -> str:
        return self.value


@dataclass
class Chunk:
    """``size`` consecutive chunks of buffer ``buffer`` of rank ``rank``,
    from chunk ``index``: what slicing a buffer gives (``buf[2:4]``).

    Chunks are units of the plan: the executor cuts a call's buffers into
    as many equal chunks as the plan says (``input_chunks``) and maps chunk
    indices to byte offsets."""

    rank: int
    buffer: BufferType
    index: int
    size: int
    # The program the chunk was cut in (None for a chunk made by hand): an
    # operation refuses chunks of another program.
    program: Optional[Any] = field(default=None, compare=False, repr=False)

    def __hash__(self) -> int:
        return hash((self.rank, self.buffer, self.index, self.size))

    def to_dict(self) -> Dict[str, Any]:
        return {"rank": self.rank, "type": self.buffer.value, "index": self.index, "size": self.size}

    def describe(self) -> str:
        end = self.index + self.size
        return f"rank {self.rank} {self.buffer.name}[{self.index}:{end}]"


class ReplicationPolicy(enum.Enum):
    """How the instances of a program share the chunks: ``interleaved``
    (chunk i of instance k is chunk i * instances + k) or ``none`` (every
    instance on the same chunks)."""

    interleaved = "interleaved"
    none = "none"

    def __str__(self) -> str:
        return self.value
