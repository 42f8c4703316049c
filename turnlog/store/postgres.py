"""The PostgreSQL backend: the recorder that owns every PostgreSQL statement.

eventsourcing's PostgreSQL recorder, extended with the fence check on saves
(see turnlog.store.fencing) and the statements where PostgreSQL's dialect
differs from SQLite's (turnlog.store.backend lists them); it runs the
statements both backends share (``LogTables``) in that dialect. Its
insert, fenced, is one round trip (turnlog.store.postgres_insert). Kept
apart from the SQLite one so that only PostgreSQL users load psycopg.
"""

from __future__ import annotations

import hashlib
import select
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import psycopg
from eventsourcing.persistence import (
    DataError,
    IntegrityError,
    InterfaceError,
    OperationalError,
    StoredEvent,
)
from eventsourcing.postgres import PostgresApplicationRecorder, PostgresDatastore
from eventsourcing.utils import retry
from psycopg import Cursor
from psycopg.errors import InvalidTextRepresentation, LockNotAvailable
from psycopg.rows import DictRow
from psycopg.sql import SQL, Identifier

from turnlog.domain.errors import StoreError
from turnlog.store.backend import ViewWrite
from turnlog.store.fencing import LEASE_TABLE, Claim, Fence, lease_lost
from turnlog.store.group_commit import PendingSave
from turnlog.store.log_tables import LogTables
from turnlog.store.postgres_insert import REFUSED, OneRoundTripInsert
from turnlog.store.postgres_views import OneRoundTripViews, moved

LISTEN_POLL_MS = 500
"""How long the listener waits for a NOTIFY before it looks at ``stopping``."""
OWN_NOTIFY_NAP = 0.005
"""Seconds the listener rests when this process's own NOTIFYs come
closer together than that.

A process that saves hears its own NOTIFYs, one a commit: a thread
wake-up, a poll and a read each (more CPU a PostgreSQL turn than the
view runner, off the session's thread, measured with
bench/turn_threads.py). Under a stream of commits, resting a moment
lets the next ones' NOTIFYs gather, read in one wake-up; commits further
apart than this are read one by one, as before, since a rest would only
add a wake-up of its own. Another process's NOTIFY that comes during a
rest is passed on at most this late: a follower in another process sees
commits that much later, at most, while this one saves fast.
"""


