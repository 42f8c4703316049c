"""Helpers shared by the command-line tests (this folder is on ``sys.path``)."""

from __future__ import annotations

import re

import msgspec
import pytest

from turnlog.cli.main import main
from turnlog.domain.ids import session_uuid, turn_uuid
from turnlog.projections.tables import ViewTables
from turnlog.store.log import Store


def max_position(url: str) -> int:
    """The position of the last event in the log at ``url``."""
    store = Store(url)
    try:
        return store.max_position()
    finally:
        store.close()


def session_positions(url: str, session_id: str, turns: int = 9) -> list[int]:
    """The log positions of every event of ``session_id``, oldest first."""
    store = Store(url)
    try:
        ids = [session_uuid(session_id)]
        ids += [turn_uuid(session_id, n) for n in range(1, turns + 1)]
        return sorted(row[0] for row in store.stored_rows(ids))
    finally:
        store.close()


def remove_events(url: str, positions: list[int]) -> None:
    """Deletes events straight from the events table, as an intruder with
    write access to the database would (on either backend)."""
    store = Store(url)
    try:
        column = store.backend.position_column
        marks = ", ".join("?" * len(positions))
        with store.transaction() as cursor:
            cursor.execute(
                store.sql(
                    f"DELETE FROM {store.events_table} WHERE {column} IN ({marks})"
                ),
                positions,
            )
    finally:
        store.close()


def forge_view_head(url: str, session_id: str, seq: int, digest: str) -> None:
    """Rewrites the head the sessions view holds for ``session_id``, as an
    intruder who removed events and covered the tracks in the view would."""
    store = Store(url)
    try:
        tables = ViewTables(store)
        doc = tables.get("sessions", session_id, 0)
        doc["head_seq"], doc["head_sha256"] = seq, digest
        with store.transaction() as cursor:
            cursor.execute(
                store.sql(
                    f"UPDATE {tables.docs} SET doc = ? WHERE gen = "
                    f"{store.backend.tables.generation_of} AND part = ? AND pos = 0"
                ),
                (msgspec.json.encode(doc), "sessions", session_id),
            )
    finally:
        store.close()


def chain_at(url: str, position: int) -> tuple[int, str]:
    """(session seq, chain) of the event at log ``position``."""
    store = Store(url)
    try:
        _, _, _, state = store.stored_at([position])[position]
    finally:
        store.close()
    decoded = msgspec.json.decode(state)
    return decoded["session_seq"], decoded["chain"]


# -- running the command and reading what it printed ------------------------

FINAL_ANSWER = "100 days after 2024-02-10 is 2024-05-20 (Monday)."
TIME = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"
AUDIT_LINE = re.compile(rf"^\s*(\d+)  ({TIME})  (\w+)\s+(.*)$")
DEMO_EVENTS = [
    "SessionCreated",
    "TurnStarted",
    "TurnOpened",
    "InputAccepted",
    "ModelStepStarted",
    "ModelStepCompleted",
    "UsageRecorded",
    "ToolCallStarted",
    "ToolCallFinished",
    "ModelStepStarted",
    "ModelStepCompleted",
    "UsageRecorded",
    "TurnCompleted",
]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def run_demo(capsys: pytest.CaptureFixture[str], store: str, *extra: str) -> str:
    """Runs the demo, checks it succeeded, returns its session id."""
    code, out, err = run(capsys, "--store", store, "demo", *extra)
    assert (code, err) == (0, "")
    match = re.search(r"^session:\s+(\S+) \(run completed\)$", out, re.MULTILINE)
    assert match is not None, out
    return match.group(1)


def audit_lines(out: str) -> list[tuple[int, str, str, str]]:
    header, *lines = out.splitlines()
    assert header.split() == ["POS", "TIME", "(UTC)", "EVENT", "SUMMARY"]
    parsed = []
    for line in lines:
        match = AUDIT_LINE.match(line)
        assert match is not None, line
        position, time, name, summary = match.groups()
        parsed.append((int(position), time, name, summary))
    return parsed


def one_error_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("turnlog: error: ")
    assert "Traceback" not in err
    return lines[0]
