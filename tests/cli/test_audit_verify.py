"""``turnlog audit --verify``: each session's hash chain, checked from the raw
log; a tampered event is named with its kind, log position, session seq and
topic, and fails the command."""

from __future__ import annotations

import json
import re
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from cli_support import chain_at, forge_view_head, remove_events, session_positions

from turnlog.domain.events import event_name
from turnlog.store.log import Store

OK_EVENTS = 1 + 2 * 12  # SessionCreated, then two turns of twelve events
"""Events of a session ``filled`` writes (two turns of one tool call each)."""


def location(url: str) -> str:
    store = Store(url)
    try:
        return store.location
    finally:
        store.close()


def event_name_at(url: str, position: int) -> str:
    store = Store(url)
    try:
        return event_name(store.stored_at([position])[position][2])
    finally:
        store.close()


def alter_tool_output(url: str, session_id: str) -> tuple[int, int]:
    """Edits a ToolCallFinished of ``session_id`` in the SQLite file, as an
    intruder with write access would; returns its (position, session seq)."""
    db = Path(url.removeprefix("sqlite:///"))
    marker = f'"output":"{session_id.upper()}-1"'.encode()
    with closing(sqlite3.connect(db)) as connection:
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
        f"(sequence {seq}, ToolCallFinished): its content does not match its link\n"
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
                "sequence": seq,
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


# -- removal at a session's end, and anchors ----------------------------------


def test_events_removed_from_a_sessions_end_fail_verify(
    turnlog, store_url: str, filled
) -> None:
    filled(store_url)
    positions = session_positions(store_url, "s1")
    remove_events(store_url, positions[-2:])  # its last TurnCompleted and one more
    last = positions[-3]

    one = turnlog("--store", store_url, "audit", "s1", "--verify")
    every = turnlog("--store", store_url, "audit", "--verify", "--all")

    assert (one.code, one.err) == (1, "")
    assert one.out == (
        f"s1: FAILED, truncated after log position {last} (sequence "
        f"{OK_EVENTS - 2}, {event_name_at(store_url, last)}): the chain ends here, "
        f"but the sessions view holds its head at sequence {OK_EVENTS}: events with "
        f"sequence {OK_EVENTS - 1} to {OK_EVENTS} are gone\n"
    )
    assert every.code == 1
    assert every.out.splitlines()[:2] == [
        one.out.rstrip("\n"),
        f"s2: ok, {OK_EVENTS} events checked",
    ]


def test_a_session_whose_every_event_was_removed_is_still_reported(
    turnlog, store_url: str, filled
) -> None:
    filled(store_url)
    remove_events(store_url, session_positions(store_url, "s2"))

    one = turnlog("--store", store_url, "audit", "s2", "--verify")
    every = turnlog("--store", store_url, "audit", "--verify", "--all", "--json")

    assert one.code == 1
    assert one.out.startswith("s2: FAILED, truncated: every event is gone; ")
    records = [json.loads(line) for line in every.out.splitlines()]
    assert [(r["session_id"], r["ok"]) for r in records] == [
        ("s1", True),
        ("s2", False),
    ]
    assert records[1]["problem"]["kind"] == "truncated"
    assert records[1]["events"] == 0


def test_an_anchor_catches_a_removal_the_sessions_view_was_made_to_match(
    turnlog, store_url: str, filled
) -> None:
    filled(store_url)
    head = turnlog("--store", store_url, "audit", "--head", "s1")
    record = turnlog("--store", store_url, "audit", "--head", "s1", "--json")
    positions = session_positions(store_url, "s1")
    seq, digest = chain_at(store_url, positions[-1])

    assert (head.code, head.err) == (0, "")
    assert head.out == f"s1 sequence={OK_EVENTS} sha256={digest}\n"
    assert seq == OK_EVENTS
    assert json.loads(record.out) == {
        "session_id": "s1",
        "sequence": seq,
        "sha256": digest,
    }
    anchors = [
        head.out.strip(),
        f"{seq}:{digest}",
        digest,
        f"seq={seq} sha256={digest}",  # as audit --head printed before
        f"s1 seq={seq} sha256={digest}",
    ]
    for anchor in anchors:
        intact = turnlog(
            "--store", store_url, "audit", "s1", "--verify", "--against", anchor
        )
        assert (intact.code, intact.out) == (0, f"s1: ok, {OK_EVENTS} events checked\n")

    remove_events(store_url, positions[-2:])
    forge_view_head(store_url, "s1", *chain_at(store_url, positions[-3]))

    # The view now matches the shorter chain: only the anchor knows better.
    alone = turnlog("--store", store_url, "audit", "s1", "--verify")
    assert (alone.code, alone.out) == (0, f"s1: ok, {OK_EVENTS - 2} events checked\n")
    full, short = (
        turnlog("--store", store_url, "audit", "s1", "--verify", "--against", anchor)
        for anchor in (head.out.strip(), digest)
    )
    assert full.code == short.code == 1
    assert full.out.startswith(
        f"s1: FAILED, truncated after log position {positions[-3]} "
    )
    assert full.out.endswith(
        f"but the anchor holds its head at sequence {OK_EVENTS}: events with sequence "
        f"{OK_EVENTS - 1} to {OK_EVENTS} are gone\n"
    )
    assert short.out.startswith(
        f"s1: FAILED, rewritten event at log position {positions[-3]} "
    )
    assert f"no event carries the sha256 {digest[:12]}... the anchor holds" in short.out


