"""``turnlog audit --verify``: each session's hash chain, checked from the raw
log; a tampered event is named with its kind, log position, session seq and
topic, and fails the command."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest

from turnlog.store import Store

OK_EVENTS = 1 + 2 * 12  # SessionCreated, then two turns of twelve events
"""Events of a session ``filled`` writes (two turns of one tool call each)."""


def location(url: str) -> str:
    store = Store(url)
    try:
        return store.location
    finally:
        store.close()


def alter_tool_output(url: str, session_id: str) -> tuple[int, int]:
    """Edits a ToolCallFinished of ``session_id`` in the SQLite file, as an
    intruder with write access would; returns its (position, session seq)."""
    db = Path(url.removeprefix("sqlite:///"))
    marker = f'"output":"{session_id.upper()}-1"'.encode()
    with sqlite3.connect(db) as connection:
        rows = connection.execute(
            "SELECT rowid, state FROM stored_events "
            "WHERE topic = 'turnlog:ToolCallFinished' ORDER BY rowid"
        ).fetchall()
        position, state = next((r, s) for r, s in rows if marker in s)
        forged = state.replace(marker, b'"output":"forged"')
        connection.execute(
            "UPDATE stored_events SET state = ? WHERE rowid = ?", (forged, position)
        )
        connection.commit()
    return position, json.loads(state)["session_seq"]


def test_an_intact_session_verifies(turnlog, store_url: str, filled) -> None:
    filled(store_url)

    result = turnlog("--store", store_url, "audit", "s1", "--verify")

    assert (result.code, result.err) == (0, "")
    assert result.out == f"s1: ok, {OK_EVENTS} events checked\n"


def test_a_tampered_session_names_its_first_bad_event_and_exits_1(
    turnlog, sqlite_url: str, filled
) -> None:
    filled(sqlite_url)
    position, seq = alter_tool_output(sqlite_url, "s1")

    result = turnlog("--store", sqlite_url, "audit", "s1", "--verify")

    assert (result.code, result.err) == (1, "")
    assert result.out == (
        f"s1: FAILED, altered event at log position {position} "
        f"(session seq {seq}, ToolCallFinished): its content does not match its link\n"
    )
    other = turnlog("--store", sqlite_url, "audit", "s2", "--verify")
    assert (other.code, other.out) == (0, f"s2: ok, {OK_EVENTS} events checked\n")


def test_verify_all_gives_every_verdict_and_the_rate(
    turnlog, sqlite_url: str, filled
) -> None:
    filled(sqlite_url, sessions=("s1", "s2", "s3"))

    clean = turnlog("--store", sqlite_url, "audit", "--verify", "--all")

    assert (clean.code, clean.err) == (0, "")
    *verdicts, summary = clean.out.splitlines()
    assert verdicts == [f"s{n}: ok, {OK_EVENTS} events checked" for n in (1, 2, 3)]
    assert re.fullmatch(
        rf"3 sessions, 0 failed; {3 * OK_EVENTS} events checked "
        r"in \d+\.\d\d s \([\d,]+ events/s\)",
        summary,
    ), summary

    position, _ = alter_tool_output(sqlite_url, "s2")
    tampered = turnlog("--store", sqlite_url, "audit", "--all", "--verify")

    assert tampered.code == 1
    lines = tampered.out.splitlines()
    assert (
        lines[0]
        == lines[2].replace("s3", "s1")
        == f"s1: ok, {OK_EVENTS} events checked"
    )
    assert lines[1].startswith(f"s2: FAILED, altered event at log position {position} ")
    assert lines[3].startswith(f"3 sessions, 1 failed; {3 * OK_EVENTS} events checked")


def test_verify_json_prints_one_record_per_session(
    turnlog, sqlite_url: str, filled
) -> None:
    filled(sqlite_url)
    position, seq = alter_tool_output(sqlite_url, "s2")

    result = turnlog("--store", sqlite_url, "audit", "--verify", "--all", "--json")

    assert result.code == 1
    records = [json.loads(line) for line in result.out.splitlines()]
    assert records == [
        {"session_id": "s1", "ok": True, "events": OK_EVENTS, "problem": None},
        {
            "session_id": "s2",
            "ok": False,
            "events": OK_EVENTS,
            "problem": {
                "kind": "altered",
                "position": position,
                "session_seq": seq,
                "topic": "turnlog:ToolCallFinished",
                "detail": "its content does not match its link",
            },
        },
    ]


def test_verify_all_of_an_empty_log_says_so(turnlog, store_url: str) -> None:
    Store(store_url).close()  # an empty log

    result = turnlog("--store", store_url, "audit", "--verify", "--all")

    assert (result.code, result.err) == (0, "")
    assert result.out == f"no sessions in the log at {location(store_url)}\n"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["audit"], "give a SESSION, or --verify --all"),
        (["audit", "s1", "--verify", "--all"], "give a SESSION, or --verify --all"),
        (["audit", "--all"], "--all works with --verify"),
        (["audit", "nope", "--verify"], "no session 'nope' in the log at"),
    ],
)
def test_verify_usage_mistakes_exit_2(
    turnlog, sqlite_url: str, filled, argv: list[str], message: str
) -> None:
    filled(sqlite_url, sessions=("s1",), turns=1)

    result = turnlog("--store", sqlite_url, *argv)

    assert (result.code, result.out) == (2, "")
    assert message in result.error_line()


def test_verify_looks_at_no_log_that_is_not_there(turnlog, tmp_path: Path) -> None:
    log = tmp_path / "log.sqlite3"
    url = f"sqlite:///{log}"

    one = turnlog("--store", url, "audit", "s1", "--verify")
    every = turnlog("--store", url, "audit", "--verify", "--all")

    assert one.code == every.code == 2
    assert one.error_line() == (
        f"turnlog: error: no session 's1': there is no log at {log}"
    )
    assert every.error_line() == f"turnlog: error: there is no log at {log}"
    assert not log.exists()
