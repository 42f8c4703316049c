"""The store's tests. This folder goes on ``sys.path`` for
``store_support``, the helpers they share; the fixtures they share are here."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

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
