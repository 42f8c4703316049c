"""Fixtures of the scenarios: a runtime on a fresh SQLite file, and real
turnlog processes to kill. This folder goes on ``sys.path`` for
``compaction_models``, the models the seed scenarios share."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from turnlog import Runtime

sys.path.insert(0, str(Path(__file__).parent))

from kill_support import kill_when

CHILD = Path(__file__).with_name("crash_child.py")


@pytest.fixture
def rt(sqlite_url: str) -> Iterator[Runtime]:
    """A runtime on a fresh SQLite file store, closed after the test."""
    runtime = Runtime.open(sqlite_url)
    yield runtime
    runtime.close()


@pytest.fixture
def kill_child_at() -> Callable[[str, str, str, str], None]:
    """Runs crash_child.py, waits for a marker line, then SIGKILLs it."""
    return run_child_until


def run_child_until(url: str, session_id: str, mode: str, marker: str) -> None:
    """Starts the child, waits for ``marker`` on its stdout, then SIGKILLs it."""
    kill_when(CHILD, marker, url, session_id, mode)
