"""The SQLite pool's writer's turn taken without a wait: eventsourcing's rules kept.

``CachingConnectionPool`` lends a writer's connection itself when nothing
needs a wait (turnlog.store.sqlite_pool); these hold that short way to the
rules of eventsourcing's pool, which does the rest: one writer at a time,
no writer beside a reader where reads exclude writes (memory://), the
connection returned to the pool or closed when the pool is full, and the
pool's errors for a closed pool or a stranger's connection.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from eventsourcing.persistence import (
    ConnectionNotFromPoolError,
    ConnectionPoolClosedError,
    StoredEvent,
)
from store_support import WatchedLock

from turnlog.store.log import Store
from turnlog.store.sqlite import SQLiteLogRecorder
from turnlog.store.sqlite_pool import CachingConnectionPool

WAIT = 10.0
"""Seconds a test waits for another thread to reach a point."""


class WatchedCondition(threading.Condition):
    """A condition that says when a thread starts to wait on it."""

    def __init__(self) -> None:
        super().__init__()
        self.waiting = threading.Event()

    def wait(self, timeout: float | None = None) -> bool:
        self.waiting.set()
        return super().wait(timeout)


def lent_after_a_wait(
    pool: CachingConnectionPool,
    waiting: threading.Event,
    release: Callable[[], None],
) -> Any:
    """A writer's connection that another thread asks ``pool`` for: it must
    wait (``waiting`` is set, nothing lent) until ``release`` runs."""
    lent: list[Any] = []
    writer = threading.Thread(
        target=lambda: lent.append(pool.get_connection(is_writer=True))
    )
    writer.start()
    try:
        assert waiting.wait(WAIT)
        assert lent == []
    finally:
        release()
        writer.join(WAIT)
    assert not writer.is_alive()
    assert len(lent) == 1
    return lent[0]


@pytest.fixture
def file_pool(tmp_path: Path) -> Iterator[CachingConnectionPool]:
    pool = CachingConnectionPool(db_name=str(tmp_path / "log.sqlite3"), pool_size=2)
    yield pool
    pool.close()


def test_a_writer_waits_for_a_reader_where_reads_exclude_writes() -> None:
    store = Store("memory://")
    try:
        pool = store.datastore.pool
        assert isinstance(pool, CachingConnectionPool)
        assert pool._mutually_exclusive_read_write  # memory://'s shared cache
        pool._no_readers = WatchedCondition()
        reader = pool.get_connection(is_writer=False)
        # Another connection, left idle: the writer has one to take.
        pool.put_connection(pool.get_connection(is_writer=False))
        assert pool.num_in_pool >= 1
        # The writer's turn was free, but a reader holds a connection.
        writer = lent_after_a_wait(
            pool, pool._no_readers.waiting, lambda: pool.put_connection(reader)
        )
        pool.put_connection(writer)
        assert pool.num_in_use == 0
    finally:
        store.close()


def test_a_second_writer_waits_for_the_first(
    file_pool: CachingConnectionPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = file_pool.get_connection(is_writer=True)
    writer_lock = WatchedLock(file_pool._writer_lock)
    monkeypatch.setattr(file_pool, "_writer_lock", writer_lock)
    # The writer's turn is taken: the second waits for it in eventsourcing's
    # pool until the first is returned.
    second = lent_after_a_wait(
        file_pool, writer_lock.waiting, lambda: file_pool.put_connection(first)
    )
    file_pool.put_connection(second)


def test_a_returned_writer_is_lent_again_first(
    file_pool: CachingConnectionPool,
) -> None:
    first = file_pool.get_connection(is_writer=True)
    file_pool.put_connection(first)
    assert (file_pool.num_in_use, file_pool.num_in_pool) == (0, 1)
    again = file_pool.get_connection(is_writer=True)
    assert again is first
    assert again.is_writer is True
    file_pool.put_connection(again)
    assert again.is_writer is None
    assert (file_pool.num_in_use, file_pool.num_in_pool) == (0, 1)


def test_a_writer_returned_to_a_full_pool_is_closed(
    file_pool: CachingConnectionPool,
) -> None:
    connections = [file_pool.get_connection(is_writer=None) for _ in range(2)]
    writer = file_pool.get_connection(is_writer=True)  # a third: past pool_size
    for connection in connections:
        file_pool.put_connection(connection)
    file_pool.put_connection(writer)
    assert writer.closed
    assert (file_pool.num_in_use, file_pool.num_in_pool) == (0, 2)
    # The writer's turn was given back with it.
    file_pool.put_connection(file_pool.get_connection(is_writer=True))


def test_a_strangers_connection_is_refused(
    file_pool: CachingConnectionPool, tmp_path: Path
) -> None:
    other = CachingConnectionPool(db_name=str(tmp_path / "other.sqlite3"))
    try:
        stranger = other.get_connection(is_writer=True)
        with pytest.raises(ConnectionNotFromPoolError):
            file_pool.put_connection(stranger)
    finally:
        other.close()


def test_a_closed_pool_lends_and_takes_back_nothing(
    file_pool: CachingConnectionPool,
) -> None:
    writer = file_pool.get_connection(is_writer=True)
    file_pool.put_connection(writer)
    held = file_pool.get_connection(is_writer=True)
    file_pool.close()
    with pytest.raises(ConnectionPoolClosedError):
        file_pool.get_connection(is_writer=True)
    with pytest.raises(ConnectionPoolClosedError):
        file_pool.put_connection(held)


def test_connections_that_age_out_go_through_eventsourcings_pool(
    tmp_path: Path,
) -> None:
    pool = CachingConnectionPool(db_name=str(tmp_path / "log.sqlite3"), max_age=60.0)
    try:
        writer = pool.get_connection(is_writer=True)
        pool.put_connection(writer)
        assert (pool.num_in_use, pool.num_in_pool) == (0, 1)
        assert not writer.closed
    finally:
        pool.close()


def test_readers_and_writers_on_many_threads_all_land(
    sqlite_recorder: SQLiteLogRecorder,
) -> None:
    recorder = sqlite_recorder
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def work(index: int) -> None:
        try:
            start.wait(WAIT)
            for version in range(1, 101):
                aggregate = _aggregate(index)
                recorder.insert_events(
                    [StoredEvent(aggregate, version, "turnlog:Probe", b"{}")]
                )
                recorder.select_events(aggregate, desc=True, limit=1)
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT * 6)
    assert not any(thread.is_alive() for thread in threads)
    assert errors == []
    for index in range(4):
        stored = recorder.select_events(_aggregate(index))
        assert [e.originator_version for e in stored] == list(range(1, 101))
    positions = [n.id for n in recorder.select_notifications(0, 1000)]
    assert positions == sorted(set(positions))
    assert len(positions) == 400


def _aggregate(index: int) -> uuid.UUID:
    return uuid.UUID(int=index + 1)
