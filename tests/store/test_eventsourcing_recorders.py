"""eventsourcing's own recorder suites, run against turnlog's recorders.

turnlog's recorders subclass eventsourcing's and hook into it where it
is designed to be extended: ``_insert_events`` inside the SQLite insert's
transaction, the pool's abstract ``_create_connection``, and the
PostgreSQL recorder's ``lock_table_statements``. The PostgreSQL insert
itself is turnlog's (one round trip, turnlog.store.postgres_insert), on
eventsourcing's table, lock statements and channel. These are
eventsourcing's own test cases (``eventsourcing.tests.persistence``),
including the one that positions are never interleaved between
concurrent inserts, so an upgrade of eventsourcing that changes any of
those seams fails here, in CI, before it reaches a log. Each suite runs
twice: as eventsourcing calls the recorder, and with every insert fenced
by a lease that holds (so turnlog's fence check runs in every one of
eventsourcing's inserts). Each PostgreSQL test gets a schema of its own.
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from eventsourcing.persistence import StoredEvent
from eventsourcing.sqlite import SQLiteDatastore
from eventsourcing.tests.persistence import (
    ApplicationRecorderTestCase,
    NonInterleavingNotificationIDsBaseCase,
)

from turnlog.domain.errors import LeaseLostError
from turnlog.store.fencing import LEASE_TABLE, Fence
from turnlog.store.sqlite import SQLiteLogRecorder
from turnlog.store.sqlite_pool import CachingConnectionPool

THREAD_WAIT = 30.0
"""Seconds a test's leftover thread may take to finish."""

HELD = Fence("held-session", "this-process", 1)
"""The lease every insert of a fenced suite is checked against."""


def fenced(recorder_class: type[Any]) -> type[Any]:
    """``recorder_class``, fencing every insert with the lease ``HELD``."""

    class FencedRecorder(recorder_class):  # type: ignore[misc, valid-type]
        def insert_events(self, stored_events: Any, **kwargs: Any) -> Any:
            return super().insert_events(stored_events, fence=HELD, **kwargs)

    return FencedRecorder


def hold_lease(recorder: Any, placeholder: str) -> None:
    """Creates the lease table with the lease ``HELD`` in it."""
    recorder.create_lease_table()
    table = recorder.qualify(LEASE_TABLE)
    with recorder.datastore.transaction(commit=True) as cursor:
        cursor.execute(
            f"INSERT INTO {table} (session_id, owner, renewed, epoch) "
            f"VALUES ({placeholder}, {placeholder}, 0, {placeholder}) "
            "ON CONFLICT (session_id) DO NOTHING",
            HELD,
        )


@contextlib.contextmanager
def threads_finished() -> Iterator[None]:
    """Waits, on leaving, for the (non-daemon) threads started inside to end.

    eventsourcing's concurrency tests tell their reader threads to stop
    but do not join them: closing the datastore under a reader still in
    a query would crash SQLite's C library, so the connections are
    closed only once those threads are done.
    """
    before = set(threading.enumerate())
    yield
    for thread in set(threading.enumerate()) - before:
        if thread.daemon:  # the connection pools' own workers
            continue
        thread.join(timeout=THREAD_WAIT)
        assert not thread.is_alive(), f"{thread} still running"


class SQLiteRecorders:
    """Makes turnlog's SQLite recorders on a fresh file per test."""

    recorder_class: type[Any] = SQLiteLogRecorder

    @pytest.fixture(autouse=True)
    def _fresh_file(self, tmp_path: Path) -> Iterator[None]:
        self._path = tmp_path / "log.sqlite3"
        self._datastores: list[SQLiteDatastore] = []
        with threads_finished():
            yield
        for datastore in self._datastores:
            datastore.close()

    def create_recorder(self) -> SQLiteLogRecorder:
        datastore = SQLiteDatastore(str(self._path))
        self._datastores.append(datastore)
        recorder = self.recorder_class(datastore)
        assert isinstance(datastore.pool, CachingConnectionPool)
        recorder.create_table()
        hold_lease(recorder, "?")
        return recorder


class PostgresRecorders:
    """Makes turnlog's PostgreSQL recorders in a fresh schema per test."""

    fenced = False

    @pytest.fixture(autouse=True)
    def _fresh_schema(self, postgres_schema_url: str) -> Iterator[None]:
        from turnlog.store.opening import parse_store_url
        from turnlog.store.postgres import PostgresLogRecorder

        self._env = parse_store_url(postgres_schema_url)
        PostgresLogRecorder.prepare(self._env, postgres_schema_url, read_only=False)
        self._datastores: list[Any] = []
        with threads_finished():
            yield
        for datastore in self._datastores:
            datastore.close()

    def create_recorder(self) -> Any:
        from eventsourcing.postgres import PostgresDatastore

        from turnlog.store.postgres import PostgresLogRecorder

        env = self._env
        datastore = PostgresDatastore(
            dbname=env["POSTGRES_DBNAME"],
            host=env["POSTGRES_HOST"],
            port=env["POSTGRES_PORT"],
            user=env["POSTGRES_USER"],
            password=env["POSTGRES_PASSWORD"],
            schema=env["POSTGRES_SCHEMA"],
        )
        self._datastores.append(datastore)
        recorder_class = (
            fenced(PostgresLogRecorder) if self.fenced else PostgresLogRecorder
        )
        recorder = recorder_class(datastore)
        recorder.create_table()
        hold_lease(recorder, "%s")
        return recorder


class TestSQLiteApplicationRecorder(SQLiteRecorders, ApplicationRecorderTestCase):
    pass


class TestSQLiteNonInterleavingIds(
    SQLiteRecorders, NonInterleavingNotificationIDsBaseCase
):
    pass


class TestPostgresApplicationRecorder(PostgresRecorders, ApplicationRecorderTestCase):
    pass


class TestPostgresNonInterleavingIds(
    PostgresRecorders, NonInterleavingNotificationIDsBaseCase
):
    pass


class FencedChecks:
    """That the fenced suites' inserts really are checked against ``HELD``."""

    create_recorder: Any

    def test_an_insert_whose_lease_is_gone_records_nothing(self) -> None:
        recorder = self.create_recorder()
        with recorder.datastore.transaction(commit=True) as cursor:
            cursor.execute(f"DELETE FROM {recorder.qualify(LEASE_TABLE)}")
        event = StoredEvent(uuid.uuid4(), 1, "topic", b"state")
        with pytest.raises(LeaseLostError):
            recorder.insert_events([event])
        assert not recorder.max_notification_id()


class TestFencedSQLiteApplicationRecorder(
    FencedChecks, SQLiteRecorders, ApplicationRecorderTestCase
):
    recorder_class = fenced(SQLiteLogRecorder)


class TestFencedSQLiteNonInterleavingIds(
    SQLiteRecorders, NonInterleavingNotificationIDsBaseCase
):
    recorder_class = fenced(SQLiteLogRecorder)


class TestFencedPostgresApplicationRecorder(
    FencedChecks, PostgresRecorders, ApplicationRecorderTestCase
):
    fenced = True


class TestFencedPostgresNonInterleavingIds(
    PostgresRecorders, NonInterleavingNotificationIDsBaseCase
):
    fenced = True
