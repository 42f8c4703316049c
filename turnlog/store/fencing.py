"""Fenced writes: a save commits only while its process owns the session.

A lease (turnlog.store.ownership) says which runtime owns a session, but a
process can lose its lease without noticing: frozen (SIGSTOP, a long GC
pause, a suspended VM) past the lease's expiry, it wakes up and saves as
if nothing had happened while another process took the session over. So
every save of a leased session carries a :class:`Fence`, the owner and
the epoch of the lease it was given, and the recorder checks it in the
same transaction as the insert: a lease row that no longer matches
(another owner, or a later takeover) refuses the whole save with
:class:`~turnlog.domain.errors.LeaseLostError`.

Each backend's recorder owns its SQL: the SQLite one here (the write
transaction serialises the check against a takeover), the PostgreSQL one
in ``turnlog.store.fencing_postgres`` (the check runs under the events table's
lock, which a takeover takes too). Both also create the lease table.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any, NamedTuple

from eventsourcing.persistence import OperationalError, StoredEvent
from eventsourcing.sqlite import (
    SQLiteApplicationRecorder,
    SQLiteCursor,
    SQLiteDatastore,
)

from turnlog.domain.errors import LeaseLostError

LEASE_TABLE = "turnlog_session_owners"
"""The table of leases: session id, owner, last renewal, epoch."""


class Fence(NamedTuple):
    """The lease a save of one session must still hold to commit."""

    session_id: str
    owner: str
    epoch: int
    """Raised on every acquisition, so an older holder never matches again."""


def lease_lost(fence: Fence) -> LeaseLostError:
    """The error of a save refused because ``fence`` no longer holds."""
    return LeaseLostError(
        f"session {fence.session_id!r} was taken over by another process: this "
        f"one ({fence.owner}, lease epoch {fence.epoch}) no longer owns it, so "
        "nothing of this save was recorded and the session stopped here"
    )


class FencedSQLiteRecorder(SQLiteApplicationRecorder):
    """The SQLite recorder, refusing a save whose fence no longer holds."""

    def __init__(
        self, datastore: SQLiteDatastore, events_table_name: str = "stored_events"
    ):
        super().__init__(datastore, events_table_name)
        self.fence_statement = (
            f"SELECT 1 FROM {LEASE_TABLE} "
            "WHERE session_id = ? AND owner = ? AND epoch = ?"
        )

    def _insert_events(
        self,
        c: SQLiteCursor,
        stored_events: Sequence[StoredEvent],
        *,
        fence: Fence | None = None,
        **kwargs: Any,
    ) -> Sequence[int] | None:
        # The rows go in first: the transaction begins DEFERRED, and a read
        # before the first write could not upgrade to the write lock once
        # another connection had committed. After the insert this one holds
        # the write lock, so no takeover can commit before it does.
        if fence is None:
            return super()._insert_events(c, stored_events, **kwargs)
        try:
            ids = super()._insert_events(c, stored_events, **kwargs)
        except sqlite3.IntegrityError:
            self._check(c, fence)  # a clash with a new owner: name the lost lease
            raise
        self._check(c, fence)
        return ids

    def _check(self, c: SQLiteCursor, fence: Fence) -> None:
        c.execute(self.fence_statement, fence)
        if c.fetchone() is None:
            raise lease_lost(fence)

    def lock_out_saves(self, cursor: SQLiteCursor) -> None:
        """Nothing to do: a takeover's write transaction already excludes saves."""

    def create_lease_table(self) -> None:
        """Creates the lease table, or adds the epoch column to an older one."""
        with self.datastore.transaction(commit=True) as c:
            c.execute(
                f"CREATE TABLE IF NOT EXISTS {LEASE_TABLE} ("
                "session_id TEXT PRIMARY KEY, owner TEXT NOT NULL, "
                "renewed DOUBLE PRECISION NOT NULL, "
                "epoch INTEGER NOT NULL DEFAULT 0)"
            )
            c.execute(f"PRAGMA table_info({LEASE_TABLE})")
            if "epoch" in {row["name"] for row in c.fetchall()}:
                return
        try:
            with self.datastore.transaction(commit=True) as c:
                c.execute(
                    f"ALTER TABLE {LEASE_TABLE} "
                    "ADD COLUMN epoch INTEGER NOT NULL DEFAULT 0"
                )
        except OperationalError as error:
            # Another process added it between the check and here.
            if "duplicate column" not in str(error):
                raise
