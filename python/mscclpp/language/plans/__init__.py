# SPDX-License-Identifier: MIT
"""The default plans: allreduce (LL one-shot, LL two-shot, Simple rsag),
allgather, reduce-scatter and all-to-all (LL one-shot, Simple direct), for
2 to 8 ranks of one node, in place and out of place, each with the message
sizes it is meant for. ``python3 -m mscclpp.language.generate DIR`` writes
them all; the repository keeps them in plans/default/.

A plan's file is ``<collective>-<algo>[_inplace]-<N>ranks-<protocol>.json``
and its "name" is the file name without ".json". For one collective, rank
count and in-place form, the size ranges do not overlap and cover every
size, so exactly one plan takes each call.
"""

from __future__ import annotations

from typing import Callable, List, NamedTuple

from ..program import CollectiveProgram
from . import allgather, allreduce, alltoall, reducescatter
from ._common import MAX_SIZE, ll_max_bytes

RANKS = range(2, 9)
TWOSHOT_MAX_BYTES = 512 << 10  # built-in packet2's reach (coll/select.c)

Builder = Callable[[str, int, bool, int, int], CollectiveProgram]


class DefaultPlan(NamedTuple):
    collective: str
    algo: str
    protocol: str
    nranks: int
    inplace: bool
    min_size: int  # bytes: of input (of output for allgather), both included
    max_size: int
    build: Builder

    @property
    def name(self) -> str:
        algo = self.algo + ("_inplace" if self.inplace else "")
        return f"{self.collective}-{algo}-{self.nranks}ranks-{self.protocol}"

    @property
    def file_name(self) -> str:
        return self.name + ".json"

    def program(self) -> CollectiveProgram:
        return self.build(self.name, self.nranks, self.inplace, self.min_size, self.max_size)


def default_plans() -> List[DefaultPlan]:
    out: List[DefaultPlan] = []
    for n in RANKS:
        ll = ll_max_bytes(n)
        for inplace in (False, True):
            out.append(DefaultPlan("allreduce", "oneshot", "LL", n, inplace, 0, ll, allreduce.oneshot))
            if n >= 3:
                out.append(DefaultPlan("allreduce", "twoshot", "LL", n, inplace, ll + 1, TWOSHOT_MAX_BYTES,
                                       allreduce.twoshot))
            out.append(DefaultPlan("allreduce", "rsag", "Simple", n, inplace, max(ll, TWOSHOT_MAX_BYTES) + 1, MAX_SIZE,
                                   allreduce.rsag))
            for coll, mod in (("allgather", allgather), ("reducescatter", reducescatter), ("alltoall", alltoall)):
                out.append(DefaultPlan(coll, "oneshot", "LL", n, inplace, 0, ll, mod.oneshot))
                out.append(DefaultPlan(coll, "direct", "Simple", n, inplace, ll + 1, MAX_SIZE, mod.direct))
    return out


__all__ = ["DefaultPlan", "default_plans", "RANKS"]
