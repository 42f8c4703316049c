"""The hash chain catches every kind of tampering, naming the first bad event.

Each test edits the SQLite events table directly, as an intruder with
write access to the database file would.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from turnlog import (
    Agent,
    Runtime,
    ScriptedModel,
    UnknownSessionError,
    calls,
    function_tool,
    tool_call,
)
from turnlog.domain.ids import session_uuid
from turnlog.projections.anchors import expected_heads, recorded_heads
from turnlog.store.log import Store
from turnlog.store.verify import verify_all, verify_session


@function_tool
def lookup(key: str) -> str:
    """Looks up."""
    return key


def fill(url: str) -> None:
    model = ScriptedModel()
    for n in range(3):
        model.add(calls(tool_call("lookup", {"key": f"k{n}"})), f"answer {n}")
    with Runtime.open(url) as rt:
        session = rt.create_session(
            Agent("a", model=model, tools=[lookup]), session_id="s"
        )
        other = rt.create_session(
            Agent("a", model=ScriptedModel(["x"])), session_id="o"
        )
        for n in range(3):
            session.prompt(f"question {n}", timeout=10)
        other.prompt("hello", timeout=10)
        rt.projections.catch_up()  # the sessions view holds every head


@pytest.fixture
def log(store_url: str) -> str:
    """A log with two sessions, on each backend."""
    fill(store_url)
    return store_url


@pytest.fixture
def sqlite_log(sqlite_url: str) -> str:
    """The same log in an SQLite file the tests can tamper with."""
    fill(sqlite_url)
    return sqlite_url


def test_an_untouched_log_verifies(log: str) -> None:
    store = Store(log)
    try:
        report = verify_session(store, "s")
        assert report.ok
        assert report.events == 1 + 3 * 12
        assert [r.session_id for r in verify_all(store)] == ["s", "o"]
        assert all(r.ok for r in verify_all(store))
        with pytest.raises(UnknownSessionError):
            verify_session(store, "nobody")
    finally:
        store.close()


def sqlite_path(url: str) -> Path:
    return Path(url.removeprefix("sqlite:///"))


def positions(db: Path) -> list[tuple[int, str, bytes]]:
    with closing(sqlite3.connect(db)) as connection:
        return list(
            connection.execute(
                "SELECT rowid, topic, state FROM stored_events ORDER BY rowid"
            )
        )


def tamper(db: Path, statement: str, params: tuple = ()) -> None:
    with closing(sqlite3.connect(db)) as connection:
        connection.execute(statement, params)
        connection.commit()


def problem_after(url: str):
    store = Store(url)
    try:
        return verify_session(store, "s").problem
    finally:
        store.close()


def tool_output_row(db: Path) -> tuple[int, bytes]:
    for position, topic, state in positions(db):
        if topic == "turnlog:ToolCallFinished" and b'"output":"k1"' in state:
            return position, state
    raise AssertionError("no ToolCallFinished for k1")


def test_an_altered_event_is_named(sqlite_log: str) -> None:
    db = sqlite_path(sqlite_log)
    position, state = tool_output_row(db)
    forged = state.replace(b'"output":"k1"', b'"output":"k9"')
    tamper(db, "UPDATE stored_events SET state = ? WHERE rowid = ?", (forged, position))
    problem = problem_after(sqlite_log)
    assert (problem.kind, problem.position, problem.topic) == (
        "altered",
        position,
        "turnlog:ToolCallFinished",
    )


def test_a_deleted_event_is_named(sqlite_log: str) -> None:
    db = sqlite_path(sqlite_log)
    position, _ = tool_output_row(db)
    tamper(db, "DELETE FROM stored_events WHERE rowid = ?", (position,))
    problem = problem_after(sqlite_log)
    assert problem.kind == "missing"
    assert problem.position > position  # the event after the gap


def test_an_inserted_event_is_named(sqlite_log: str) -> None:
    db = sqlite_path(sqlite_log)
    position, state = tool_output_row(db)
    with closing(sqlite3.connect(db)) as connection:
        originator, version = connection.execute(
            "SELECT originator_id, originator_version FROM stored_events "
            "WHERE rowid = ?",
            (position,),
        ).fetchone()
        connection.execute(
            "INSERT INTO stored_events VALUES (?, ?, ?, ?)",
            (originator, version + 100, "turnlog:WarningRaised", state),
        )
        connection.commit()
        inserted = connection.execute(
            "SELECT MAX(rowid) FROM stored_events"
        ).fetchone()[0]
    problem = problem_after(sqlite_log)
    assert (problem.kind, problem.position) == ("inserted", inserted)


def test_reordered_events_are_named(sqlite_log: str) -> None:
    db = sqlite_path(sqlite_log)
    position, _ = tool_output_row(db)
    earlier = position - 1
    # swap the two rows' places in the log (their content stays intact)
    tamper(db, "UPDATE stored_events SET rowid = -1 WHERE rowid = ?", (position,))
    tamper(
        db, "UPDATE stored_events SET rowid = ? WHERE rowid = ?", (position, earlier)
    )
    tamper(db, "UPDATE stored_events SET rowid = ? WHERE rowid = -1", (earlier,))
    problem = problem_after(sqlite_log)
    assert problem.kind == "reordered"
    assert problem.position == earlier


def test_other_sessions_still_verify_after_one_is_tampered(sqlite_log: str) -> None:
    db = sqlite_path(sqlite_log)
    position, state = tool_output_row(db)
    tamper(
        db,
        "UPDATE stored_events SET state = ? WHERE rowid = ?",
        (state.replace(b"k1", b"k7"), position),
    )
    store = Store(sqlite_log)
    try:
        verdicts = {r.session_id: r.ok for r in verify_all(store)}
    finally:
        store.close()
    assert verdicts == {"s": False, "o": True}
    assert session_uuid("s") != session_uuid("o")


def test_a_session_whose_first_event_was_deleted_is_still_reported(
    sqlite_log: str,
) -> None:
    db = sqlite_path(sqlite_log)
    tamper(db, "DELETE FROM stored_events WHERE topic = 'turnlog:SessionCreated'")
    store = Store(sqlite_log)
    try:
        reports = {r.session_id: r for r in verify_all(store)}
    finally:
        store.close()
    assert set(reports) == {"s", "o"}
    assert reports["s"].problem.kind == "missing"
    assert reports["o"].problem.kind == "missing"


def test_events_removed_from_the_end_are_named_by_the_recorded_head(
    sqlite_log: str,
) -> None:
    db = sqlite_path(sqlite_log)
    session = [
        (position, state)
        for position, _, state in positions(db)
        if b'"session_id":"s"' in state
    ]
    last_left = session[-3][0]
    tamper(
        db,
        "DELETE FROM stored_events WHERE rowid IN (?, ?)",
        (session[-2][0], session[-1][0]),
    )
    store = Store(sqlite_log)
    try:
        # The chain alone is intact, only shorter: the recorded head tells.
        assert verify_session(store, "s").ok
        report = verify_session(store, "s", expected_heads(store, "s"))
        every = {
            r.session_id: r for r in verify_all(store, None, recorded_heads(store))
        }
    finally:
        store.close()
    problem = report.problem
    assert (problem.kind, problem.position, problem.sequence) == (
        "truncated",
        last_left,
        1 + 3 * 12 - 2,
    )
    assert problem.detail == (
        "the chain ends here, but the sessions view holds its head at sequence 37: "
        "events with sequence 36 to 37 are gone"
    )
    assert every["s"].problem == problem
    assert every["o"].ok
