"""Fewer malloc arenas for the service's long-lived process.

glibc's malloc gives a thread that finds the heap busy an arena of its
own, up to eight per core, and memory freed into an arena mostly stays
with the process. The service's threads come and go with its sessions
(actors, tool runs, connections), so over hours its resident memory
crept up with every arena's scattered free space although the objects
it holds stayed flat: a 30-minute ``bench/soak.py`` grew 8.7% over its
last 20 minutes with glibc's default and about 2% with two arenas (the
figures are in bench/RESULTS.md). Two arenas still let two threads
allocate at once, which is all the GIL leaves room for.

A library cannot make this choice for the process it is embedded in;
``turnlog serve`` owns its process and makes it at start, before any
thread exists. An operator's own ``MALLOC_ARENA_MAX`` wins.
"""

from __future__ import annotations

import ctypes
import os
import sys

SERVICE_ARENAS = 2
"""Arenas the service's process may have."""

_M_ARENA_MAX = -8
"""glibc's ``mallopt`` parameter number for the arena limit (malloc.h)."""


def limit_malloc_arenas(arenas: int = SERVICE_ARENAS) -> bool:
    """Limits this process to ``arenas`` malloc arenas, where glibc allows.

    Returns whether the limit was set: not where the operator set
    ``MALLOC_ARENA_MAX`` (glibc already follows it), nor off Linux, nor
    where the C library has no ``mallopt`` (musl's does nothing).
    """
    if os.environ.get("MALLOC_ARENA_MAX") or not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_ARENA_MAX, arenas))
