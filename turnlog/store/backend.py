"""What differs between the log's backends, as one interface.

Each backend's recorder (``turnlog.store.sqlite.SQLiteLogRecorder``,
``turnlog.store.postgres.PostgresLogRecorder``) owns its SQL and offers
these members, so the store, the leases and the view tables never ask
which backend they have.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class LogBackend(Protocol):
    """The dialect of one backend: names, placeholders, and its few statements."""

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

    def aggregate_key(self, aggregate_id: uuid.UUID) -> Any:
        """How the events table stores an aggregate id."""
        ...

    def where_in(self, column: str, values: Sequence[Any]) -> tuple[str, Any]:
        """A condition that ``column`` is one of ``values``, and its parameters."""
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
