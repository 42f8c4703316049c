"""The Store API on a damaged or read-only log: StoreError naming the log."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest
from store_support import still_open

from turnlog import Agent, Runtime, ScriptedModel
from turnlog.domain.errors import StoreError, StoreURLError
from turnlog.store.log import Store
from turnlog.store.opening import integrity_problem
from turnlog.store.sqlite_pool import CachingConnectionPool


def _log_with_damaged_events(path: Path) -> None:
    with Runtime.open(f"sqlite:///{path}") as runtime:
        for number in range(4):
            model = ScriptedModel()
            model.add("answer " * 200)
            session = runtime.create_session(
                Agent("a", model=model), session_id=f"s{number}"
            )
            assert session.prompt("question " * 200, timeout=10).completed
    connection = sqlite3.connect(path)
    size = connection.execute("PRAGMA page_size").fetchone()[0]
    pages = [
        row[0]
        for row in connection.execute(
            "SELECT pageno FROM dbstat WHERE name = 'stored_events' AND pageno != "
            "(SELECT rootpage FROM sqlite_master WHERE name = 'stored_events')"
        )
    ]
    connection.close()
    assert pages
    with path.open("r+b") as file:
        for page in pages:
            file.seek((page - 1) * size)
            file.write(random.Random(page).randbytes(size))


def test_reading_damage_raises_a_store_error_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "log.sqlite3"
    _log_with_damaged_events(path)

    store = Store(f"sqlite:///{path}")  # the damage is past what opening reads
    try:
        with pytest.raises(StoreError, match=f"the log at {path} is damaged: "):
            store.max_position()
        with pytest.raises(StoreError, match="is damaged"):
            store.notifications(1, 10)
    finally:
        store.close()


def test_only_an_sqlite_file_opens_read_only() -> None:
    with pytest.raises(StoreURLError, match="only an SQLite log file"):
        Store("memory://", read_only=True)


@pytest.mark.parametrize("read_only", [False, True])
def test_a_file_that_is_no_database_past_its_header_is_left_closed(
    tmp_path: Path, sqlite_connections: list[sqlite3.Connection], read_only: bool
) -> None:
    """SQLite opens such a file and fails its first read with DatabaseError;
    the connection opened to read it must not wait for the garbage collector
    to close the file."""
    path = tmp_path / "log.sqlite3"
    connection = sqlite3.connect(path)
    connection.execute("CREATE TABLE t (x)")
    connection.commit()
    connection.close()
    header = path.read_bytes()[:100]
    path.write_bytes(header + random.Random(7).randbytes(3 * 4096))

    with pytest.raises(StoreError, match=f"the log at {path} is damaged: "):
        Store(f"sqlite:///{path}", read_only=read_only)
    assert integrity_problem(f"sqlite:///{path}") is not None

    assert len(sqlite_connections) > 1  # the file's writer, and the reads of it
    assert still_open(sqlite_connections) == []


def test_a_connection_the_pool_cannot_set_up_is_closed(
    tmp_path: Path, sqlite_connections: list[sqlite3.Connection]
) -> None:
    """SQLite reads a file first at the pool's first statement on it, which
    fails on a file that is no database (or a locked one)."""
    path = tmp_path / "log.sqlite3"
    path.write_bytes(b"no database " * 400)
    pool = CachingConnectionPool(db_name=str(path))
    try:
        with pytest.raises(sqlite3.DatabaseError, match="not a database"):
            pool.get_connection(is_writer=False)
    finally:
        pool.close()

    assert len(sqlite_connections) == 1
    assert still_open(sqlite_connections) == []