def test_a_session_that_went_on_after_a_removal_is_caught_as_rewritten(
    turnlog, store_url: str, filled
) -> None:
    filled(store_url, sessions=("s1",))
    anchor = turnlog("--store", store_url, "audit", "--head", "s1").out.strip()
    positions = session_positions(store_url, "s1")
    remove_events(store_url, positions[-2:])
    # The session goes on from its shorter chain: its seq passes the old head.
    filled(store_url, sessions=("s1",), turns=1)

    by_view = turnlog("--store", store_url, "audit", "s1", "--verify")
    by_anchor = turnlog(
        "--store", store_url, "audit", "s1", "--verify", "--against", anchor
    )

    assert by_anchor.code == 1
    assert by_anchor.out.startswith("s1: FAILED, rewritten event at log position ")
    assert f"(sequence {OK_EVENTS}, " in by_anchor.out
    if store_url.startswith("postgresql"):
        # The view saw the seq step back and kept the head it had.
        assert by_view.out == by_anchor.out
    else:
        # SQLite gave the removed events' positions to the new ones, which
        # the view counts as folded: only the anchor still knows the head.
        assert by_view.out.startswith("s1: ok, ")


def test_head_refuses_to_vouch_for_a_chain_that_does_not_verify(
    turnlog, sqlite_url: str, filled
) -> None:
    filled(sqlite_url)
    alter_tool_output(sqlite_url, "s1")

    result = turnlog("--store", sqlite_url, "audit", "--head", "s1")

    assert (result.code, result.out) == (1, "")
    assert result.error_line().startswith(
        "turnlog: error: no anchor for a chain that does not verify: s1: FAILED, "
        "altered event at log position "
    )


def test_rebuild_does_not_replace_a_recorded_head_with_a_shorter_one(
    turnlog, store_url: str, filled
) -> None:
    filled(store_url)
    positions = session_positions(store_url, "s1")
    remove_events(store_url, positions[-1:])

    rebuilt = turnlog("--store", store_url, "rebuild")
    after = turnlog("--store", store_url, "audit", "s1", "--verify")

    assert (rebuilt.code, rebuilt.out) == (1, "")
    assert rebuilt.err.splitlines()[-1] == (
        "turnlog: error: the log no longer reaches the chain head the sessions "
        "view holds for 's1': events were removed (see `turnlog audit --verify "
        "--all`); the sessions view was not replaced"
    )
    assert after.code == 1
    assert "truncated after log position" in after.out


ANCHOR = "a" * 64


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["audit", "--head", "s1", "--verify"], "--head prints one session's anchor"),
        (
            ["audit", "--head", "--verify", "--all"],
            "--head prints one session's anchor",
        ),
        (["audit", "s1", "--against", ANCHOR], "--against works with --verify SESSION"),
        (
            ["audit", "--verify", "--all", "--against", ANCHOR],
            "--against works with --verify SESSION",
        ),
        (["audit", "s1", "--verify", "--against", "nope"], "'nope' is not an anchor"),
        (["audit", "s1", "--verify", "--against", "0:" + ANCHOR], "is not an anchor"),
        (["audit", "s1", "--verify", "--against", "a" * 63], "is not an anchor"),
        (
            ["audit", "s1", "--verify", "--against", f"s2 seq=3 sha256={ANCHOR}"],
            "the anchor is of session 's2', not 's1'",
        ),
        (["audit", "--head", "nope"], "no session 'nope' in the log at"),
    ],
)
def test_anchor_usage_mistakes_exit_2(
    turnlog, sqlite_url: str, filled, argv: list[str], message: str
) -> None:
    filled(sqlite_url, sessions=("s1",), turns=1)

    result = turnlog("--store", sqlite_url, *argv)

    assert (result.code, result.out) == (2, "")
    assert message in result.error_line()
