# SPDX-License-Identifier: MIT
"""What the Python package's tests share: skips, checks, a communicator.

Each test is a script run by CTest (tests/python/CMakeLists.txt), most of them
under ``mscclpp-run -n N``, with MSCCLPP_LIBRARY naming the built library and
PYTHONPATH the package's directory. A check that fails prints what was
expected and what came, with the rank, and the script exits 1 at the end; a
missing prerequisite exits 77, which CTest shows as skipped (never passed).
"""

from __future__ import annotations

import os
import sys
import traceback
from typing import Any, Callable, Optional, Tuple, Type, Union

SKIP = 77
RANK = os.environ.get("MSCCLPP_RANK", "-")


def skip(reason: str) -> None:
    print(f"SKIPPED: {reason}", flush=True)
    sys.exit(SKIP)


def require_numpy() -> Any:
    try:
        import numpy
    except ImportError:
        skip(f"needs numpy for {sys.executable} (Debian: python3-numpy)")
    return numpy


class Checks:
    """Counts checks and failures; :meth:`done` exits with the verdict."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.count = 0
        self.failed = 0

    def fail(self, what: str) -> None:
        self.failed += 1
        print(f"FAIL [rank {RANK}] {what}", file=sys.stderr, flush=True)

    def true(self, cond: bool, what: str) -> None:
        self.count += 1
        if not cond:
            self.fail(what)

    def equal(self, got: Any, want: Any, what: str) -> None:
        self.count += 1
        if got != want:
            self.fail(f"{what}: got {got!r}, want {want!r}")

    def raises(
        self,
        exc: Union[Type[BaseException], Tuple[Type[BaseException], ...]],
        fn: Callable[..., Any],
        *args: Any,
        contains: Optional[Union[str, Tuple[str, ...]]] = None,
        what: str = "",
        **kwargs: Any,
    ) -> Optional[BaseException]:
        """fn(*args, **kwargs) must raise exc whose text contains every
        string of ``contains``; returns the exception."""
        self.count += 1
        label = what or getattr(fn, "__name__", repr(fn))
        try:
            fn(*args, **kwargs)
        except exc as e:
            text = str(e)
            wanted = (contains,) if isinstance(contains, str) else (contains or ())
            for w in wanted:
                if w not in text:
                    self.fail(f"{label}: {type(e).__name__}({text!r}) does not say {w!r}")
                    break
            return e
        except BaseException as e:  # noqa: BLE001 - any other exception is the failure we report
            self.fail(f"{label}: raised {type(e).__name__}: {e}, want {exc}\n{traceback.format_exc()}")
            return None
        self.fail(f"{label}: raised nothing, want {exc}")
        return None

    def done(self) -> None:
        verdict = "FAILED" if self.failed else "passed"
        print(f"{self.name} [rank {RANK}]: {verdict}: {self.count} checks, {self.failed} failed", flush=True)
        sys.exit(1 if self.failed else 0)
