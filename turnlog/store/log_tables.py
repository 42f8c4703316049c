"""The SQL of turnlog's own tables, written once for both backends.

The statements both backends run alike (the storage mark, the views'
tables, the service's session owners, raw reads of the events table) are
written here with ``?`` placeholders, in :class:`LogTables`, which each
backend's recorder owns and runs in its own :class:`Dialect`
(turnlog.store.backend says what else a backend offers).

Every row is read by column name, which both backends' rows support
(``sqlite3.Row``, psycopg's dict rows), and handed out as plain values.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol

from turnlog.store.fencing import LEASE_TABLE

META_TABLE = "turnlog_meta"
"""The mark of a turnlog log: (key, value) rows, the storage version."""
DOCS_TABLE = "turnlog_view_docs"
"""The views' documents: (gen, part, pos, doc)."""
TRACKING_TABLE = "turnlog_view_tracking"
"""One row per view: (view, position, version, generation)."""
OLD_ROWS_TABLE = "turnlog_view_rows"
"""Where turnlog 0.1 kept documents, keyed by view name: dropped on open
(its views are rebuilt from the log)."""
OWNERS_TABLE = "turnlog_service_sessions"
"""The service's sessions: (session_id, tenant, agent, created)."""

StoredRow = tuple[int, uuid.UUID, int, str, bytes]
"""(position, aggregate id, version, topic, stored state) of one event."""


class OwnedSession(NamedTuple):
    """A session of a tenant, and the agent (by its service name) it runs.

    A row of the service's session owners (turnlog.service.tenancy).
    """

    session_id: str
    tenant: str
    agent: str
    created: float


class Dialect(Protocol):
    """How one backend names tables and writes statements."""

    position_column: str
    """The events table's column holding a log position."""
    blob_type: str
    """The SQL type of a byte string."""
    events_table_name: str

    def qualify(self, table: str) -> str:
        """``table`` as statements must name it (in the log's schema)."""
        ...

    def sql(self, statement: str) -> str:
        """``statement``, written with ``?`` placeholders, in this dialect."""
        ...

    def where_in(self, column: str, values: Sequence[Any]) -> tuple[str, Any]:
        """A condition that ``column`` is one of ``values``, and its parameters."""
        ...


