"""Exporting and importing forks: the source's prefix travels for checking,
and a fork is never imported without its source (SQLite to PostgreSQL)."""

from __future__ import annotations

import pytest

from turnlog import Agent, InvalidInputError, Runtime, ScriptedModel
from turnlog.store.log import Store
from turnlog.store.transfer import export_session, import_events
from turnlog.store.verify import verify_session


def fill(url: str) -> None:
    model = ScriptedModel(["one", "two", "three", "fork one", "fork two"])
    with Runtime.open(url) as rt:
        session = rt.create_session(Agent("a", model=model), session_id="src")
        for text in ("first", "second", "third"):
            session.prompt(text, timeout=10)
        fork = rt.fork_session("src", after_turn=2, session_id="f")
        fork.prompt("in f", timeout=10)
        deeper = rt.fork_session("f", session_id="ff")
        deeper.prompt("in ff", timeout=10)


def exported(url: str, session_id: str) -> list[bytes]:
    store = Store(url)
    try:
        return export_session(store, session_id)
    finally:
        store.close()


def imported(url: str, lines: list[bytes]) -> int:
    store = Store(url)
    try:
        return import_events(store, lines)
    finally:
        store.close()


def test_a_fork_imports_after_its_source_and_only_then(
    sqlite_url: str, postgres_schema_url: str
) -> None:
    fill(sqlite_url)
    fork_lines = exported(sqlite_url, "f")
    deeper_lines = exported(sqlite_url, "ff")
    with pytest.raises(InvalidInputError, match="import 'src' first"):
        imported(postgres_schema_url, fork_lines)
    store = Store(postgres_schema_url)
    try:
        assert store.max_position() == 0
    finally:
        store.close()
    imported(postgres_schema_url, exported(sqlite_url, "src"))
    with pytest.raises(InvalidInputError, match="import 'f' first"):
        imported(postgres_schema_url, deeper_lines)
    own = imported(postgres_schema_url, fork_lines)
    assert own < len(fork_lines) - 1  # the carried prefix is not written again
    imported(postgres_schema_url, deeper_lines)
    with Runtime.open(sqlite_url) as here, Runtime.open(postgres_schema_url) as there:
        for session_id in ("src", "f", "ff"):
            assert verify_session(there.store, session_id).ok
            assert [e.msg for e in there.replay_events(session_id)] == [
                e.msg for e in here.replay_events(session_id)
            ]
            assert (
                there.checkpoints.load(session_id).context
                == here.checkpoints.load(session_id).context
            )


def test_a_fork_is_refused_against_a_different_source(
    sqlite_url: str, postgres_schema_url: str
) -> None:
    fill(sqlite_url)
    with Runtime.open(postgres_schema_url) as rt:
        model = ScriptedModel(["other one", "other two", "other three"])
        session = rt.create_session(Agent("a", model=model), session_id="src")
        for text in ("first", "second", "third"):
            session.prompt(text, timeout=10)
        before = rt.store.max_position()
    with pytest.raises(InvalidInputError, match="not the same source"):
        imported(postgres_schema_url, exported(sqlite_url, "f"))
    store = Store(postgres_schema_url)
    try:
        assert store.max_position() == before
    finally:
        store.close()
