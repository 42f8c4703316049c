"""A refused command leaves nothing behind: no log file, no schema, no table.

Each command that opens a store is given a log that does not exist yet
and input it must refuse (a file that is not an export, a session the log
does not hold); it exits with an error and the log is still not there.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

NOT_AN_EXPORT = '{"not": "an export"}\n'

COMMANDS = [
    ["import", "{bad}"],
    ["import", "{missing}"],
    ["audit", "nosuch"],
    ["audit", "nosuch", "--verify"],
    ["audit", "--verify", "--all"],
    ["export", "nosuch", "{out}"],
    ["replay", "nosuch"],
    ["traces", "nosuch"],
    ["rebuild", "nosuch"],
    ["sessions"],
]


@pytest.fixture(params=["sqlite", "postgres"])
def absent_log(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[str, Callable[[], bool]]]:
    """A log URL that names nothing yet, and a check that it still does not."""
    if request.param == "sqlite":
        path = tmp_path / "absent" / "log.sqlite3"
        path.parent.mkdir()
        yield f"sqlite:///{path}", lambda: not any(path.parent.iterdir())
        return
    base = os.environ.get("TURNLOG_TEST_POSTGRES_URL")
    if base is None:
        pytest.skip("TURNLOG_TEST_POSTGRES_URL is not set")
    request.getfixturevalue("postgres_in_use")
    import psycopg

    schema = f"t_{uuid.uuid4().hex[:12]}"

    def absent() -> bool:
        with psycopg.connect(base) as conn:
            found = conn.execute(
                "SELECT 1 FROM information_schema.schemata WHERE schema_name = %s",
                (schema,),
            ).fetchall()
        return not found

    yield f"{base}?schema={schema}", absent
    with psycopg.connect(base) as conn:  # a test that failed left it
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_a_refused_command_creates_no_log(
    turnlog: Callable[..., Any],
    absent_log: tuple[str, Callable[[], bool]],
    tmp_path: Path,
    command: list[str],
) -> None:
    url, still_absent = absent_log
    bad = tmp_path / "bad.jsonl"
    bad.write_text(NOT_AN_EXPORT)
    places = {"bad": bad, "missing": tmp_path / "missing.jsonl"}
    places["out"] = tmp_path / "out.jsonl"
    argv = [part.format(**places) for part in command]
    outcome = turnlog("--store", url, *argv)
    if command[0] == "sessions":  # not a refusal: it says there are none
        assert "no sessions" in outcome.out, outcome
    else:
        assert outcome.code != 0, outcome
        assert outcome.err.strip(), "a refusal says why"
    assert still_absent(), f"{' '.join(command)} left a log behind"
