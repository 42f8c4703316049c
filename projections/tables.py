"""Where every view is stored: its documents and its tracking row.

A view's tracking row (one per view name) holds the last log position
folded in, the fold's version and the view's generation, drawn afresh
whenever the view starts from empty. The documents are filed under that
generation, not the view's name: a rebuild fills a new generation beside
the serving one, and swapping it in renames one tracking row instead of
every document. Documents and tracking position are written in one
transaction, and the tracking row is advanced only from the position and
generation its writer read (a compare-and-set). The statements are the
log backend's (turnlog.store.log_tables.LogTables).
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from typing import Any, NamedTuple

import msgspec

from turnlog.store.backend import ViewWrite
from turnlog.store.log import Store
from turnlog.store.log_tables import OLD_ROWS_TABLE, TRACKING_TABLE

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
    """A log's views, stored in its database (the SQL is its backend's)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._backend = store.backend
        self._tables = tables = store.backend.tables
        self.docs = tables.docs
        self.tracking = tables.tracking
        with store.transaction() as cursor:
            tables.create_view_tables(cursor)
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
                    self._tables.add_view_generation(cursor)
            except Exception:
                if "generation" not in self._columns(TRACKING_TABLE):
                    raise
        if self._columns(OLD_ROWS_TABLE):
            with self.store.transaction() as cursor:
                self._tables.drop_old_view_rows(cursor)

    def tracking_of(self, view: str) -> tuple[int, int] | None:
        """(position, version) of ``view``, or None if it was never built."""
        tracking = self.tracking_row(view)
        return None if tracking is None else (tracking.position, tracking.version)

    def tracking_row(self, view: str) -> Tracking | None:
        """The tracking row of ``view``, or None if it was never built."""
        with self.store.reading() as cursor:
            row = self._tables.tracking_row(cursor, view)
        return None if row is None else Tracking(*row)

    def reset(self, view: str, version: int) -> int:
        """Empties ``view``, sets its tracking to the log's start and draws a
        new generation for it (returned)."""
        generation = secrets.randbelow(2**62) + 1
        with self.store.transaction() as cursor:
            self._tables.delete_view(cursor, view)
            self._tables.insert_tracking(cursor, view, version, generation)
        return generation

    def drop(self, view: str) -> None:
        """Removes ``view``: its documents and its tracking row."""
        with self.store.transaction() as cursor:
            self._tables.delete_view(cursor, view)

    def swap(self, green: str, blue: str) -> None:
        """Makes view ``green`` serve as ``blue``, in one transaction.

        ``blue``'s documents go; ``green``'s stay where they are, under
        their generation, which the renamed tracking row now names.
        """
        with self.store.transaction() as cursor:
            self._tables.delete_view(cursor, blue)
            self._tables.rename_view(cursor, green, blue)

    def get(self, view: str, part: str, position: int) -> Any:
        """One document (as JSON decodes it), or None."""
        with self.store.reading() as cursor:
            doc = self._tables.document(cursor, view, part, position)
        return None if doc is None else _decoder.decode(doc)

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
        with self.store.reading() as cursor:
            return self._tables.documents(
                cursor,
                view,
                part,
                from_position=from_position,
                before=before,
                limit=limit,
                newest_first=newest_first,
            )

    def parts(self, view: str) -> list[str]:
        """Every part (session id) of ``view``."""
        with self.store.reading() as cursor:
            return self._tables.parts(cursor, view)

    def commit(self, advances: Sequence[ViewAdvance]) -> None:
        """Writes every view's documents and moves its tracking row, at once.

        One transaction for all of a batch's views: on SQLite each commit
        waits for the disk, and views folded from the same read of the log
        stay at the same position. The backend runs it (on PostgreSQL in
        one round trip).
        """
        writes = [
            ViewWrite(
                view,
                from_position,
                to_position,
                generation,
                list(documents),
                [_encoder.encode(doc) for doc in documents.values()],
            )
            for view, documents, from_position, to_position, generation in advances
        ]
        moved = self.store.write_views(writes)
        if moved is not None:
            raise TrackingMovedError(moved)
