"""What differs between the log's backends, as one interface.

Each backend's recorder (``turnlog.store.sqlite.SQLiteLogRecorder``,
``turnlog.store.postgres.PostgresLogRecorder``) owns its SQL and offers
the members of :class:`LogBackend`, so the store, the leases, the view
tables and the service never ask which backend they have. The
statements both backends run alike are written once, in
turnlog.store.log_tables. No SQL lives outside these modules and the
recorders'.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, Protocol, runtime_checkable

from turnlog.store.log_tables import Dialect, LogTables


class ViewWrite(NamedTuple):
    """One view's part of a views' commit (turnlog.projections.tables).

    The view's tracking row moves from ``from_position`` to
    ``to_position`` only if it is still there, in ``generation``; its
    documents (``docs[i]`` at ``keys[i]``, a (part, position) each) are
    written under that generation, replacing older ones.
    """

    view: str
    from_position: int
    to_position: int
    generation: int
    keys: Sequence[tuple[str, int]]
    docs: Sequence[bytes]


@runtime_checkable
class LogBackend(Dialect, Protocol):
    """One backend: its dialect, and its few statements of its own."""

    def aggregate_key(self, aggregate_id: uuid.UUID) -> Any:
        """How the events table stores an aggregate id."""
        ...

    def table_columns(self, cursor: Any, table: str) -> set[str]:
        """The columns of ``table`` (empty if there is no such table)."""
        ...

    def upsert_documents(
        self,
        cursor: Any,
        table: str,
        generation: int,
        keys: Sequence[tuple[str, int]],
        docs: Sequence[bytes],
    ) -> None:
        """Writes view documents (gen, part, pos, doc), replacing older ones."""
        ...

    def write_views(self, writes: Sequence[ViewWrite]) -> str | None:
        """Moves every view's tracking row and writes its documents, in one
        transaction.

        Returns None once committed; if a tracking row was no longer where
        it was read (another follower moved it), writes nothing and returns
        that view's name (or names).
        """
        ...

    def create_lease_table(self) -> None:
        """Creates the lease table, or brings an older one up to date."""
        ...

    def lock_out_saves(self, cursor: Any) -> None:
        """In a transaction that moves a lease: no fenced save commits across it."""
        ...

    def listen_for_commits(
        self, wake: Callable[[], None], stopping: threading.Event
    ) -> bool:
        """Calls ``wake`` after other processes' commits until ``stopping``;
        False at once if the backend cannot hear of them."""
        ...

    def runner_lock(self) -> RunnerLock:
        """The lock whose holder keeps the log's views current."""
        ...

    @property
    def tables(self) -> LogTables:
        """The statements on turnlog's own tables, in this dialect."""
        ...


class RunnerLock(Protocol):
    """Elects the one view runner of a log (turnlog.projections.election)."""

    def acquire(self, stopping: threading.Event) -> bool:
        """Waits until held; False once ``stopping`` is set."""
        ...

    def held(self) -> bool:
        """Whether this process still holds it."""
        ...

    def release(self) -> None:
        """Gives it up."""
        ...
