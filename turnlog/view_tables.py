"""The SQL behind every view: its rows and its tracking row.

Every view lives in one table of the log's own database, keyed by
(view, part, position), next to a tracking row holding the last log
position folded in and the view's generation. Rows and tracking position
are written in one transaction, and the tracking row is advanced only
from the position and generation its writer read (a compare-and-set).
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from typing import Any, NamedTuple

import msgspec

from turnlog.store import Store

ROWS_TABLE = "turnlog_view_rows"
TRACKING_TABLE = "turnlog_view_tracking"

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder()


ViewAdvance = tuple[str, dict[tuple[str, int], Any], int, int, int]
"""(view, documents to write, tracking position and generation read,
position to set)."""


class Tracking(NamedTuple):
    """A view's tracking row.

    ``generation`` is drawn anew whenever the view is started from empty;
    a runner advances the row only if both position and generation are
    the ones it read, so a view swapped in by a rebuild, even at the very
    same position, is never written over from a cache of the one it
    replaced.
    """

    position: int
    version: int
    generation: int


class TrackingMovedError(Exception):
    """Another follower advanced a view first; re-read and retry."""


class ViewTables:
    """The SQL behind every view, in either backend's dialect."""

    def __init__(self, store: Store) -> None:
        self.store = store
        prefix = f"{store.datastore.schema}." if store.is_postgres else ""
        self.rows = prefix + ROWS_TABLE
        self.tracking = prefix + TRACKING_TABLE
        blob = "BYTEA" if store.is_postgres else "BLOB"
        with store.transaction() as cursor:
            cursor.execute(
                f"CREATE TABLE IF NOT EXISTS {self.rows} (view TEXT NOT NULL, "
                f"part TEXT NOT NULL, pos BIGINT NOT NULL, doc {blob} NOT NULL, "
                "PRIMARY KEY (view, part, pos))"
            )
            cursor.execute(
                f"CREATE TABLE IF NOT EXISTS {self.tracking} (view TEXT PRIMARY KEY, "
                "position BIGINT NOT NULL, version INTEGER NOT NULL, "
                "generation BIGINT NOT NULL DEFAULT 0)"
            )
        self._add_generation_column()

    def _tracking_columns(self) -> set[str]:
        with self.store.datastore.transaction(commit=False) as cursor:
            if self.store.is_postgres:
                cursor.execute(
                    "SELECT column_name FROM information_schema.columns "
                    "WHERE table_schema = %s AND table_name = %s",
                    (self.store.datastore.schema, TRACKING_TABLE),
                )
                return {str(_values(row)[0]) for row in cursor.fetchall()}
            cursor.execute(f"PRAGMA table_info({TRACKING_TABLE})")
            return {str(_values(row)[1]) for row in cursor.fetchall()}

    def _add_generation_column(self) -> None:
        """Adds ``generation`` to a tracking table made by an earlier turnlog.

        Its rows get generation 0, a value ``reset`` never draws.
        """
        if "generation" in self._tracking_columns():
            return
        try:
            with self.store.transaction() as cursor:
                cursor.execute(
                    f"ALTER TABLE {self.tracking} ADD COLUMN generation "
                    "BIGINT NOT NULL DEFAULT 0"
                )
        except Exception:
            # Another process opening the same database added it first.
            if "generation" not in self._tracking_columns():
                raise

    def tracking_of(self, view: str) -> tuple[int, int] | None:
        """(position, version) of ``view``, or None if it was never built."""
        tracking = self.tracking_row(view)
        return None if tracking is None else (tracking.position, tracking.version)

    def tracking_row(self, view: str) -> Tracking | None:
        """The tracking row of ``view``, or None if it was never built."""
        with self.store.datastore.transaction(commit=False) as cursor:
            cursor.execute(
                self.store.sql(
                    f"SELECT position, version, generation FROM {self.tracking} "
                    "WHERE view = ?"
                ),
                (view,),
            )
            row = cursor.fetchone()
        if row is None:
            return None
        position, version, generation = _values(row)
        return Tracking(int(position), int(version), int(generation))

    def reset(self, view: str, version: int) -> int:
        """Empties ``view``, sets its tracking to the log's start and draws a
        new generation for it (returned)."""
        generation = secrets.randbelow(2**62) + 1
        with self.store.transaction() as cursor:
            cursor.execute(
                self.store.sql(f"DELETE FROM {self.rows} WHERE view = ?"), (view,)
            )
            cursor.execute(
                self.store.sql(f"DELETE FROM {self.tracking} WHERE view = ?"), (view,)
            )
            cursor.execute(
                self.store.sql(
                    f"INSERT INTO {self.tracking} (view, position, version, "
                    "generation) VALUES (?, ?, ?, ?)"
                ),
                (view, 0, version, generation),
            )
        return generation

    def get(self, view: str, part: str, position: int) -> Any:
        """One document (as JSON decodes it), or None."""
        with self.store.datastore.transaction(commit=False) as cursor:
            cursor.execute(
                self.store.sql(
                    f"SELECT doc FROM {self.rows} WHERE view = ? AND part = ? "
                    "AND pos = ?"
                ),
                (view, part, position),
            )
            row = cursor.fetchone()
        return None if row is None else _decoder.decode(bytes(_values(row)[0]))

    def range(
        self,
        view: str,
        part: str,
        *,
        from_position: int = 0,
        before: int | None = None,
        limit: int | None = None,
        newest_first: bool = False,
    ) -> list[tuple[int, bytes]]:
        """(position, raw doc) of a part's documents in a position range."""
        statement = (
            f"SELECT pos, doc FROM {self.rows} WHERE view = ? AND part = ? AND pos >= ?"
        )
        params: list[Any] = [view, part, from_position]
        if before is not None:
            statement += " AND pos < ?"
            params.append(before)
        statement += " ORDER BY pos " + ("DESC" if newest_first else "ASC")
        if limit is not None:
            statement += " LIMIT ?"
            params.append(limit)
        with self.store.datastore.transaction(commit=False) as cursor:
            cursor.execute(self.store.sql(statement), params)
            rows = cursor.fetchall()
        return [(int(pos), bytes(doc)) for pos, doc in map(_values, rows)]

    def parts(self, view: str) -> list[str]:
        """Every part (session id) of ``view``."""
        with self.store.datastore.transaction(commit=False) as cursor:
            cursor.execute(
                self.store.sql(
                    f"SELECT DISTINCT part FROM {self.rows} "
                    "WHERE view = ? ORDER BY part"
                ),
                (view,),
            )
            return [str(_values(row)[0]) for row in cursor.fetchall()]

    def commit(self, advances: Sequence[ViewAdvance]) -> None:
        """Writes every view's documents and moves its tracking row, at once.

        One transaction for all of a batch's views: on SQLite each commit
        waits for the disk, and views folded from the same read of the log
        stay at the same position.
        """
        advance = self.store.sql(
            f"UPDATE {self.tracking} SET position = ? "
            "WHERE view = ? AND position = ? AND generation = ?"
        )
        with self.store.transaction() as cursor:
            for view, writes, from_position, to_position, generation in advances:
                cursor.execute(advance, (to_position, view, from_position, generation))
                if _rowcount(cursor) != 1:
                    raise TrackingMovedError(view)
                if writes:
                    self._upsert(cursor, view, writes)

    def _upsert(
        self, cursor: Any, view: str, writes: dict[tuple[str, int], Any]
    ) -> None:
        conflict = "ON CONFLICT (view, part, pos) DO UPDATE SET doc = excluded.doc"
        docs = [_encoder.encode(doc) for doc in writes.values()]
        if self.store.is_postgres:
            # One statement of column arrays: psycopg adapts executemany's
            # parameters row by row in Python, twice as slow.
            cursor.execute(
                f"INSERT INTO {self.rows} SELECT %s::text, * FROM "
                f"unnest(%s::text[], %s::bigint[], %s::bytea[]) {conflict}",
                (view, [part for part, _ in writes], [pos for _, pos in writes], docs),
            )
        else:
            cursor.executemany(
                f"INSERT INTO {self.rows} VALUES (?, ?, ?, ?) {conflict}",
                [
                    (view, part, position, doc)
                    for (part, position), doc in zip(writes, docs, strict=True)
                ],
            )


def _rowcount(cursor: Any) -> int:
    inner = getattr(cursor, "sqlite_cursor", cursor)
    return int(inner.rowcount)


def _values(row: Any) -> tuple[Any, ...]:
    """A result row as a tuple (psycopg's rows here are dicts)."""
    return tuple(row.values()) if isinstance(row, dict) else tuple(row)
