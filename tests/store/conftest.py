"""The store's tests. This folder goes on ``sys.path`` for
``store_support``, the helpers they share; the fixtures they share are here."""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from turnlog.store.log import Store
from turnlog.store.sqlite import SQLiteLogRecorder


@pytest.fixture(params=["memory", "file"])
def sqlite_recorder(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[SQLiteLogRecorder]:
    """The recorder of an SQLite log, in memory and in a file (closed after)."""
    where = request.param
    url = "memory://" if where == "memory" else f"sqlite:///{tmp_path / 'log.db'}"
    store = Store(url)
    try:
        recorder = store.backend
        assert isinstance(recorder, SQLiteLogRecorder)
        yield recorder
    finally:
        store.close()


@pytest.fixture
def sqlite_connections(
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[list[sqlite3.Connection]]:
    """Every connection ``sqlite3.connect`` opens during the test, so that it
    can check none is left open; all are closed after it in any case."""
    connections: list[sqlite3.Connection] = []
    connect = sqlite3.connect

    def recording(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        connection = connect(*args, **kwargs)
        connections.append(connection)
        return connection

    monkeypatch.setattr(sqlite3, "connect", recording)
    try:
        yield connections
    finally:
        for connection in connections:
            connection.close()
