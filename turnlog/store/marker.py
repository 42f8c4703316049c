"""The mark that says a database is a turnlog log, and of which storage version.

The store marks its database with a ``turnlog_meta`` table holding the
storage version, so that a database of something else, or one written by a
newer turnlog, is refused with a clear error before anything is written.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any, Protocol

from turnlog.domain.errors import NotATurnlogStoreError
from turnlog.store.backend import LogBackend

SCHEMA_VERSION = 2
"""Version of turnlog's storage layout; raised with every breaking change.

2: view documents keyed by generation (``turnlog_view_docs``). A store of
version 1 is marked 2 when opened (its views are rebuilt from the log the
first time they are followed), so an older turnlog then refuses it rather
than serving the views it can no longer see as complete.
"""

_VERSION_KEY = "schema_version"


class MarkedLog(Protocol):
    """What the check needs of a log (``turnlog.store.log.Store`` offers it)."""

    @property
    def backend(self) -> LogBackend:
        """The log's backend."""
        ...

    @property
    def location(self) -> str:
        """The log, as its errors name it."""
        ...

    def transaction(self) -> AbstractContextManager[Any]:
        """A write transaction on the log's database."""
        ...


def check_marker(log: MarkedLog) -> None:
    """Marks a new log, upgrades an older mark, refuses a newer one."""
    tables = log.backend.tables
    with log.transaction() as cursor:
        tables.create_meta_table(cursor)
        found = tables.read_meta(cursor, _VERSION_KEY)
        if found is None:
            tables.insert_meta(cursor, _VERSION_KEY, str(SCHEMA_VERSION))
            return
        version = int(found)
        if version < SCHEMA_VERSION:
            tables.update_meta(cursor, _VERSION_KEY, str(SCHEMA_VERSION))
            return
    if version > SCHEMA_VERSION:
        msg = (
            f"the log at {log.location} was written by a newer turnlog "
            f"(storage version {version}; this turnlog reads up to "
            f"{SCHEMA_VERSION}); upgrade turnlog to open it"
        )
        raise NotATurnlogStoreError(msg)
