# SPDX-License-Identifier: MIT
"""Status codes of the C library and the exceptions that carry them."""

from __future__ import annotations

import enum
from typing import Any, Dict, Optional, Tuple, Type


class Status(enum.IntEnum):
    """``mscclppResult_t`` (include/mscclpp/core.h), value for value."""

    SUCCESS = 0
    UNHANDLED_CUDA_ERROR = 1
    SYSTEM_ERROR = 2
    INTERNAL_ERROR = 3
    INVALID_ARGUMENT = 4
    INVALID_USAGE = 5
    REMOTE_ERROR = 6
    IN_PROGRESS = 7
    TIMEOUT = 8
    ABORTED = 9


class MscclppError(Exception):
    """A call of the C library failed.

    Attributes:
        status: the ``mscclppResult_t`` it returned, as a :class:`Status`
            (a plain ``int`` for a value this package does not know).
        message: the reason, from ``mscclppGetLastError()`` (the library's
            fixed text for the status when it recorded none).
        function: the C function that failed, e.g. ``"mscclppAllReduce"``,
            or ``None`` for a check made by this package.

    The subclass depends on the status (:class:`InvalidArgumentError`,
    :class:`RemoteError`, ...), so ``except mscclpp.RemoteError`` catches a
    lost peer and ``except mscclpp.MscclppError`` catches every failure.
    """

    def __init__(self, status: int, message: str, function: Optional[str] = None) -> None:
        try:
            status = Status(status)
        except ValueError:
            pass
        super().__init__(status, message, function)
        self.status = status
        self.message = message
        self.function = function

    def __str__(self) -> str:
        name = self.status.name.lower() if isinstance(self.status, Status) else f"status {self.status}"
        head = f"{self.function}: " if self.function else ""
        return f"{head}{self.message} ({name})"

    def __reduce__(self) -> Tuple[Any, ...]:
        # Pickle (multiprocessing, concurrent.futures) with all three fields.
        return (type(self), (int(self.status), self.message, self.function))


class UnhandledCudaError(MscclppError):
    """A CUDA call failed (``mscclppUnhandledCudaError``)."""


class MscclppSystemError(MscclppError):
    """A system call failed: socket, memory, thread (``mscclppSystemError``)."""


class InternalError(MscclppError):
    """A bug in mscclpp (``mscclppInternalError``)."""


class InvalidArgumentError(MscclppError, ValueError):
    """The library refused an argument (``mscclppInvalidArgument``).

    Also a :class:`ValueError`, like the argument checks this package makes
    before it calls the library.
    """


class InvalidUsageError(MscclppError):
    """A call in the wrong state or not supported (``mscclppInvalidUsage``);
    also raised for any call on a destroyed :class:`~mscclpp.Communicator`."""


class RemoteError(MscclppError):
    """A peer failed, left, or sent something invalid (``mscclppRemoteError``)."""


class InProgressError(MscclppError):
    """A non-blocking operation has not completed yet (``mscclppInProgress``)."""


class MscclppTimeoutError(MscclppError):
    """A bounded wait ran past ``MSCCLPP_TIMEOUT`` (``mscclppTimeout``)."""


class AbortedError(MscclppError):
    """The operation was abandoned because the communicator was aborted
    (``mscclppAborted``)."""


_CLASSES: Dict[int, Type[MscclppError]] = {
    Status.UNHANDLED_CUDA_ERROR: UnhandledCudaError,
    Status.SYSTEM_ERROR: MscclppSystemError,
    Status.INTERNAL_ERROR: InternalError,
    Status.INVALID_ARGUMENT: InvalidArgumentError,
    Status.INVALID_USAGE: InvalidUsageError,
    Status.REMOTE_ERROR: RemoteError,
    Status.IN_PROGRESS: InProgressError,
    Status.TIMEOUT: MscclppTimeoutError,
    Status.ABORTED: AbortedError,
}


def error_class(status: int) -> Type[MscclppError]:
    """The exception class raised for ``status`` (MscclppError when unknown)."""
    return _CLASSES.get(int(status), MscclppError)


def make_error(status: int, message: str, function: Optional[str] = None) -> MscclppError:
    """An exception of the right class for ``status``."""
    return error_class(status)(status, message, function)