class LogTables:
    """The statements on turnlog's own tables, run in one backend's dialect.

    Written once with ``?`` placeholders; ``backend`` qualifies the table
    names and rewrites the placeholders. Each method runs in the
    transaction of the ``cursor`` it is given (``Store.transaction`` or
    ``Store.reading``), so a caller decides what commits together.
    """

    def __init__(self, backend: Dialect) -> None:
        self._backend = backend
        sql = backend.sql
        self.meta = meta = backend.qualify(META_TABLE)
        self.docs = docs = backend.qualify(DOCS_TABLE)
        self.tracking = tracking = backend.qualify(TRACKING_TABLE)
        self.owners = owners = backend.qualify(OWNERS_TABLE)
        self.generation_of = f"(SELECT generation FROM {tracking} WHERE view = ?)"
        """The generation of the view named by the next parameter."""
        generation_of = self.generation_of
        self._read_meta = sql(f"SELECT value FROM {meta} WHERE key = ?")
        self._insert_meta = sql(f"INSERT INTO {meta} (key, value) VALUES (?, ?)")
        self._update_meta = sql(f"UPDATE {meta} SET value = ? WHERE key = ?")
        self._tracking_row = sql(
            f"SELECT position, version, generation FROM {tracking} WHERE view = ?"
        )
        self._insert_tracking = sql(
            f"INSERT INTO {tracking} (view, position, version, generation) "
            "VALUES (?, ?, ?, ?)"
        )
        self._rename_view = sql(f"UPDATE {tracking} SET view = ? WHERE view = ?")
        self._delete_docs = sql(f"DELETE FROM {docs} WHERE gen = {generation_of}")
        self._delete_tracking = sql(f"DELETE FROM {tracking} WHERE view = ?")
        self._document = sql(
            f"SELECT doc FROM {docs} WHERE gen = {generation_of} "
            "AND part = ? AND pos = ?"
        )
        self._parts = sql(
            f"SELECT DISTINCT part FROM {docs} "
            f"WHERE gen = {generation_of} ORDER BY part"
        )
        # RETURNING (both backends have it) tells whether the row matched,
        # where the cursors' row counts differ.
        self._advance = sql(
            f"UPDATE {tracking} SET position = ? "
            "WHERE view = ? AND position = ? AND generation = ? RETURNING view"
        )
        self.leases = leases = backend.qualify(LEASE_TABLE)
        # A lease row already there is taken only if it is this owner's or
        # expired; either way the epoch moves on, which fences the saves of
        # whoever held it before.
        self._take_lease = sql(
            f"INSERT INTO {leases} (session_id, owner, renewed, epoch) "
            "VALUES (?, ?, ?, 1) ON CONFLICT (session_id) DO UPDATE SET "
            "owner = excluded.owner, renewed = excluded.renewed, "
            f"epoch = {leases}.epoch + 1 "
            f"WHERE {leases}.owner = excluded.owner OR {leases}.renewed < ?"
        )
        self._lease = sql(
            f"SELECT owner, epoch, renewed FROM {leases} WHERE session_id = ?"
        )
        self._take_over_lease = sql(
            f"UPDATE {leases} SET owner = ?, renewed = ?, epoch = epoch + 1 "
            "WHERE session_id = ? AND owner = ? RETURNING epoch"
        )
        self._renew_leases = sql(
            f"UPDATE {leases} SET renewed = ? WHERE owner = ? "
            "RETURNING session_id, epoch"
        )
        self._release_lease = sql(
            f"DELETE FROM {leases} WHERE session_id = ? AND owner = ? AND epoch = ?"
        )
        self._release_leases = sql(f"DELETE FROM {leases} WHERE owner = ?")
        owner_columns = "session_id, tenant, agent, created"
        self._insert_owner = sql(
            f"INSERT INTO {owners} ({owner_columns}) VALUES (?, ?, ?, ?)"
        )
        # ON CONFLICT waits for a concurrent claim of the id to commit, then
        # does nothing; a SELECT after it sees the winner's row.
        self._insert_owner_unless_taken = (
            self._insert_owner + " ON CONFLICT (session_id) DO NOTHING"
        )
        self._owner = sql(f"SELECT {owner_columns} FROM {owners} WHERE session_id = ?")
        self._tenant_owner = sql(
            f"SELECT {owner_columns} FROM {owners} WHERE session_id = ? AND tenant = ?"
        )
        self._tenant_owners = sql(
            f"SELECT {owner_columns} FROM {owners} "
            "WHERE tenant = ? ORDER BY created, session_id"
        )

    # -- the storage mark (turnlog.store.marker) ------------------------------

    def create_meta_table(self, cursor: Any) -> None:
        """Creates the table of the storage mark, if missing."""
        cursor.execute(
            f"CREATE TABLE IF NOT EXISTS {self.meta} "
            "(key TEXT PRIMARY KEY, value TEXT NOT NULL)"
        )

    def read_meta(self, cursor: Any, key: str) -> str | None:
        """The value filed under ``key``, or None."""
        cursor.execute(self._read_meta, (key,))
        row = cursor.fetchone()
        return None if row is None else str(row["value"])

    def insert_meta(self, cursor: Any, key: str, value: str) -> None:
        """Files ``value`` under a new ``key``."""
        cursor.execute(self._insert_meta, (key, value))

    def update_meta(self, cursor: Any, key: str, value: str) -> None:
        """Replaces the value filed under ``key``."""
        cursor.execute(self._update_meta, (value, key))

    # -- the events table -------------------------------------------------------

    def stored_rows(
        self, cursor: Any, column: str, values: Sequence[Any]
    ) -> list[StoredRow]:
        """Stored events whose ``column`` is one of ``values``, as plain tuples."""
        backend = self._backend
        condition, params = backend.where_in(column, values)
        cursor.execute(
            f"SELECT {backend.position_column} AS position, originator_id, "
            "originator_version, topic, state FROM "
            f"{backend.qualify(backend.events_table_name)} WHERE {condition}",
            params,
        )
        return _plain_rows(cursor.fetchall())

    def stored_before(
        self, cursor: Any, aggregate: Any, position: int, limit: int
    ) -> list[StoredRow]:
        """Up to ``limit`` stored events of one aggregate before a log
        position, newest first (its index is read from the newest down)."""
        backend = self._backend
        condition, params = backend.where_in("originator_id", [aggregate])
        column = backend.position_column
        cursor.execute(
            f"SELECT {column} AS position, originator_id, originator_version, "
            f"topic, state FROM {backend.qualify(backend.events_table_name)} "
            f"WHERE {condition} AND {column} < {backend.sql('?')} "
            f"ORDER BY originator_version DESC LIMIT {int(limit)}",
            [*params, position],
        )
        return _plain_rows(cursor.fetchall())

    # -- the views' tables (turnlog.projections.tables) --------------------------

    def create_view_tables(self, cursor: Any) -> None:
        """Creates the documents and tracking tables, if missing."""
        cursor.execute(
            f"CREATE TABLE IF NOT EXISTS {self.docs} (gen BIGINT NOT NULL, "
            "part TEXT NOT NULL, pos BIGINT NOT NULL, "
            f"doc {self._backend.blob_type} NOT NULL, PRIMARY KEY (gen, part, pos))"
        )
        cursor.execute(
            f"CREATE TABLE IF NOT EXISTS {self.tracking} (view TEXT PRIMARY KEY, "
            "position BIGINT NOT NULL, version INTEGER NOT NULL, "
            "generation BIGINT NOT NULL DEFAULT 0)"
        )

    def add_view_generation(self, cursor: Any) -> None:
        """Adds ``generation`` to a tracking table of turnlog 0.1."""
        cursor.execute(
            f"ALTER TABLE {self.tracking} ADD COLUMN generation "
            "BIGINT NOT NULL DEFAULT 0"
        )

    def drop_old_view_rows(self, cursor: Any) -> None:
        """Drops turnlog 0.1's documents, and every view with them."""
        cursor.execute(f"DROP TABLE IF EXISTS {self._backend.qualify(OLD_ROWS_TABLE)}")
        cursor.execute(f"DELETE FROM {self.tracking}")
        # Views another process began here after its own upgrade are
        # started again too: no generation is left to name them.
        cursor.execute(f"DELETE FROM {self.docs}")

    def tracking_row(self, cursor: Any, view: str) -> tuple[int, int, int] | None:
        """(position, version, generation) of ``view``, or None."""
        cursor.execute(self._tracking_row, (view,))
        row = cursor.fetchone()
        if row is None:
            return None
        return int(row["position"]), int(row["version"]), int(row["generation"])

    def insert_tracking(
        self, cursor: Any, view: str, version: int, generation: int
    ) -> None:
        """Starts ``view``'s tracking row at the log's start."""
        cursor.execute(self._insert_tracking, (view, 0, version, generation))

    def rename_view(self, cursor: Any, old: str, new: str) -> None:
        """Files the tracking row of view ``old`` under ``new``."""
        cursor.execute(self._rename_view, (new, old))

    def delete_view(self, cursor: Any, view: str) -> None:
        """Deletes ``view``'s documents and its tracking row."""
        cursor.execute(self._delete_docs, (view,))
        cursor.execute(self._delete_tracking, (view,))

    def document(
        self, cursor: Any, view: str, part: str, position: int
    ) -> bytes | None:
        """One document's raw bytes, or None."""
        cursor.execute(self._document, (view, part, position))
        row = cursor.fetchone()
        return None if row is None else bytes(row["doc"])

    def documents(
        self,
        cursor: Any,
        view: str,
        part: str,
        *,
        from_position: int,
        before: int | None,
        limit: int | None,
        newest_first: bool,
    ) -> list[tuple[int, bytes]]:
        """(position, raw doc) of a part's documents in a position range."""
        statement = (
            f"SELECT pos, doc FROM {self.docs} WHERE gen = {self.generation_of} "
            "AND part = ? AND pos >= ?"
        )
        params: list[Any] = [view, part, from_position]
        if before is not None:
            statement += " AND pos < ?"
            params.append(before)
        statement += " ORDER BY pos " + ("DESC" if newest_first else "ASC")
        if limit is not None:
            statement += " LIMIT ?"
            params.append(limit)
        cursor.execute(self._backend.sql(statement), params)
        return [(int(row["pos"]), bytes(row["doc"])) for row in cursor.fetchall()]

    def parts(self, cursor: Any, view: str) -> list[str]:
        """Every part of ``view``, in order."""
        cursor.execute(self._parts, (view,))
        return [str(row["part"]) for row in cursor.fetchall()]

    def advance_tracking(
        self,
        cursor: Any,
        view: str,
        from_position: int,
        to_position: int,
        generation: int,
    ) -> bool:
        """Moves ``view`` to ``to_position`` if it is still where it was read;
        whether it was."""
        cursor.execute(self._advance, (to_position, view, from_position, generation))
        return cursor.fetchone() is not None

    # -- leases on sessions (turnlog.store.ownership) ----------------------------

    def take_lease(
        self, cursor: Any, session_id: str, owner: str, now: float, expired: float
    ) -> tuple[str, int, float]:
        """Leases ``session_id`` to ``owner`` unless another holds it, renewed
        after ``expired``; (holder, epoch, last renewal) of the lease row after."""
        cursor.execute(self._take_lease, (session_id, owner, now, expired))
        cursor.execute(self._lease, (session_id,))
        row = cursor.fetchone()
        return str(row["owner"]), int(row["epoch"]), float(row["renewed"])

    def take_over_lease(
        self, cursor: Any, session_id: str, owner: str, now: float, holder: str
    ) -> int | None:
        """Moves ``holder``'s lease to ``owner``; its new epoch, or None if
        ``holder`` no longer holds it."""
        cursor.execute(self._take_over_lease, (owner, now, session_id, holder))
        row = cursor.fetchone()
        return None if row is None else int(row["epoch"])

    def renew_leases(self, cursor: Any, owner: str, now: float) -> set[tuple[str, int]]:
        """Renews every lease of ``owner``; (session id, epoch) of each."""
        cursor.execute(self._renew_leases, (now, owner))
        return {
            (str(row["session_id"]), int(row["epoch"])) for row in cursor.fetchall()
        }

    def release_lease(
        self, cursor: Any, session_id: str, owner: str, epoch: int
    ) -> None:
        """Deletes the lease row if it still names ``owner`` and ``epoch``."""
        cursor.execute(self._release_lease, (session_id, owner, epoch))

    def release_leases(self, cursor: Any, owner: str) -> None:
        """Deletes every lease row of ``owner``."""
        cursor.execute(self._release_leases, (owner,))

    # -- the service's session owners (turnlog.service.tenancy) ------------------

    def create_owner_table(self, cursor: Any) -> None:
        """Creates the table of the service's session owners, if missing."""
        cursor.execute(
            f"CREATE TABLE IF NOT EXISTS {self.owners} ("
            "session_id TEXT PRIMARY KEY, tenant TEXT NOT NULL, "
            "agent TEXT NOT NULL, created DOUBLE PRECISION NOT NULL)"
        )

    def insert_owner(self, cursor: Any, owner: OwnedSession) -> None:
        """Records a session's owner; raises if the id is taken."""
        cursor.execute(self._insert_owner, tuple(owner))

    def insert_owner_unless_taken(
        self, cursor: Any, owner: OwnedSession
    ) -> OwnedSession:
        """Records a session's owner unless the id is taken; the owner either way."""
        cursor.execute(self._insert_owner_unless_taken, tuple(owner))
        cursor.execute(self._owner, (owner.session_id,))
        return _owner(cursor.fetchone())

    def owner(self, cursor: Any, session_id: str, tenant: str) -> OwnedSession | None:
        """The owner row of ``session_id`` if ``tenant`` owns it, else None."""
        cursor.execute(self._tenant_owner, (session_id, tenant))
        row = cursor.fetchone()
        return None if row is None else _owner(row)

    def owned_by(self, cursor: Any, tenant: str) -> list[OwnedSession]:
        """The owner rows of ``tenant``'s sessions, oldest first."""
        cursor.execute(self._tenant_owners, (tenant,))
        return [_owner(row) for row in cursor.fetchall()]


def _owner(row: Any) -> OwnedSession:
    return OwnedSession(
        str(row["session_id"]),
        str(row["tenant"]),
        str(row["agent"]),
        float(row["created"]),
    )


def _plain_rows(fetched: Sequence[Any]) -> list[StoredRow]:
    """Fetched event rows as plain (position, id, version, topic, state)."""
    out = []
    for row in fetched:
        originator = row["originator_id"]
        if not isinstance(originator, uuid.UUID):  # SQLite stores hex text
            originator = uuid.UUID(originator)
        out.append(
            (
                int(row["position"]),
                originator,
                int(row["originator_version"]),
                str(row["topic"]),
                bytes(row["state"]),
            )
        )
    return out
