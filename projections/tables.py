"""The SQL behind every view: its documents and its tracking row.

A view's tracking row (one per view name) holds the last log position
folded in, the fold's version and the view's generation, drawn afresh
whenever the view starts from empty. The documents are filed under that
generation, not the view's name: a rebuild fills a new generation beside
the serving one, and swapping it in renames one tracking row instead of
every document. Documents and tracking position are written in one
transaction, and the tracking row is advanced only from the position and
generation its writer read (a compare-and-set).
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from typing import Any, NamedTuple

import msgspec

from turnlog.store.log import Store

DOCS_TABLE = "turnlog_view_docs"
TRACKING_TABLE = "turnlog_view_tracking"
OLD_ROWS_TABLE = "turnlog_view_rows"
"""Where turnlog 0.1 kept documents, keyed by view name: dropped on open
(its views are rebuilt from the log)."""

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
        self._backend = store.backend
        self.docs = self._backend.qualify(DOCS_TABLE)
        self.tracking = self._backend.qualify(TRACKING_TABLE)
        self.generation_of = f"(SELECT generation FROM {self.tracking} WHERE view = ?)"
        """SQL for the generation of the view named by the next parameter
        (``?`` placeholder, as every statement here before ``store.sql``)."""
        blob = self._backend.blob_type
        with store.transaction() as cursor:
            cursor.execute(
                f"CREATE TABLE IF NOT EXISTS {self.docs} (gen BIGINT NOT NULL, "
                f"part TEXT NOT NULL, pos BIGINT NOT NULL, doc {blob} NOT NULL, "
                "PRIMARY KEY (gen, part, pos))"
            )
            cursor.execute(
                f"CREATE TABLE IF NOT EXISTS {self.tracking} (view TEXT PRIMARY KEY, "
                "position BIGINT NOT NULL, version INTEGER NOT NULL, "
                "generation BIGINT NOT NULL DEFAULT 0)"
            )
        self._upgrade()

    def _columns(self, table: str) -> set[str]:
        """The columns of ``table`` (empty if there is no such table)."""
        with self.store.reading() as cursor:
            return self._backend.table_columns(cursor, table)

    def _upgrade(self) -> None:
        """Brings view tables made by turnlog 0.1 to this layout.

        Its tracking table gains ``generation``, and its documents, filed
        by view name, are dropped with every tracking row, so each view is
        rebuilt from the log. Another process opening the same database
        may do either first.
        """
        if "generation" not in self._columns(TRACKING_TABLE):
            try:
                with self.store.transaction() as cursor:
                    cursor.execute(
                        f"ALTER TABLE {self.tracking} ADD COLUMN generation "
                        "BIGINT NOT NULL DEFAULT 0"
                    )
            except Exception:
                if "generation" not in self._columns(TRACKING_TABLE):
                    raise
        if self._columns(OLD_ROWS_TABLE):
            with self.store.transaction() as cursor:
                cursor.execute(
                    f"DROP TABLE IF EXISTS {self._backend.qualify(OLD_ROWS_TABLE)}"
                )
                cursor.execute(f"DELETE FROM {self.tracking}")
                # Views another process began here after its own upgrade
                # are started again too: no generation is left to name them.
                cursor.execute(f"DELETE FROM {self.docs}")

    def tracking_of(self, view: str) -> tuple[int, int] | None:
        """(position, version) of ``view``, or None if it was never built."""
        tracking = self.tracking_row(view)
        return None if tracking is None else (tracking.position, tracking.version)

    def tracking_row(self, view: str) -> Tracking | None:
        """The tracking row of ``view``, or None if it was never built."""
        with self.store.reading() as cursor:
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
            self._delete(cursor, view)
            cursor.execute(
                self.store.sql(
                    f"INSERT INTO {self.tracking} (view, position, version, "
                    "generation) VALUES (?, ?, ?, ?)"
                ),
                (view, 0, version, generation),
            )
        return generation

    def drop(self, view: str) -> None:
        """Removes ``view``: its documents and its tracking row."""
        with self.store.transaction() as cursor:
            self._delete(cursor, view)

    def swap(self, green: str, blue: str) -> None:
        """Makes view ``green`` serve as ``blue``, in one transaction.

        ``blue``'s documents go; ``green``'s stay where they are, under
        their generation, which the renamed tracking row now names.
        """
        with self.store.transaction() as cursor:
            self._delete(cursor, blue)
            cursor.execute(
                self.store.sql(f"UPDATE {self.tracking} SET view = ? WHERE view = ?"),
                (blue, green),
            )

    def _delete(self, cursor: Any, view: str) -> None:
        cursor.execute(
            self.store.sql(f"DELETE FROM {self.docs} WHERE gen = {self.generation_of}"),
            (view,),
        )
        cursor.execute(
            self.store.sql(f"DELETE FROM {self.tracking} WHERE view = ?"), (view,)
        )

    def get(self, view: str, part: str, position: int) -> Any:
        """One document (as JSON decodes it), or None."""
        with self.store.reading() as cursor:
            cursor.execute(
                self.store.sql(
                    f"SELECT doc FROM {self.docs} WHERE gen = {self.generation_of} "
                    "AND part = ? AND pos = ?"
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
        with self.store.reading() as cursor:
            cursor.execute(self.store.sql(statement), params)
            rows = cursor.fetchall()
        return [(int(pos), bytes(doc)) for pos, doc in map(_values, rows)]

    def parts(self, view: str) -> list[str]:
        """Every part (session id) of ``view``."""
        with self.store.reading() as cursor:
            cursor.execute(
                self.store.sql(
                    f"SELECT DISTINCT part FROM {self.docs} "
                    f"WHERE gen = {self.generation_of} ORDER BY part"
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
                    self._upsert(cursor, generation, writes)

    def _upsert(
        self, cursor: Any, generation: int, writes: dict[tuple[str, int], Any]
    ) -> None:
        docs = [_encoder.encode(doc) for doc in writes.values()]
        self._backend.upsert_documents(
            cursor, self.docs, generation, list(writes), docs
        )


def _rowcount(cursor: Any) -> int:
    inner = getattr(cursor, "sqlite_cursor", cursor)
    return int(inner.rowcount)


def _values(row: Any) -> tuple[Any, ...]:
    """A result row as a tuple (psycopg's rows here are dicts)."""
    return tuple(row.values()) if isinstance(row, dict) else tuple(row)
