# SPDX-License-Identifier: MIT
"""Collectives: what a program implements, and the input and output
buffers (in chunks) every rank has for it.

``chunk_factor`` cuts each rank's share into that many chunks: an allreduce
of N ranks has N * chunk_factor chunks of input and of output per rank, an
allgather chunk_factor of input and N * chunk_factor of output, a
reduce-scatter the reverse, an all-to-all N * chunk_factor of each."""

from __future__ import annotations

from typing import Dict, List, Tuple

from .rank import BaseBuffer
from .types import BufferType, DSLError


def _positive(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise DSLError(f"{what} must be a positive integer, not {value!r}")
    return value


class Collective:
    """A collective of ``num_ranks`` ranks. ``name`` is the plan's
    ``collective`` field."""

    name = "custom"

    def __init__(self, num_ranks: int, chunk_factor: int, inplace: bool) -> None:
        self.num_ranks = _positive(num_ranks, "num_ranks")
        self.chunk_factor = _positive(chunk_factor, "chunk_factor")
        if not isinstance(inplace, bool):
            raise DSLError(f"inplace must be True or False, not {inplace!r}")
        self.inplace = inplace

    def sizes(self) -> Tuple[int, int]:
        """(input chunks, output chunks) of every rank."""
        raise NotImplementedError

    def init_buffers(self) -> List[Dict[BufferType, BaseBuffer]]:
        inp, out = self.sizes()
        return [{BufferType.input: BaseBuffer(r, BufferType.input, 0, inp),
                 BufferType.output: BaseBuffer(r, BufferType.output, 0, out)} for r in range(self.num_ranks)]


class TestCollective(Collective):
    """Buffers of any size, for tests (``collective``: "test")."""

    name = "test"

    def __init__(self, num_ranks: int, input_size: int, output_size: int) -> None:
        super().__init__(num_ranks, 1, False)
        for v, what in ((input_size, "input_size"), (output_size, "output_size")):
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise DSLError(f"{what} must be a non-negative integer, not {v!r}")
        self.input_size = input_size
        self.output_size = output_size

    def sizes(self) -> Tuple[int, int]:
        return self.input_size, self.output_size


class AllGather(Collective):
    """Every rank ends with every rank's input, in rank order. In place, a
    rank's input is its share of the output (a plan uses the output only)."""

    name = "allgather"

    def sizes(self) -> Tuple[int, int]:
        return self.chunk_factor, self.num_ranks * self.chunk_factor


class AllReduce(Collective):
    """Every rank ends with the reduction of all inputs."""

    name = "allreduce"

    def sizes(self) -> Tuple[int, int]:
        return self.num_ranks * self.chunk_factor, self.num_ranks * self.chunk_factor


class ReduceScatter(Collective):
    """Rank r ends with share r of the reduction of all inputs. In place, a
    rank's output is its share of its input."""

    name = "reducescatter"

    def sizes(self) -> Tuple[int, int]:
        return self.num_ranks * self.chunk_factor, self.chunk_factor


class AllToAll(Collective):
    """Rank r's share q of input ends as rank q's share r of output."""

    name = "alltoall"

    def sizes(self) -> Tuple[int, int]:
        return self.num_ranks * self.chunk_factor, self.num_ranks * self.chunk_factor


class SendRecv(Collective):
    """Point to point: input and output of chunk_factor chunks."""

    name = "sendrecv"

    def sizes(self) -> Tuple[int, int]:
        return self.chunk_factor, self.chunk_factor


__all__ = ["Collective", "TestCollective", "AllGather", "AllReduce", "ReduceScatter", "AllToAll", "SendRecv"]
