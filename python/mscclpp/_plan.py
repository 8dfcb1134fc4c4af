# SPDX-License-Identifier: MIT
"""Execution plans: collective algorithms as data (include/mscclpp/plan.h).

A :class:`Plan` is a JSON execution plan in MSCCL++'s format, loaded and
validated by the library: from a file (:meth:`Plan.load`), from JSON text or
a parsed dict, or straight from a program of :mod:`mscclpp.language`
(:meth:`Plan.from_json`). Communicators register plans (their matching
collective calls then run them) or run one explicitly
(:meth:`mscclpp.Communicator.execute_plan`).
"""

from __future__ import annotations

import json
import os
from ctypes import byref, c_void_p, sizeof
from typing import Any, NamedTuple, Optional, Union

from . import _lib
from ._errors import InvalidUsageError, Status
from ._lib import PlanInfoStruct, call


class PlanInfo(NamedTuple):
    """What a plan is (``mscclppPlanGetInfo``)."""

    name: str
    collective: str  # "allreduce", "allgather", "reducescatter" or "alltoall"
    protocol: str  # "Simple" or "LL"
    nranks: int
    inplace: bool
    min_message_bytes: int  # the sizes it accepts: the input's bytes (the output's for allgather)
    max_message_bytes: int
    threadblocks: int
    threads_per_block: int
    chunks_per_block: int


def info_of(handle: c_void_p) -> PlanInfo:
    """The :class:`PlanInfo` of a plan handle (the strings copied out)."""
    s = PlanInfoStruct()
    s.structSize = sizeof(PlanInfoStruct)
    call("mscclppPlanGetInfo", handle, byref(s))
    text = [(v or b"").decode("utf-8", errors="replace") for v in (s.name, s.collective, s.protocol)]
    return PlanInfo(
        text[0],
        text[1],
        text[2],
        s.nranks,
        bool(s.inplace),
        s.minMessageBytes,
        s.maxMessageBytes,
        s.threadblocks,
        s.threadsPerBlock,
        s.chunksPerBlock,
    )


class Plan:
    """One loaded execution plan (``mscclppPlan_t``).

    Loading validates everything (the JSON, every field, every operation and
    its operands, channels, ranks): a bad plan raises
    :class:`mscclpp.InvalidArgumentError` whose message names the JSON path
    and the value. Loading needs no communicator; any rank may load at any
    time. Communicators that register a plan keep their own reference, so a
    Plan may be closed (or collected) once it is registered.
    """

    __slots__ = ("_h", "_info")

    def __init__(self, handle: c_void_p) -> None:
        self._h: Optional[c_void_p] = handle
        self._info = info_of(handle)

    @classmethod
    def load(cls, path: Union[str, "os.PathLike[str]"]) -> "Plan":
        """``mscclppPlanLoadFile``: the plan in the JSON file ``path``."""
        path = os.fspath(path)
        if not isinstance(path, str):
            raise TypeError(f"path: expected a str or os.PathLike, got {type(path).__name__}")
        h = c_void_p()
        call("mscclppPlanLoadFile", path.encode(), byref(h))
        return cls(h)

    @classmethod
    def from_json(cls, plan: Any) -> "Plan":
        """``mscclppPlanLoadString``: a plan from JSON text (``str`` or
        ``bytes``), from the ``dict`` that ``json.load`` makes of one, or
        from an object with ``to_json()`` (a :mod:`mscclpp.language`
        program), without a file."""
        if isinstance(plan, (bytes, bytearray, memoryview)):
            text = bytes(plan)
        elif isinstance(plan, str):
            text = plan.encode()
        elif isinstance(plan, dict):
            text = json.dumps(plan).encode()
        elif callable(getattr(plan, "to_json", None)):
            made = plan.to_json()
            if not isinstance(made, str):
                raise TypeError(f"plan.to_json() returned a {type(made).__name__}, not JSON text")
            text = made.encode()
        else:
            raise TypeError(
                f"plan: expected JSON text (str or bytes), a dict, or a program with to_json(), got "
                f"{type(plan).__name__}"
            )
        h = c_void_p()
        call("mscclppPlanLoadString", text, len(text), byref(h))
        return cls(h)

    def _handle(self) -> c_void_p:
        h = self._h
        if h is None:
            raise InvalidUsageError(Status.INVALID_USAGE, f"execution plan {self._info.name} was closed")
        return h

    @property
    def info(self) -> PlanInfo:
        """Its name, collective, protocol, rank count, in-place form, message
        size range and shape."""
        return self._info

    @property
    def name(self) -> str:
        return self._info.name

    @property
    def collective(self) -> str:
        return self._info.collective

    @property
    def nranks(self) -> int:
        return self._info.nranks

    @property
    def inplace(self) -> bool:
        return self._info.inplace

    @property
    def closed(self) -> bool:
        return self._h is None

    def close(self) -> None:
        """``mscclppPlanDestroy``: drop this handle (communicators that
        registered the plan keep theirs). A second call does nothing."""
        h, self._h = self._h, None
        if h is not None:
            call("mscclppPlanDestroy", h)

    def __enter__(self) -> "Plan":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        # a local reference count, no peers involved: safe to leave to the collector
        h = getattr(self, "_h", None)
        if h is not None:
            self._h = None
            try:
                _lib.lib().mscclppPlanDestroy(h)
            except Exception:  # noqa: BLE001 - interpreter shutdown
                pass

    def __repr__(self) -> str:
        i = self._info
        form = "in-place" if i.inplace else "out-of-place"
        state = " closed" if self.closed else ""
        return (
            f"<mscclpp.Plan {i.name}: {i.collective}, {i.protocol}, {i.nranks} ranks, {form}, "
            f"{i.min_message_bytes}-{i.max_message_bytes} bytes{state}>"
        )


__all__ = ["Plan", "PlanInfo"]
