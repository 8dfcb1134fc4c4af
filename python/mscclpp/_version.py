# SPDX-License-Identifier: MIT
"""The package's version: the C library's, as include/mscclpp/core.h gives it.

The wheel's metadata is read from here (python/_build_backend/backend.py), and
a test compares it with MSCCLPP_MAJOR/MINOR/PATCH so that the two cannot drift.
"""

__version__ = "0.1.0"