class PostgresLogRecorder(PostgresApplicationRecorder):
    """The PostgreSQL recorder: fenced saves, and its side of the dialect."""

    position_column = "notification_id"
    blob_type = "BYTEA"

    @staticmethod
    def prepare(env: dict[str, str], location: str, *, read_only: bool) -> None:
        """Reaches the server and makes the schema a URL names.

        Connects once, so that a server that is down or refuses the user or
        database is reported at once with its own reason (the pool would
        wait out its timeout and then say only that it got no connection);
        then creates the schema, unless table creation is off.
        """
        del read_only  # refused for PostgreSQL before this is called
        schema = env.get("POSTGRES_SCHEMA")
        try:
            connection = psycopg.connect(
                dbname=env["POSTGRES_DBNAME"],
                host=env["POSTGRES_HOST"],
                port=env["POSTGRES_PORT"],
                user=env["POSTGRES_USER"],
                password=env["POSTGRES_PASSWORD"] or None,
                connect_timeout=int(env["POSTGRES_CONNECT_TIMEOUT"]),
                autocommit=True,
            )
        except psycopg.Error as error:
            msg = f"cannot connect to the log at {location}: {error}"
            raise StoreError(msg) from error
        try:
            with connection:
                if schema and env.get("CREATE_TABLE") != "no":
                    statement = SQL("CREATE SCHEMA IF NOT EXISTS {}")
                    connection.execute(statement.format(Identifier(schema)))
        except psycopg.Error as error:
            msg = f"cannot prepare PostgreSQL schema {schema!r}: {error}"
            raise StoreError(msg) from error

    def qualify(self, table: str) -> str:
        """``table`` in the log's schema."""
        return f"{self.datastore.schema}.{table}"

    def sql(self, statement: str) -> str:
        """``statement`` with psycopg's ``%s`` for each ``?`` placeholder."""
        return statement.replace("?", "%s")

    def aggregate_key(self, aggregate_id: uuid.UUID) -> Any:
        """How the events table stores an aggregate id (a uuid column here)."""
        return aggregate_id

    def where_in(self, column: str, values: Sequence[Any]) -> tuple[str, Any]:
        """A ``column = ANY(array)`` condition and its parameters."""
        return f"{column} = ANY(%s)", (list(values),)

    def table_columns(self, cursor: Any, table: str) -> set[str]:
        """The columns of ``table`` (empty if there is no such table)."""
        cursor.execute(
            "SELECT column_name FROM information_schema.columns "
            "WHERE table_schema = %s AND table_name = %s",
            (self.datastore.schema, table),
        )
        return {str(row["column_name"]) for row in cursor.fetchall()}

    def upsert_documents(
        self,
        cursor: Any,
        table: str,
        generation: int,
        keys: Sequence[tuple[str, int]],
        docs: Sequence[bytes],
    ) -> None:
        """Writes view documents (gen, part, pos, doc), replacing older ones."""
        # One statement of column arrays: psycopg adapts executemany's
        # parameters row by row in Python, twice as slow.
        cursor.execute(
            f"INSERT INTO {table} SELECT %s::bigint, * FROM "
            "unnest(%s::text[], %s::bigint[], %s::bytea[]) "
            "ON CONFLICT (gen, part, pos) DO UPDATE SET doc = excluded.doc",
            (generation, [part for part, _ in keys], [pos for _, pos in keys], docs),
        )

    def __init__(
        self, datastore: PostgresDatastore, *, events_table_name: str = "stored_events"
    ):
        super().__init__(datastore, events_table_name=events_table_name)
        self.lease_table = SQL("{0}.{1}").format(
            Identifier(datastore.schema), Identifier(LEASE_TABLE)
        )
        self.holds_statement = SQL(
            "SELECT 1 FROM {0} WHERE session_id = %s AND owner = %s AND epoch = %s"
        ).format(self.lease_table)
        self.insert = OneRoundTripInsert(
            schema=datastore.schema,
            events_table=self.events_table_name,
            lease_table=LEASE_TABLE,
            id_type=datastore.originator_id_type,
            lock_table_statements=self.lock_table_statements,
            channel=self.channel_name,
        )
        """A save's (or a group commit's) transaction, in one round trip."""
        self.lock_out_saves_statement = SQL("LOCK TABLE {0}.{1} IN SHARE MODE").format(
            Identifier(datastore.schema), Identifier(self.events_table_name)
        )
        self.tables = LogTables(self)
        """The statements on turnlog's own tables, in this dialect."""
        self.views = OneRoundTripViews(datastore.schema)
        """A views' commit in one round trip."""

    def write_views(self, writes: Sequence[ViewWrite]) -> str | None:
        """Moves the views' tracking rows and writes their documents, at once
        (one round trip: turnlog.store.postgres_views).

        None once committed; the names of the views if a tracking row had
        moved (nothing written).
        """
        try:
            with self.datastore.get_connection() as conn:
                self.views.run(conn, writes)
        except DataError as error:
            if moved(error):
                return ", ".join(write.view for write in writes)
            raise
        return None

    def insert_events(
        self, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        """Inserts one save's events, fenced by ``fence`` (and taking ``claim``).

        With ``saves``, the fences and claims of several sessions' saves
        whose events are ``stored_events`` (see :meth:`insert_together`).
        One round trip to the server (see :meth:`_insert_in_one_round_trip`).
        """
        return self._insert_fenced(stored_events, **kwargs)

    def _insert_fenced(
        self, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        fenced = _fenced(kwargs)
        try:
            ids: Sequence[int] | None = self._insert_in_one_round_trip(
                stored_events, fenced
            )
        except DataError as error:
            if fenced and _refused(error):
                raise lease_lost(fenced[0][0]) from None
            raise
        except IntegrityError:
            # A clash with rows already there, although the fence held when
            # read: with whom? (A claim's lease was rolled back with it: the
            # clash is the answer.)
            fence = kwargs.get("fence")
            claim = kwargs.get("claim")
            if fence is not None and claim is None and not self._holds(fence):
                raise lease_lost(fence) from None
            raise
        return ids

    @retry((InterfaceError, OperationalError), max_attempts=10, wait=0.2)
    def _insert_in_one_round_trip(
        self,
        stored_events: Sequence[StoredEvent],
        fenced: Sequence[tuple[Fence, Claim | None]],
    ) -> Sequence[int] | None:
        """The transaction in one round trip (turnlog.store.postgres_insert)."""
        if not stored_events:
            return None  # nothing is inserted: no transaction, no check
        with self.datastore.get_connection() as conn:
            return self.insert.run(conn, stored_events, fenced)

    def insert_together(self, saves: Sequence[PendingSave]) -> None:
        """Inserts several sessions' saves in one transaction (group commit).

        One lock of the events table, one INSERT of every claim, one check
        of every fence, one NOTIFY and one INSERT of every event, all in one
        round trip. Raises,
        recording none of them, if any one fails: LeaseLostError if a fence
        failed (which one is found by :meth:`insert_each`).
        """
        events = [event for save in saves for event in save.events]
        ids = self._insert_fenced(events, saves=saves)
        at = 0
        for save in saves:
            count = len(save.events)
            save.ids = list(ids[at : at + count]) if ids is not None else None
            at += count

    def insert_each(self, saves: Sequence[PendingSave]) -> None:
        """Inserts several saves, each in a transaction of its own.

        A save that conflicts or whose fence fails gets its error; the
        others commit. For the rare batch where one save fails: a commit
        (one round trip) per save. A savepoint per save in one transaction
        would need as many round trips, all under the events table's lock,
        since a failed statement makes the server skip the rest of its
        pipeline.
        """
        for save in saves:
            save.ids, save.error = None, None
            try:
                save.ids = self.insert_events(
                    save.events, fence=save.fence, claim=save.claim
                )
            except Exception as error:  # noqa: BLE001 - this save's outcome
                # Its own transaction: whatever failed, the others stand.
                save.error = error

    def _holds(self, fence: Fence) -> bool:
        with self.datastore.transaction(commit=False) as curs:
            curs.execute(self.holds_statement, fence)
            return curs.fetchone() is not None

    def _connect(self) -> psycopg.Connection[DictRow]:
        """A connection of its own, outside the pool, for as long as needed."""
        kwargs = self.datastore.pool.kwargs
        assert isinstance(kwargs, dict)  # eventsourcing passes a dict
        return psycopg.connect(**kwargs, autocommit=True)

    def listen_for_commits(
        self, wake: Callable[[], None], stopping: threading.Event
    ) -> bool:
        """LISTENs to the channel every insert NOTIFYs, until ``stopping``.

        The server delivers a NOTIFY only after its transaction committed,
        so each wake-up finds the new events readable. A NOTIFY of this
        recorder's own inserts wakes nobody: the Store that made them has
        told the watch already (a save through its listeners, an import
        itself), and a look at the log's end for each would cost a query
        and two thread wake-ups a commit.

        Most NOTIFYs a saving process hears are its own, one a commit, so
        they are read from libpq directly: a poll, a read and a comparison
        of bytes each, where psycopg's ``notifies()`` made a generator, took
        the connection's lock and decoded a ``Notify`` (60-100 us of CPU a
        commit on this thread).
        """
        with self._connect() as conn:
            conn.execute(SQL("LISTEN {0}").format(Identifier(self.channel_name)))
            wake()  # whatever committed before the LISTEN took effect
            pgconn = conn.pgconn
            own = self.insert.token.encode()
            readable = select.poll()
            readable.register(pgconn.socket, select.POLLIN)
            own_last = -OWN_NOTIFY_NAP
            while not stopping.is_set():
                # Bounded, so that ``stopping`` is seen without a commit.
                if not readable.poll(LISTEN_POLL_MS):
                    continue
                # Raises OperationalError once the connection is gone.
                pgconn.consume_input()
                others = False
                while (notify := pgconn.notifies()) is not None:
                    others = others or notify.extra != own
                if others:
                    wake()
                    continue
                now = time.monotonic()
                if now - own_last < OWN_NOTIFY_NAP:
                    time.sleep(OWN_NOTIFY_NAP)  # a stream of our own: gather
                    now = time.monotonic()
                own_last = now
        return True

    def runner_lock(self) -> PostgresRunnerLock:
        """The advisory lock whose holder keeps this schema's views current."""
        return PostgresRunnerLock(self._connect, self.datastore.schema)

    def lock_out_saves(self, cursor: Cursor[DictRow]) -> None:
        """Waits for saves in flight and holds off new ones until commit.

        For a takeover of a lease: a save checks its fence under the events
        table's lock, which this one conflicts with.
        """
        cursor.execute(self.lock_out_saves_statement)

    def create_lease_table(self) -> None:
        """Creates the lease table, or adds the epoch column to an older one."""
        with self.datastore.transaction(commit=True) as curs:
            curs.execute(
                SQL(
                    "CREATE TABLE IF NOT EXISTS {0} (session_id TEXT PRIMARY KEY, "
                    "owner TEXT NOT NULL, renewed DOUBLE PRECISION NOT NULL, "
                    "epoch BIGINT NOT NULL DEFAULT 0)"
                ).format(self.lease_table)
            )
            # ALTER TABLE locks the table even when there is nothing to do,
            # and would stall every save of the log: only when needed.
            curs.execute(
                "SELECT 1 FROM information_schema.columns WHERE table_schema = %s"
                " AND table_name = %s AND column_name = 'epoch'",
                (self.datastore.schema, LEASE_TABLE),
            )
            if curs.fetchone() is None:
                curs.execute(
                    SQL(
                        "ALTER TABLE {0} ADD COLUMN IF NOT EXISTS "
                        "epoch BIGINT NOT NULL DEFAULT 0"
                    ).format(self.lease_table)
                )


def _fenced(kwargs: dict[str, Any]) -> list[tuple[Fence, Claim | None]]:
    """The (fence, claim) of each fenced save an insert's ``kwargs`` name."""
    saves: Sequence[PendingSave] = kwargs.get("saves", ())
    if saves:
        return [(save.fence, save.claim) for save in saves if save.fence is not None]
    fence: Fence | None = kwargs.get("fence")
    return [] if fence is None else [(fence, kwargs.get("claim"))]


def _refused(error: DataError) -> bool:
    """Whether ``error`` is the fence statement refusing a lost lease."""
    cause = error.__cause__
    return isinstance(cause, InvalidTextRepresentation) and REFUSED in str(cause)


class PostgresRunnerLock:
    """A session-level advisory lock on a connection of its own.

    The server releases it when that connection ends, which a killed
    process's connection does at once (the kernel closes its socket), so
    a waiting standby takes it over within milliseconds.
    """

    WAIT_SECONDS = 1
    """How long one wait for the lock lasts before ``stopping`` is checked."""

    def __init__(
        self, connect: Callable[[], psycopg.Connection[DictRow]], schema: str
    ) -> None:
        self._connect = connect
        # Per schema: each schema is a log of its own, with its own views.
        digest = hashlib.sha256(f"turnlog projections {schema}".encode()).digest()
        self.key = int.from_bytes(digest[:8], "big", signed=True)
        self._conn: psycopg.Connection[DictRow] | None = None

    def acquire(self, stopping: threading.Event) -> bool:
        """Waits until this process holds the lock; False once ``stopping``."""
        while not stopping.is_set():
            conn = self._conn
            if conn is None or conn.closed:
                conn = self._conn = self._connect()
                conn.execute(f"SET lock_timeout = '{self.WAIT_SECONDS}s'")
            try:
                conn.execute("SELECT pg_advisory_lock(%s)", (self.key,))
            except LockNotAvailable:
                continue
            return True
        return False

    def held(self) -> bool:
        """Whether the lock is still this process's (its connection lives)."""
        conn = self._conn
        if conn is None or conn.closed:
            return False
        try:
            conn.execute("SELECT 1")
        except psycopg.Error:
            return False
        return True

    def release(self) -> None:
        """Gives the lock up (by closing its connection)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
