"""The mark that says a database is a turnlog log, and of which storage version.

The store marks its database with a ``turnlog_meta`` table holding the
storage version, so that a database of something else, or one written by a
newer turnlog, is refused with a clear error before anything is written.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from turnlog.domain.errors import NotATurnlogStoreError
from turnlog.store.opening import META_TABLE

if TYPE_CHECKING:
    from turnlog.store.log import Store

SCHEMA_VERSION = 2
"""Version of turnlog's storage layout; raised with every breaking change.

2: view documents keyed by generation (``turnlog_view_docs``). A store of
version 1 is marked 2 when opened (its views are rebuilt from the log the
first time they are followed), so an older turnlog then refuses it rather
than serving the views it can no longer see as complete.
"""


def check_marker(store: Store) -> None:
    """Marks a new log, upgrades an older mark, refuses a newer one."""
    table = store.backend.qualify(META_TABLE)
    create = (
        f"CREATE TABLE IF NOT EXISTS {table} "
        "(key TEXT PRIMARY KEY, value TEXT NOT NULL)"
    )
    with store.transaction() as cursor:
        cursor.execute(create)
        cursor.execute(
            store.sql(f"SELECT value FROM {table} WHERE key = ?"),
            ("schema_version",),
        )
        row = cursor.fetchone()
        if row is None:
            cursor.execute(
                store.sql(f"INSERT INTO {table} VALUES (?, ?)"),
                ("schema_version", str(SCHEMA_VERSION)),
            )
            return
        version = int(row[0] if not isinstance(row, dict) else row["value"])
        if version < SCHEMA_VERSION:
            cursor.execute(
                store.sql(f"UPDATE {table} SET value = ? WHERE key = ?"),
                (str(SCHEMA_VERSION), "schema_version"),
            )
            return
    if version > SCHEMA_VERSION:
        msg = (
            f"the log at {store.location} was written by a newer turnlog "
            f"(storage version {version}; this turnlog reads up to "
            f"{SCHEMA_VERSION}); upgrade turnlog to open it"
        )
        raise NotATurnlogStoreError(msg)
