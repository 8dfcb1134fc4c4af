# SPDX-License-Identifier: MIT
"""Pipelines: ``with LoopIterationContext(unit, num_chunks):`` turns the
operations given inside it into one pipeline operation per thread block,
which the executor runs piece by piece (``unit`` bytes at a time) over
``num_chunks`` chunks' worth of data."""

from __future__ import annotations

from typing import Dict, List, Tuple

from ._context import get_program
from ._ops import Op, PipelineOp
from .types import DSLError


class LoopIterationContext:
    def __init__(self, unit: int, num_chunks: int) -> None:
        for v, what in ((unit, "unit"), (num_chunks, "num_chunks")):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise DSLError(f"LoopIterationContext: {what} must be a positive integer, not {v!r}")
        self.unit = unit
        self.num_chunks = num_chunks
        self.operations: List[Tuple[int, int, Op]] = []

    def __enter__(self) -> "LoopIterationContext":
        get_program().set_loop_context(self)
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        prog = get_program()
        prog.set_loop_context(None)
        if exc_type is not None:
            return
        pipelines: Dict[Tuple[int, int], PipelineOp] = {}
        for rank, tb, op in self.operations:
            pipelines.setdefault((rank, tb), PipelineOp(self.unit, self.num_chunks)).ops.append(op)
        for (rank, tb), pipeline in pipelines.items():
            prog.add_pipeline(rank, tb, pipeline)

    def add_operation(self, rank: int, tb: int, op: Op) -> None:
        self.operations.append((rank, tb, op))


__all__ = ["LoopIterationContext"]
