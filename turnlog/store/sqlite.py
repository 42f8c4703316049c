"""The SQLite backend: the recorder that owns every SQLite statement turnlog runs.

eventsourcing's SQLite recorder, extended with the fence check on saves
(see turnlog.store.fencing) and the few statements where SQLite's dialect
differs from PostgreSQL's (turnlog.store.backend lists them); it runs
the statements both backends share (``LogTables``) in that dialect. No
code outside this module and turnlog.store.postgres asks which backend
it has.
"""

from __future__ import annotations

import sqlite3
import threading
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from eventsourcing.persistence import (
    IntegrityError,
    OperationalError,
    StoredEvent,
)
from eventsourcing.sqlite import (
    SQLiteApplicationRecorder,
    SQLiteCursor,
    SQLiteDatastore,
)

from turnlog.domain.errors import LeaseLostError
from turnlog.store.backend import ViewWrite
from turnlog.store.fencing import FIRST_EPOCH, LEASE_TABLE, Claim, Fence, lease_lost
from turnlog.store.group_commit import PendingSave
from turnlog.store.log_tables import LogTables
from turnlog.store.opening import memory_copy, prepare_sqlite_file
from turnlog.store.sqlite_pool import POOL_WAIT, CachingConnectionPool, WriteTransaction


class SQLiteLogRecorder(SQLiteApplicationRecorder):
    """The SQLite recorder: fenced saves, and SQLite's side of the dialect."""

    position_column = "rowid"
    blob_type = "BLOB"

    @staticmethod
    def prepare(
        env: dict[str, str], location: str, *, read_only: bool
    ) -> sqlite3.Connection | None:
        """Readies the file before the pool opens it; returns what to keep open.

        Read-only, the file is copied into memory and ``env`` is pointed at
        the copy, whose first connection must stay open as long as the copy
        is used.
        """
        del location  # an SQLite file names itself in its errors
        prepare_sqlite_file(env["SQLITE_DBNAME"], read_only=read_only)
        if not read_only:
            return None
        keep, env["SQLITE_DBNAME"] = memory_copy(Path(env["SQLITE_DBNAME"]))
        return keep

    def qualify(self, table: str) -> str:
        """``table`` as statements name it (SQLite has no schemas)."""
        return table

    def sql(self, statement: str) -> str:
        """``statement`` with ``?`` placeholders (SQLite's own style)."""
        return statement

    def aggregate_key(self, aggregate_id: uuid.UUID) -> Any:
        """How the events table stores an aggregate id (hex text here)."""
        return aggregate_id.hex

    def where_in(self, column: str, values: Sequence[Any]) -> tuple[str, Any]:
        """A ``column IN (...)`` condition and its parameters."""
        return f"{column} IN ({','.join('?' * len(values))})", list(values)

    def table_columns(self, cursor: Any, table: str) -> set[str]:
        """The columns of ``table`` (empty if there is no such table)."""
        cursor.execute(f"PRAGMA table_info({table})")
        return {str(row[1]) for row in cursor.fetchall()}

    def upsert_documents(
        self,
        cursor: Any,
        table: str,
        generation: int,
        keys: Sequence[tuple[str, int]],
        docs: Sequence[bytes],
    ) -> None:
        """Writes view documents (gen, part, pos, doc), replacing older ones."""
        cursor.executemany(
            f"INSERT INTO {table} VALUES (?, ?, ?, ?) ON CONFLICT (gen, part, pos) "
            "DO UPDATE SET doc = excluded.doc",
            [
                (generation, part, position, doc)
                for (part, position), doc in zip(keys, docs, strict=True)
            ],
        )

    def write_views(self, writes: Sequence[ViewWrite]) -> str | None:
        """Moves the views' tracking rows and writes their documents, at once.

        None once committed; the name of a view whose row had moved (the
        transaction rolled back) otherwise.
        """
        try:
            with WriteTransaction(self.datastore.pool) as cursor:
                self._write_views(cursor, writes)
        except _TrackingMovedError as moved:
            return moved.view
        if self._wal is not None:
            self._wal.committed(sum(len(doc) for write in writes for doc in write.docs))
        return None

    def _write_views(self, cursor: SQLiteCursor, writes: Sequence[ViewWrite]) -> None:
        tables = self.tables
        for write in writes:
            if not tables.advance_tracking(
                cursor,
                write.view,
                write.from_position,
                write.to_position,
                write.generation,
            ):
                raise _TrackingMovedError(write.view)
            if write.docs:
                self.upsert_documents(
                    cursor, tables.docs, write.generation, write.keys, write.docs
                )

    def __init__(
        self, datastore: SQLiteDatastore, events_table_name: str = "stored_events"
    ):
        super().__init__(datastore, events_table_name)
        # eventsourcing's SQLiteDatastore makes its own pool, which opens
        # its connections lazily: none before this, so it is swapped whole.
        pool = CachingConnectionPool.like(datastore.pool)
        unused, datastore.pool = datastore.pool, pool
        unused.close()
        self._wal = pool.wal
        datastore.pool.pool_timeout = POOL_WAIT
        self.fence_statement = (
            f"SELECT 1 FROM {LEASE_TABLE} "
            "WHERE session_id = ? AND owner = ? AND epoch = ?"
        )
        self.claim_statement = (
            f"INSERT INTO {LEASE_TABLE} (session_id, owner, renewed, epoch) "
            f"VALUES (?, ?, ?, {FIRST_EPOCH}) ON CONFLICT (session_id) DO NOTHING"
        )
        self.tables = LogTables(self)
        """The statements on turnlog's own tables, in this dialect."""

    # eventsourcing's seam for work inside the insert's own transaction
    # (a protected method: the recorders call it with the save's kwargs).
    def _insert_events(
        self,
        c: SQLiteCursor,
        stored_events: Sequence[StoredEvent],
        *,
        fence: Fence | None = None,
        claim: Claim | None = None,
        **kwargs: Any,
    ) -> Sequence[int] | None:
        # The rows go in first: the transaction begins DEFERRED, and a read
        # before the first write could not upgrade to the write lock once
        # another connection had committed. After the insert this one holds
        # the write lock, so no takeover can commit before it does.
        del kwargs  # none of eventsourcing's own: its insert takes none either
        if fence is None:
            return self._insert_rows(c, stored_events)
        if claim is not None:
            # A write too, so it may come first. A lease row already there
            # (any owner's) is left alone, and the fence check below refuses
            # the save unless that row is this very lease.
            c.execute(self.claim_statement, claim)
        try:
            ids = self._insert_rows(c, stored_events)
        except sqlite3.IntegrityError:
            self._check(c, fence)  # a clash with a new owner: name the lost lease
            raise
        self._check(c, fence)
        return ids

    def _insert_rows(
        self, c: SQLiteCursor, stored_events: Sequence[StoredEvent]
    ) -> list[int]:
        # eventsourcing's SQLiteApplicationRecorder._insert_events, the same
        # statement and rows, on the sqlite3 cursor itself rather than
        # through its wrapper's methods (a call less per row and per rowid).
        cursor, statement = c.sqlite_cursor, self.insert_events_statement
        returning: list[int] = []
        for s in stored_events:
            originator_id = s.originator_id
            cursor.execute(
                statement,
                (
                    # UUID.hex, without its Python call a row.
                    "%032x" % originator_id.int  # noqa: UP031
                    if isinstance(originator_id, uuid.UUID)
                    else originator_id,
                    s.originator_version,
                    s.topic,
                    s.state,
                ),
            )
            # Never None after an insert into a table with rowids.
            returning.append(cursor.lastrowid)  # type: ignore[arg-type]
        return returning

    def insert_events(
        self, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        """Inserts one save's events in a transaction of its own; bounds the WAL."""
        with WriteTransaction(self.datastore.pool) as c:
            ids = self._insert_events(c, stored_events, **kwargs)
        self._committed((stored_events,))
        return ids

    def insert_together(self, saves: Sequence[PendingSave]) -> None:
        """Inserts several sessions' saves in one transaction (group commit).

        Raises, recording none of them, if any one fails.
        """
        with WriteTransaction(self.datastore.pool) as c:
            ids = [
                self._insert_events(c, s.events, fence=s.fence, claim=s.claim)
                for s in saves
            ]
        for save, save_ids in zip(saves, ids, strict=True):
            save.ids = save_ids
        self._committed([save.events for save in saves])

    def insert_each(self, saves: Sequence[PendingSave]) -> None:
        """Inserts several saves in one transaction, each in a savepoint.

        A save that conflicts or whose fence fails is rolled back to its
        savepoint and given its error; the others commit.
        """
        with self.datastore.transaction(commit=True) as c:
            for save in saves:
                c.execute("SAVEPOINT turnlog_save")
                try:
                    save.ids = self._insert_events(
                        c, save.events, fence=save.fence, claim=save.claim
                    )
                except (sqlite3.IntegrityError, LeaseLostError) as error:
                    c.execute("ROLLBACK TO turnlog_save")
                    save.error = (
                        IntegrityError(error)
                        if isinstance(error, sqlite3.IntegrityError)
                        else error
                    )
                c.execute("RELEASE turnlog_save")
        self._committed([save.events for save in saves if save.error is None])

    def _committed(self, saves: Sequence[Sequence[StoredEvent]]) -> None:
        """Tells the WAL's keeper what a commit wrote (a checkpoint may be due)."""
        if self._wal is not None:
            self._wal.committed(sum(len(s.state) for events in saves for s in events))

    def _check(self, c: SQLiteCursor, fence: Fence) -> None:
        cursor = c.sqlite_cursor
        cursor.execute(self.fence_statement, fence)
        if cursor.fetchone() is None:
            raise lease_lost(fence)

    def listen_for_commits(
        self, wake: Callable[[], None], stopping: threading.Event
    ) -> bool:
        """SQLite cannot tell of other processes' commits: followers poll."""
        del wake, stopping
        return False

    def runner_lock(self) -> SQLiteRunnerLock:
        """Every runner on an SQLite log follows (see SQLiteRunnerLock)."""
        return SQLiteRunnerLock()

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


class _TrackingMovedError(Exception):
    """Rolls a views' commit back: ``view``'s tracking row had moved."""

    def __init__(self, view: str) -> None:
        super().__init__(view)
        self.view = view


class SQLiteRunnerLock:
    """The runner lock of an SQLite log: always held.

    An SQLite log is written by one process as a rule; should several
    follow it, each view's compare-and-set tracking still folds every
    event exactly once (turnlog.projections.tables), at the price of
    duplicated work.
    """

    def acquire(self, stopping: threading.Event) -> bool:
        """Held at once (False only once ``stopping``)."""
        return not stopping.is_set()

    def held(self) -> bool:
        """Always."""
        return True

    def release(self) -> None:
        """Nothing to give up."""
