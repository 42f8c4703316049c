"""How the reading commands open a log: read-only when they may not write it.

A log that can be written is opened as usual, so its views catch up and
stay caught up for the next reader. One this process may not write (a
read-only file, folder or mount) is read from a copy in memory, where the
views catch up without a byte written to the file.
"""

from __future__ import annotations

from turnlog.runtime import Runtime
from turnlog.store.log import Store
from turnlog.store.opening import sqlite_log_is_writable


def open_for_reading(url: str | None) -> Store:
    """The log ``url`` names, read-only if this process may not write it."""
    return Store(url, read_only=not sqlite_log_is_writable(url))


def runtime_for_reading(url: str | None) -> Runtime:
    """A runtime on the store :func:`open_for_reading` opens."""
    store = open_for_reading(url)
    try:
        return Runtime(store)
    except BaseException:
        store.close()
        raise
