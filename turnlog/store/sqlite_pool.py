"""The SQLite log's connections: eventsourcing's pool, kept warm and gated.

The pool hands out connections that keep their compiled statements and
are taken most recently used first; it holds this process's readers back
while the file's WAL is truncated (turnlog.store.wal), and lends that
truncation the writer's turn. ``WriteTransaction`` opens a write
transaction on it as eventsourcing does, in one context manager instead
of three. The recorder (turnlog.store.sqlite) runs its statements on it.
"""

from __future__ import annotations

import sqlite3
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import Any

from eventsourcing.persistence import (
    ConnectionNotFromPoolError,
    ConnectionPoolClosedError,
    DatabaseError,
    DataError,
    IntegrityError,
    InterfaceError,
    InternalError,
    NotSupportedError,
    OperationalError,
    PersistenceError,
    ProgrammingError,
)
from eventsourcing.sqlite import (
    SQLITE3_DEFAULT_LOCK_TIMEOUT,
    SQLiteConnection,
    SQLiteConnectionPool,
    SQLiteCursor,
)

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
        if is_writer is True:
            connection = self._writer_now()
            if connection is not None:
                return connection
        elif is_writer is False and self.wal is not None:
            self.wal.gate.wait_open()
        return super().get_connection(timeout, is_writer=is_writer)

    def _writer_now(self) -> SQLiteConnection | None:
        """The writer's turn on an idle connection if neither needs a wait;
        else None, with nothing taken, and eventsourcing's pool does the rest.

        What its ``get_connection`` does for a writer that waits for nothing:
        the writer's lock, no readers where reads exclude writes (memory://),
        an idle connection, the same bookkeeping. It spends about twenty
        Python calls on it (its queue for fairness and its conditions are
        Python classes), and every save takes a writer's connection: the
        pool was a quarter of the Python calls a save made (bench/RESULTS.md,
        "The save's Python, cut by a third"). A writer that finds the turn
        free takes it before one queued in the pool wakes, as a
        ``threading.Lock`` lets any thread. Left to the pool: every wait, a
        connection to create, and connections that age out or are pinged
        (``max_age``, ``pre_ping``: turnlog opens its pools with neither).
        """
        if self._closed or self.max_age is not None or self.pre_ping:
            return None
        writer = self._writer_lock
        if not writer.acquire(False):
            return None
        if self._mutually_exclusive_read_write:
            # The count is read under its lock, as the pool reads it. A
            # Condition's acquire and release are its lock's own (C) methods.
            self._no_readers.acquire()
            readers = self._num_readers
            self._no_readers.release()
            if readers:
                writer.release()
                return None
        idle = self._put_condition
        idle.acquire()
        try:
            if self._closed or not self._pool:
                writer.release()
                return None
            connection = self._pool.pop()  # the most recently returned
            # Idle, and with no max_age timer to close it, no thread holds it.
            connection.in_use.acquire()
            self._in_use[id(connection)] = connection
            self._num_writers += 1
        finally:
            idle.release()
        connection.is_writer = True
        return connection

    def put_connection(self, conn: SQLiteConnection) -> None:
        """Returns ``conn``: a writer's as eventsourcing's pool returns it,
        with fewer Python calls (see ``_writer_now``); any other through it."""
        if conn.is_writer is not True or self.max_age is not None:
            super().put_connection(conn)
            return
        conn.is_writer = None
        idle = self._put_condition
        # The condition's own lock methods (C), as _writer_now takes it,
        # not its ``with`` (two Python calls).
        idle.acquire()
        try:
            if self._closed:
                msg = "Pool is closed"
                raise ConnectionPoolClosedError(msg)
            if self._in_use.pop(id(conn), None) is None:
                msg = "Connection not in use in this pool"
                raise ConnectionNotFromPoolError(msg)
            # With no max_age timer, nothing marks a connection as closing.
            # Its ``closed`` property, read without a Python call.
            if not conn._closed:
                if len(self._pool) < self.pool_size:
                    self._pool.append(conn)
                else:
                    conn.close()
            conn.in_use.release()
            self._num_writers -= 1
            self._writer_lock.release()
            idle.notify()
        finally:
            idle.release()

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
        try:
            self._set_up(connection)
        except BaseException:
            # SQLite opens a file lazily: its first statements here are what
            # fail on a locked or damaged file, and the connection must not
            # hold the file open until the garbage collector closes it.
            connection.close()
            raise
        return SQLiteConnection(sqlite_conn=connection, max_age=self.max_age)

    def _set_up(self, connection: sqlite3.Connection) -> None:
        """WAL mode for a file, the WAL keeper's settings, rows as ``Row``."""
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


class WriteTransaction:
    """A write transaction on a connection of ``pool``, as eventsourcing opens one.

    ``SQLiteDatastore.transaction(commit=True)`` does the same in three
    nested generator context managers (the datastore's, its connection
    getter's, the connection's), a third of the Python a lone save runs
    outside SQLite; its ``SQLiteTransaction`` and ``SQLiteCursor`` then
    spend seven more Python calls a save passing BEGIN, the commit and the
    cursor's close through to sqlite3. This runs those on sqlite3's own
    connection and cursor: the same pool call (a writer's connection, with
    its read and write interlocking), BEGIN, then COMMIT, or ROLLBACK on an
    error, sqlite3's errors raised as eventsourcing's (``persistence_error``),
    the cursor closed, the connection returned. The body gets the cursor
    in eventsourcing's wrapper, as the recorders' statements expect it.
    """

    __slots__ = ("_connection", "_cursor", "_pool")

    def __init__(self, pool: SQLiteConnectionPool) -> None:
        self._pool = pool

    def __enter__(self) -> SQLiteCursor:
        connection = self._connection = self._pool.get_connection(is_writer=True)
        try:
            # eventsourcing's SQLiteConnection keeps sqlite3's connection
            # here; SQLiteTransaction.__enter__ issues BEGIN on a new cursor
            # of it, with no error mapping, as this does.
            cursor = connection._sqlite_conn.cursor()
            cursor.execute("BEGIN")
        except BaseException:
            self._pool.put_connection(connection)
            raise
        self._cursor = cursor
        # eventsourcing's wrapper, made as its __init__ would make it (it
        # only keeps the cursor), without that Python call a save.
        wrapper = object.__new__(SQLiteCursor)
        wrapper.sqlite_cursor = cursor
        return wrapper

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        try:
            self._cursor.close()
            sqlite_connection = self._connection._sqlite_conn
            try:
                if exc_value is not None:
                    sqlite_connection.rollback()
                    raise exc_value
                sqlite_connection.commit()
            except sqlite3.Error as error:
                raise persistence_error(error) from error
        finally:
            self._pool.put_connection(self._connection)


_PERSISTENCE_ERRORS: tuple[tuple[type[sqlite3.Error], type[PersistenceError]], ...] = (
    (sqlite3.InterfaceError, InterfaceError),
    (sqlite3.DataError, DataError),
    (sqlite3.OperationalError, OperationalError),
    (sqlite3.IntegrityError, IntegrityError),
    (sqlite3.InternalError, InternalError),
    (sqlite3.ProgrammingError, ProgrammingError),
    (sqlite3.NotSupportedError, NotSupportedError),
    (sqlite3.DatabaseError, DatabaseError),
)


def persistence_error(error: sqlite3.Error) -> PersistenceError:
    """``error`` as eventsourcing's SQLiteTransaction raises it from a
    transaction's end: the persistence error of its kind."""
    for sqlite_class, persistence_class in _PERSISTENCE_ERRORS:
        if isinstance(error, sqlite_class):
            return persistence_class(error)
    return PersistenceError(error)
