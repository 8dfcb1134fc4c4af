# SPDX-License-Identifier: MIT
"""JSON(): the plan of the program being written."""

from __future__ import annotations

from ._context import get_program


def JSON() -> str:
    """The execution plan of the enclosing program, as JSON text (after
    fusion, synchronisation and replication; the program is then final)."""
    return get_program().to_json()


__all__ = ["JSON"]
