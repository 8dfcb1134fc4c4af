# SPDX-License-Identifier: MIT
"""The program being written: a ``with CollectiveProgram(...)`` block sets
it, and every rank, buffer, channel and operation belongs to it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from .types import DSLError

if TYPE_CHECKING:
    from .program import CollectiveProgram

_current: Optional["CollectiveProgram"] = None


def set_program(program: Optional["CollectiveProgram"]) -> None:
    global _current
    if program is not None and _current is not None and _current is not program:
        raise DSLError(f"program {program.name!r} cannot start inside program {_current.name!r}: "
                       "programs do not nest")
    _current = program


def get_program() -> "CollectiveProgram":
    """The program of the enclosing ``with CollectiveProgram(...)`` block."""
    if _current is None:
        raise DSLError("no program: ranks, buffers, channels and operations exist only inside "
                       "'with CollectiveProgram(...):'")
    return _current
