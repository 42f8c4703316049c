"""A file log's WAL is checkpointed by a thread of its own, never by a save.

SQLite's own checkpoints run inside the commit that passes their mark,
copying the WAL into the log file and syncing it before that save
returns; turnlog.store.wal moves them off the savers' threads.
"""

from __future__ import annotations

import sqlite3
import threading
from contextlib import closing
from pathlib import Path

import pytest
from store_support import new_session

import turnlog.store.wal
from turnlog.store.log import Store


def _pool_connection_setting(store: Store, pragma: str) -> int:
    with store.datastore.get_connection(commit=False) as connection:
        cursor = connection.cursor()
        cursor.execute(f"PRAGMA {pragma}")
        return int(cursor.fetchall()[0][0])


def test_the_logs_connections_never_checkpoint_themselves(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'log.sqlite3'}")
    try:
        assert _pool_connection_setting(store, "wal_autocheckpoint") == 0
        assert (
            _pool_connection_setting(store, "journal_size_limit")
            == turnlog.store.wal.wal_file_limit()
        )
    finally:
        store.close()


def test_the_keeper_checkpoints_while_sessions_save(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(turnlog.store.wal, "CHECKPOINT_PAGES", 16)
    path = tmp_path / "log.sqlite3"
    store = Store(f"sqlite:///{path}")
    checkpointers: list[str] = []
    keeper = store.datastore.pool.wal
    assert keeper is not None
    checkpoint = keeper._checkpoint

    def noted(connection: sqlite3.Connection) -> None:
        checkpointers.append(threading.current_thread().name)
        checkpoint(connection)

    monkeypatch.setattr(keeper, "_checkpoint", noted)
    try:
        before = keeper.checkpoints
        for number in range(20):
            store.save(new_session(f"s{number}"))
        assert keeper.wait_for_checkpoint(before, timeout=30)
        # The log file holds what was checkpointed: every session reads
        # back from it alone, the WAL set aside.
        copy = tmp_path / "copy.sqlite3"
        copy.write_bytes(path.read_bytes())
        with closing(sqlite3.connect(copy)) as connection:
            (count,) = connection.execute(
                "SELECT count(DISTINCT originator_id) FROM stored_events"
            ).fetchone()
        assert count >= 1
    finally:
        store.close()
    assert checkpointers
    assert set(checkpointers) == {"turnlog-checkpoint"}


def test_closing_the_store_stops_the_keeper(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(turnlog.store.wal, "CHECKPOINT_PAGES", 4)
    store = Store(f"sqlite:///{tmp_path / 'log.sqlite3'}")
    keeper = store.datastore.pool.wal
    assert keeper is not None
    before = keeper.checkpoints
    for number in range(4):
        store.save(new_session(f"s{number}"))
    assert keeper.wait_for_checkpoint(before, timeout=30)
    store.close()
    assert not [t for t in threading.enumerate() if t.name == "turnlog-checkpoint"]


def test_a_lone_writers_commits_write_over_the_wal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A commit that grows the WAL file costs its flush more than one that
    # writes over blocks the file has: once the WAL has grown, the keeper's
    # restarts keep it from being emptied, down to the file limit at most.
    monkeypatch.setattr(turnlog.store.wal, "WAL_CHECKPOINT_BYTES", 64 * 1024)
    path = tmp_path / "log.sqlite3"
    wal = path.with_name(path.name + "-wal")
    store = Store(f"sqlite:///{path}")
    keeper = store.datastore.pool.wal
    assert keeper is not None
    largest = 0
    try:
        for number in range(300):
            store.save(new_session(f"s{number}"))
            size = wal.stat().st_size
            assert size >= min(largest, turnlog.store.wal.wal_file_limit())
            largest = max(largest, size)
    finally:
        store.close()
    assert keeper.checkpoints >= 10
