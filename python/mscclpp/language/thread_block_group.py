# SPDX-License-Identifier: MIT
"""Thread block groups: several thread blocks sharing one operation, each
taking its slice of the data (the plan's ``tbg_info``)."""

from __future__ import annotations

from typing import Dict, List

from .types import DSLError


class ThreadBlockGroup:
    """The thread blocks ``tb_list``, in order; thread block ``tb_list[i]``
    does slice i of every operation given to the group."""

    def __init__(self, tb_list: List[int]) -> None:
        if not isinstance(tb_list, (list, tuple)) or not tb_list:
            raise DSLError(f"a thread block group needs a non-empty list of thread blocks, not {tb_list!r}")
        self.tb_list: List[int] = list(tb_list)
        self._index: Dict[int, int] = {}
        for i, tb in enumerate(self.tb_list):
            if isinstance(tb, bool) or not isinstance(tb, int) or tb < 0:
                raise DSLError(f"thread block {tb!r} (at {i} in the group) is not a non-negative integer")
            if tb in self._index:
                raise DSLError(f"thread block {tb} appears twice in the group (at {self._index[tb]} and {i})")
            self._index[tb] = i

    def get_internal_id(self, tb: int) -> int:
        """Position of thread block ``tb`` in the group."""
        if tb not in self._index:
            raise DSLError(f"thread block {tb} is not in the group {self.tb_list}")
        return self._index[tb]

    def numtb(self) -> int:
        return len(self.tb_list)


__all__ = ["ThreadBlockGroup"]
