"""Python 3.13's warning for an SQLite connection never closed, on 3.11 and 3.12.

From 3.13, sqlite3 warns (``ResourceWarning``) when a connection is
collected without ``close()``: its file stayed open until the collector
came by. The suite turns warnings into errors, so on 3.13 a test that leaks
one, or runs library code that does, fails. CI runs 3.11: this makes every
connection opened through ``sqlite3.connect`` there warn the same way, so a
leak fails where CI can see it.
"""

from __future__ import annotations

import sqlite3
import sys
import warnings
from typing import Any


class CheckedConnection(sqlite3.Connection):
    """A connection that warns, as 3.13's do, if it is collected unclosed."""

    _open = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._open = True  # one that failed to open holds nothing

    def close(self) -> None:
        self._open = False
        super().close()

    def __del__(self) -> None:
        if self._open:
            warnings.warn(
                f"unclosed database in {self!r}", ResourceWarning, stacklevel=1
            )


def check_connections_are_closed() -> None:
    """Opens every later ``sqlite3.connect`` connection as a CheckedConnection
    (before 3.13; 3.13 and later warn by themselves)."""
    if sys.version_info >= (3, 13):
        return
    connect = sqlite3.connect

    def checked(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        kwargs.setdefault("factory", CheckedConnection)
        return connect(*args, **kwargs)

    sqlite3.connect = checked
