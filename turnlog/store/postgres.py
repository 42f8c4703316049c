"""The PostgreSQL backend: the recorder that owns every PostgreSQL statement.

eventsourcing's PostgreSQL recorder, extended with the fence check on saves
(see turnlog.store.fencing) and the statements where PostgreSQL's dialect
differs from SQLite's (turnlog.store.backend lists them). Kept apart from
the SQLite one so that only PostgreSQL users load psycopg.
"""

from __future__ import annotations

import hashlib
import threading
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
from eventsourcing.postgres import (
    PostgresAggregateRecorder,
    PostgresApplicationRecorder,
    PostgresDatastore,
)
from eventsourcing.utils import retry
from psycopg import Connection, Cursor
from psycopg import IntegrityError as PsycopgIntegrityError
from psycopg.errors import InvalidTextRepresentation, LockNotAvailable
from psycopg.rows import DictRow
from psycopg.sql import SQL, Identifier

from turnlog.store.fencing import FIRST_EPOCH, LEASE_TABLE, Claim, Fence, lease_lost
from turnlog.store.group_commit import PendingSave
from turnlog.store.opening import prepare_postgres_schema

_REFUSED = "turnlog fence: lease lost"
"""The text the fence statement fails to cast when the lease is gone."""


class PostgresLogRecorder(PostgresApplicationRecorder):
    """The PostgreSQL recorder: fenced saves, and its side of the dialect."""

    position_column = "notification_id"
    blob_type = "BYTEA"

    @staticmethod
    def prepare(env: dict[str, str], location: str, *, read_only: bool) -> None:
        """Reaches the server (its own reason if it cannot) and makes the schema."""
        del read_only  # refused for PostgreSQL before this is called
        prepare_postgres_schema(env, location)

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
        # Runs in the insert's pipeline after the insert, under the events
        # table's lock, so it reads the lease as committed by then; a
        # takeover locks that table too (lock_out_saves), so it cannot commit
        # between this check and the save's commit. A lost lease fails the
        # cast, aborting the transaction without a round trip of its own.
        self.fence_statement = SQL(
            "SELECT CAST(CASE WHEN count(*) = 1 THEN '1' ELSE %s END AS integer) "
            "FROM {0} WHERE session_id = %s AND owner = %s AND epoch = %s"
        ).format(self.lease_table)
        # A new session's lease, taken in its first save (after the events
        # table's lock, as a takeover takes that lock before the lease row:
        # the same order, so neither waits for the other in a cycle). A row
        # already there is left alone, and the fence check after it refuses
        # the save unless that row is this very lease.
        self.claim_statement = SQL(
            "INSERT INTO {0} (session_id, owner, renewed, epoch) "
            "VALUES (%s, %s, %s, {1}) ON CONFLICT (session_id) DO NOTHING"
        ).format(self.lease_table, FIRST_EPOCH)
        self.holds_statement = SQL(
            "SELECT 1 FROM {0} WHERE session_id = %s AND owner = %s AND epoch = %s"
        ).format(self.lease_table)
        self.lock_out_saves_statement = SQL("LOCK TABLE {0}.{1} IN SHARE MODE").format(
            Identifier(datastore.schema), Identifier(self.events_table_name)
        )

    def insert_events(
        self, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        fence: Fence | None = kwargs.get("fence")
        try:
            ids: Sequence[int] | None = super().insert_events(stored_events, **kwargs)
        except DataError as error:
            if fence is not None and _refused(error):
                raise lease_lost(fence) from None
            raise
        except IntegrityError:
            # The insert clashed before the fence was read: with whom? (A
            # claim's lease was rolled back with it: the clash is the answer.)
            claim = kwargs.get("claim")
            if fence is not None and claim is None and not self._holds(fence):
                raise lease_lost(fence) from None
            raise
        return ids

    @retry((InterfaceError, OperationalError), max_attempts=10, wait=0.2)
    def insert_together(self, saves: Sequence[PendingSave]) -> None:
        """Inserts several sessions' saves in one transaction (group commit).

        One lock of the events table, one NOTIFY, one INSERT of every event
        and a fence check per fenced save, all in one pipeline. Raises,
        recording none of them, if any one fails: LeaseLostError if a fence
        failed (which one is found by :meth:`insert_each`).
        """
        events = [event for save in saves for event in save.events]
        try:
            ids = self._insert_all(saves, events)
        except DataError as error:
            fenced = [save.fence for save in saves if save.fence is not None]
            if fenced and _refused(error):
                raise lease_lost(fenced[0]) from None
            raise
        self._hand_out(saves, ids)

    def _insert_all(
        self, saves: Sequence[PendingSave], events: Sequence[StoredEvent]
    ) -> Sequence[int] | None:
        failure: Exception | None = None
        ids: Sequence[int] | None = None
        with self.datastore.get_connection() as conn:
            with (
                conn.pipeline() as pipeline,
                conn.transaction(),
                conn.cursor() as curs,
            ):
                try:
                    # The lock, the NOTIFY and the insert (not this class's
                    # override, which checks a single fence).
                    PostgresApplicationRecorder._insert_stored_events(
                        self, curs, events
                    )
                    self._check_fences(conn, saves)
                    pipeline.sync()
                    ids = self._fetch_ids_after_insert_events(curs, events)
                except Exception as error:  # noqa: BLE001 - raised below
                    # Raised after the pipeline has exited (as eventsourcing
                    # does), to avoid psycopg's warning.
                    failure = error
            if failure is not None:
                raise failure
        return ids

    def _check_fences(self, conn: Connection[DictRow], saves: Sequence[Any]) -> None:
        with conn.cursor() as fence_cursor:
            for save in saves:
                self._fence(fence_cursor, save.fence, save.claim)

    def _fence(
        self, cursor: Cursor[DictRow], fence: Fence | None, claim: Claim | None
    ) -> None:
        """Takes ``claim``'s lease, if any, then checks ``fence`` (pipelined)."""
        if claim is not None:
            cursor.execute(self.claim_statement, claim, prepare=True)
        if fence is not None:
            cursor.execute(self.fence_statement, (_REFUSED, *fence), prepare=True)

    @staticmethod
    def _hand_out(saves: Sequence[PendingSave], ids: Sequence[int] | None) -> None:
        """Gives each save its share of ``ids``, in insertion order."""
        at = 0
        for save in saves:
            count = len(save.events)
            save.ids = list(ids[at : at + count]) if ids is not None else None
            at += count

    @retry((InterfaceError, OperationalError), max_attempts=10, wait=0.2)
    def insert_each(self, saves: Sequence[PendingSave]) -> None:
        """Inserts several saves in one transaction, each in a savepoint.

        A save that conflicts or whose fence fails is rolled back to its
        savepoint and given its error; the others commit. Not pipelined: a
        round trip per save, for the rare batch where one save fails.
        """
        with self.datastore.get_connection() as conn, conn.transaction():
            with conn.cursor() as curs:
                self._lock_table(curs)
                self._notify_channel(curs)
            for save in saves:
                save.ids, save.error = None, None
                try:
                    with conn.transaction(), conn.cursor() as curs:
                        PostgresAggregateRecorder._insert_stored_events(
                            self, curs, save.events
                        )
                        ids = self._fetch_ids_after_insert_events(curs, save.events)
                        self._check_fences(conn, [save])
                    save.ids = ids
                except InvalidTextRepresentation as error:
                    if save.fence is None or _REFUSED not in str(error):
                        raise
                    save.error = lease_lost(save.fence)
                except PsycopgIntegrityError as error:
                    fence = save.fence
                    lost = (
                        fence is not None
                        and save.claim is None
                        and not self._holds(fence)
                    )
                    save.error = (
                        lease_lost(fence)
                        if lost and fence is not None
                        else IntegrityError(str(error))
                    )

    def _holds(self, fence: Fence) -> bool:
        with self.datastore.transaction(commit=False) as curs:
            curs.execute(self.holds_statement, fence)
            return curs.fetchone() is not None

    def _insert_stored_events(
        self,
        curs: Cursor[DictRow],
        stored_events: Sequence[StoredEvent],
        *,
        fence: Fence | None = None,
        claim: Claim | None = None,
        **kwargs: Any,
    ) -> None:
        # Not the _insert_events seam: that runs before the table lock, and
        # the fence must be read under it (see __init__).
        super()._insert_stored_events(curs, stored_events, **kwargs)
        if fence is not None:
            # Another cursor: eventsourcing fetches the new ids from ``curs``.
            with curs.connection.cursor() as fence_cursor:
                self._fence(fence_cursor, fence, claim)

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
        so each wake-up finds the new events readable.
        """
        with self._connect() as conn:
            conn.execute(SQL("LISTEN {0}").format(Identifier(self.channel_name)))
            wake()  # whatever committed before the LISTEN took effect
            while not stopping.is_set():
                # Bounded, so that ``stopping`` is seen without a commit.
                for _ in conn.notifies(timeout=0.5, stop_after=1):
                    wake()
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


def _refused(error: DataError) -> bool:
    """Whether ``error`` is the fence statement refusing a lost lease."""
    cause = error.__cause__
    return isinstance(cause, InvalidTextRepresentation) and _REFUSED in str(cause)


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
