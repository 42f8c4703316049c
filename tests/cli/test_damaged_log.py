"""A damaged SQLite log: every command says so in one line, never a traceback.

The damage is done to real logs written by a runtime, three ways: garbage
over the pages of the events table in the middle of the file, the file
cut in half, and a valid SQLite header followed by garbage.
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

READING_COMMANDS = [
    ["sessions"],
    ["audit", "s1"],
    ["replay", "s1"],
    ["export", "s1"],
    ["rebuild", "--verify"],
    ["project"],
]
"""Every command of the issue but ``audit --verify``, which gives a verdict."""

VERIFY_COMMANDS = [["audit", "--verify", "--all"], ["audit", "s1", "--verify"]]

if TYPE_CHECKING:  # the fixtures' types, from this folder's conftest
    from conftest import Outcome, Turnlog


def _pages_of(path: Path, table: str) -> tuple[int, list[int]]:
    """(page size, every page of ``table`` but its root) of the SQLite file."""
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        size = connection.execute("PRAGMA page_size").fetchone()[0]
        root = connection.execute(
            "SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)
        ).fetchone()[0]
        pages = [
            row[0]
            for row in connection.execute(
                "SELECT pageno FROM dbstat WHERE name = ? AND pageno != ?",
                (table, root),
            )
        ]
    finally:
        connection.close()
    return size, pages


def _overwrite_pages(path: Path, table: str) -> None:
    """Garbage over every page of ``table`` but its root (its first page, at
    the start of the file): the file opens, and any read of ``table`` breaks."""
    size, pages = _pages_of(path, table)
    assert len(pages) > 2, "the log is too small to damage in its middle"
    garbage = random.Random(7)
    with path.open("r+b") as file:
        for page in pages:
            file.seek((page - 1) * size)
            file.write(garbage.randbytes(size))


def _garbage_in_the_middle(path: Path) -> None:
    _overwrite_pages(path, "stored_events")


def _cut_in_half(path: Path) -> None:
    os.truncate(path, path.stat().st_size // 2)


def _header_then_garbage(path: Path) -> None:
    content = path.read_bytes()
    path.write_bytes(content[:100] + random.Random(7).randbytes(len(content) - 100))


DAMAGE: dict[str, Callable[[Path], None]] = {
    "garbage in the middle": _garbage_in_the_middle,
    "cut in half": _cut_in_half,
    "header then garbage": _header_then_garbage,
}


@pytest.fixture(params=list(DAMAGE))
def damaged(
    request: pytest.FixtureRequest, tmp_path: Path, filled: Callable[..., None]
) -> Path:
    """A log of a few sessions, damaged one of the DAMAGE ways."""
    path = tmp_path / "log.sqlite3"
    filled(f"sqlite:///{path}", sessions=("s1", "s2", "s3", "s4"), turns=3)
    assert not path.with_name(path.name + "-wal").exists()  # all in the file
    DAMAGE[request.param](path)
    return path


def _damage_line(outcome: Outcome, path: Path) -> str:
    line = outcome.error_line()
    assert line.startswith(f"turnlog: error: the log at {path} is damaged: "), line
    return line


@pytest.mark.parametrize("command", READING_COMMANDS, ids=" ".join)
def test_every_command_names_the_damaged_file_in_one_line(
    turnlog: Turnlog, damaged: Path, command: list[str]
) -> None:
    outcome = turnlog("--store", f"sqlite:///{damaged}", *command)

    assert outcome.code == 1
    assert "malformed" in _damage_line(outcome, damaged)


@pytest.mark.parametrize("command", VERIFY_COMMANDS, ids=" ".join)
def test_audit_verify_gives_the_damage_as_its_verdict(
    turnlog: Turnlog, damaged: Path, command: list[str]
) -> None:
    outcome = turnlog("--store", f"sqlite:///{damaged}", *command)

    assert (outcome.code, outcome.err) == (1, "")
    assert outcome.out.startswith(f"the log at {damaged} is damaged: ")
    assert len(outcome.out.splitlines()) == 1


def test_audit_verify_finds_damage_no_chain_would_show(
    turnlog: Turnlog, tmp_path: Path, filled: Callable[..., None]
) -> None:
    # Only the views are damaged: every event, and so every chain, is intact.
    path = tmp_path / "log.sqlite3"
    filled(f"sqlite:///{path}", sessions=("s1", "s2", "s3", "s4"), turns=3)
    _overwrite_pages(path, "turnlog_view_docs")

    outcome = turnlog("--store", f"sqlite:///{path}", "audit", "--verify", "--all")
    as_json = turnlog(
        "--store", f"sqlite:///{path}", "audit", "--verify", "--all", "--json"
    )

    assert (outcome.code, outcome.err) == (1, "")
    assert outcome.out.startswith(f"the log at {path} is damaged: "), outcome.out
    assert as_json.code == 1
    record = json.loads(as_json.out)
    assert (record["log"], record["ok"]) == (str(path), False)
    assert record["damaged"]


def test_an_intact_log_still_verifies(
    turnlog: Turnlog, tmp_path: Path, filled: Callable[..., None]
) -> None:
    path = tmp_path / "log.sqlite3"
    filled(f"sqlite:///{path}", sessions=("s1", "s2"), turns=1)

    outcome = turnlog("--store", f"sqlite:///{path}", "audit", "--verify", "--all")

    assert outcome.code == 0, outcome.err
    assert outcome.out.splitlines()[0] == "s1: ok, 13 events checked"


TURNLOG = Path(sys.executable).with_name("turnlog")
"""The installed console script: only a real process shows what Python's
last-resort handler prints (under pytest, its logging plugin handles records)."""

RUNS = 10
"""Runs of each command: the view runner's thread lost the race to print
its traceback in about a third of them."""


def _turnlog_process(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(TURNLOG), *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={k: v for k, v in os.environ.items() if not k.startswith("TURNLOG_")},
    )


@pytest.mark.subprocess
@pytest.mark.parametrize("command", [["sessions"], ["replay", "s1"]], ids=" ".join)
def test_a_damaged_log_is_one_line_of_stderr_in_every_run(
    tmp_path: Path, filled: Callable[..., None], command: list[str]
) -> None:
    path = tmp_path / "log.sqlite3"
    filled(f"sqlite:///{path}", sessions=("s1", "s2", "s3", "s4"), turns=3)
    _garbage_in_the_middle(path)

    for _ in range(RUNS):
        done = _turnlog_process("--store", f"sqlite:///{path}", *command)

        assert done.returncode == 1
        assert done.stderr.splitlines() == [
            f"turnlog: error: the log at {path} is damaged: "
            "database disk image is malformed"
        ], done.stderr


@pytest.mark.subprocess
def test_verbose_shows_what_turnlog_logs_one_line_a_record(
    tmp_path: Path, filled: Callable[..., None]
) -> None:
    path = tmp_path / "log.sqlite3"
    filled(f"sqlite:///{path}", sessions=("s1", "s2"), turns=1)
    _garbage_in_the_middle(path)

    done = _turnlog_process("--verbose", "--store", f"sqlite:///{path}", "sessions")

    assert done.returncode == 1
    lines = done.stderr.splitlines()
    assert "turnlog: INFO: this process now keeps the views current" in lines
    assert lines[-1].startswith(f"turnlog: error: the log at {path} is damaged: ")
    assert all(line.startswith("turnlog: ") for line in lines), done.stderr
    assert "Traceback" not in done.stderr
