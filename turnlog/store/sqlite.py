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
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any

from eventsourcing.persistence import (
    IntegrityError,
    InterfaceError,
    OperationalError,
    StoredEvent,
)
from eventsourcing.sqlite import (
    SQLITE3_DEFAULT_LOCK_TIMEOUT,
    SQLiteApplicationRecorder,
    SQLiteConnection,
    SQLiteConnectionPool,
    SQLiteCursor,
    SQLiteDatastore,
    SQLiteTransaction,
)

from turnlog.domain.errors import LeaseLostError
from turnlog.store.backend import ViewWrite
from turnlog.store.fencing import FIRST_EPOCH, LEASE_TABLE, Claim, Fence, lease_lost
from turnlog.store.group_commit import PendingSave
from turnlog.store.log_tables import LogTables
from turnlog.store.opening import memory_copy, prepare_sqlite_file
from turnlog.store.wal import WalKeeper, connection_settings

POOL_WAIT = 365 * 24 * 3600.0

"""Seconds a thread may wait for one of the pool's connections: no limit.

eventsourcing's pool gives up after 5 s ("Timed out waiting for return of
writer"), which under a burst of sessions failed saves that were only
queued behind this process's own writer. Every connection is held by a
thread of this process for one transaction, so a wait ends when that
transaction does; waits on other processes keep SQLite's own busy
timeout (``SQLITE_LOCK_TIMEOUT``, turnlog.store.opening). Finite because
the pool adds it to the clock and hands the sum to ``Lock.acquire``.
"""

STATEMENT_CACHE = 64
"""Compiled statements each connection keeps for reuse.

eventsourcing opens its connections with ``cached_statements=True``, a
cache of one: each statement that differs from the one before it is
compiled again, and a save alternates several (BEGIN, the inserts, the
fence check, the claim). Measured, a pair of them cost 73 us that way
and 21 us compiled once (bench/RESULTS.md, "Creating many new sessions").
"""


class _MostRecentFirst(deque[SQLiteConnection]):
    """A pool's idle connections, the most recently returned taken first."""

    def popleft(self) -> SQLiteConnection:
        return self.pop()


class CachingConnectionPool(SQLiteConnectionPool):
    """eventsourcing's SQLite pool, whose connections keep compiled statements.

    The same connections in every other respect (autocommit mode, WAL for
    a file, rows as ``sqlite3.Row``); only ``cached_statements`` differs,
    and the pool offers no parameter for it. ``_create_connection`` is the
    abstract method eventsourcing's ``ConnectionPool`` has its subclasses
    implement (its own SQLite pool is one), so this overrides a designed
    hook; tests/store/test_eventsourcing_recorders.py runs eventsourcing's
    recorder suites over it, so an upgrade that changes the hook fails.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        # The connection used last is handed out first. eventsourcing's pool
        # takes from the left of its deque and returns to the right, so its
        # connections take turns; but an SQLite connection drops its page
        # cache whenever another connection has written, and reads the pages
        # it needs again (from the WAL: about 35 reads a turn of four
        # saves, measured with strace). A session saving on a connection
        # it used last, with no other writer between, finds its cache warm.
        self._pool = _MostRecentFirst(self._pool)
        self.wal: WalKeeper | None = (
            None
            if self.is_sqlite_memory_mode
            else WalKeeper(
                self.db_name,
                self.lock_timeout or SQLITE3_DEFAULT_LOCK_TIMEOUT,
                self._writer_held,
            )
        )
        """Checkpoints a file's WAL off the savers' threads (turnlog.store.wal)."""

    def get_connection(
        self, timeout: float | None = None, *, is_writer: bool | None = None
    ) -> SQLiteConnection:
        """A connection, as eventsourcing's pool gives one; a reader's waits
        while this process truncates the file's WAL (turnlog.store.wal)."""
        if is_writer is False and self.wal is not None:
            self.wal.gate.wait_open()
        return super().get_connection(timeout, is_writer=is_writer)

    @contextmanager
    def _writer_held(self) -> Iterator[None]:
        """This process's writer's turn, taken for a block (its writers wait)."""
        connection = self.get_connection(is_writer=True)
        try:
            yield
        finally:
            self.put_connection(connection)

    @classmethod
    def like(cls, pool: SQLiteConnectionPool) -> CachingConnectionPool:
        """A pool configured as ``pool`` (which must not have connected yet)."""
        return cls(
            db_name=pool.db_name,
            lock_timeout=pool.lock_timeout,
            pool_size=pool.pool_size,
            max_overflow=pool.max_overflow,
            pool_timeout=pool.pool_timeout,
            max_age=pool.max_age,
            pre_ping=pool.pre_ping,
        )

    def close(self) -> None:
        """Stops the WAL's keeper, then closes the connections."""
        if self.wal is not None:
            self.wal.close()
        super().close()

    def _create_connection(self) -> SQLiteConnection:
        try:
            connection = sqlite3.connect(
                database=self.db_name,
                uri=True,
                check_same_thread=False,
                isolation_level=None,
                cached_statements=STATEMENT_CACHE,
                timeout=self.lock_timeout or SQLITE3_DEFAULT_LOCK_TIMEOUT,
            )
        except (sqlite3.Error, TypeError) as error:
            raise InterfaceError(error) from error
        if not self.is_sqlite_memory_mode and not self.is_journal_mode_wal:
            mode = connection.execute("PRAGMA journal_mode").fetchone()[0]
            if mode.lower() != "wal":
                connection.execute("PRAGMA journal_mode=WAL")
                self.journal_mode_was_changed_to_wal = True
            self.is_journal_mode_wal = True
        if self.wal is not None:
            for setting in connection_settings():
                connection.execute(setting)
        connection.row_factory = sqlite3.Row
        return SQLiteConnection(sqlite_conn=connection, max_age=self.max_age)


class WriteTransaction:
    """A write transaction on a connection of ``pool``, as eventsourcing opens one.

    ``SQLiteDatastore.transaction(commit=True)`` does the same in three
    nested generator context managers (the datastore's, its connection
    getter's, the connection's), a third of the Python a lone save runs
    outside SQLite: the same pool call (a writer's connection, with its
    read and write interlocking), the same ``SQLiteTransaction`` (BEGIN,
    then COMMIT, or ROLLBACK on an error, sqlite3's errors raised as
    eventsourcing's), the cursor closed, the connection returned.
    """

    __slots__ = ("_connection", "_cursor", "_pool", "_transaction")

    def __init__(self, pool: SQLiteConnectionPool) -> None:
        self._pool = pool

    def __enter__(self) -> SQLiteCursor:
        connection = self._connection = self._pool.get_connection(is_writer=True)
        try:
            self._transaction = SQLiteTransaction(connection, commit=True)
            self._cursor = self._transaction.__enter__()
        except BaseException:
            self._pool.put_connection(connection)
            raise
        return self._cursor

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        try:
            self._cursor.__exit__()
            self._transaction.__exit__(exc_type, exc_value, traceback)
        finally:
            self._pool.put_connection(self._connection)


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
                    originator_id.hex
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
