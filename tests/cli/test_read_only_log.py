"""A log this process may not write: the reading commands work, writing nothing.

Tests run as root, which file modes do not stop, so the log (and its
folder) are made immutable (``chattr +i``): then nobody, root included,
may write the file or create anything beside it, as on a read-only mount.
"""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from turnlog import Agent, Runtime, ScriptedModel
from turnlog.domain.errors import StoreError
from turnlog.store.log import Store

if TYPE_CHECKING:  # the fixtures' types, from this folder's conftest
    from conftest import Turnlog


def _chattr(flag: str, *paths: Path) -> None:
    subprocess.run(["chattr", flag, *map(str, paths)], check=True)


@contextmanager
def immutable(*paths: Path) -> Iterator[None]:
    """``paths`` may not be written by anyone while inside."""
    try:
        _chattr("+i", *paths)
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("chattr +i is not available here (needs ext4 and root)")
    try:
        yield
    finally:
        _chattr("-i", *paths)


def _digest(folder: Path) -> dict[str, str]:
    return {
        path.name: hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.iterdir())
    }


def _forget_views(log: Path) -> None:
    """Empties the views, as in a log imported from elsewhere."""
    connection = sqlite3.connect(log)
    with connection:
        connection.execute("DELETE FROM turnlog_view_docs")
        connection.execute("DELETE FROM turnlog_view_tracking")
    connection.close()


@pytest.fixture
def log(tmp_path: Path, filled: Callable[..., None]) -> Path:
    folder = tmp_path / "archive"
    folder.mkdir()
    path = folder / "log.sqlite3"
    filled(f"sqlite:///{path}", sessions=("s1", "s2"), turns=2)
    return path


READING = [
    (["sessions"], "s2 "),
    (["audit", "s1"], "TurnCompleted"),
    (["audit", "s1", "--verify"], "s1: ok, 25 events checked"),
    (["audit", "--verify", "--all"], "2 sessions, 0 failed"),
    (["replay", "s1"], '"type":"turn_complete"'),
    (["export", "s1"], '"topic":"turnlog:TurnCompleted"'),
    (["rebuild", "--verify"], "no differences"),
]


@pytest.mark.parametrize(
    ("command", "shown"), READING, ids=[" ".join(c) for c, _ in READING]
)
def test_reading_commands_work_on_a_log_no_one_may_write(
    turnlog: Turnlog, log: Path, command: list[str], shown: str
) -> None:
    before = _digest(log.parent)
    with immutable(log, log.parent):
        outcome = turnlog("--store", f"sqlite:///{log}", *command)

    assert outcome.code == 0, outcome.err
    assert "error" not in outcome.err  # rebuild shows its progress there
    assert shown in outcome.out
    assert _digest(log.parent) == before


def test_views_behind_the_log_are_caught_up_in_memory(
    turnlog: Turnlog, log: Path
) -> None:
    # As an imported log, whose views were never built.
    url = f"sqlite:///{log}"
    whole = turnlog("--store", url, "audit", "s2").out
    _forget_views(log)
    before = _digest(log.parent)

    with immutable(log, log.parent):
        outcome = turnlog("--store", url, "audit", "s2")
        listed = turnlog("--store", url, "sessions")

    assert (outcome.code, outcome.err) == (0, "")
    assert outcome.out == whole
    assert "s1 " in listed.out
    assert "s2 " in listed.out
    assert _digest(log.parent) == before


def test_a_read_only_log_in_a_writable_folder_is_read_too(
    turnlog: Turnlog, log: Path
) -> None:
    # SQLite itself would read it; catching the views up must not write it.
    _forget_views(log)
    with immutable(log):
        verified = turnlog("--store", f"sqlite:///{log}", "audit", "--verify", "--all")
        listed = turnlog("--store", f"sqlite:///{log}", "sessions")

    assert (verified.code, verified.err) == (0, "")
    assert "2 sessions, 0 failed" in verified.out
    assert (listed.code, listed.err) == (0, "")
    assert "s2 " in listed.out


@pytest.mark.parametrize(
    "command", [["rebuild"], ["project"], ["demo", "--session", "s3"]], ids=" ".join
)
def test_writing_commands_say_the_log_is_read_only(
    turnlog: Turnlog, log: Path, command: list[str]
) -> None:
    with immutable(log, log.parent):
        outcome = turnlog("--store", f"sqlite:///{log}", *command)

    assert outcome.code == 1
    assert outcome.error_line() == (
        f"turnlog: error: the log at {log} is read-only here (no write access "
        "to the file or its folder); commands that only read it still work"
    )


def copied_while_open(tmp_path: Path, names: tuple[str, ...]) -> Path:
    """A folder holding ``names`` of a log copied while a runtime had it open,
    as a crash leaves it: the latest commits only in the -wal file."""
    live, archive = tmp_path / "live", tmp_path / "archive"
    live.mkdir()
    archive.mkdir()
    path = live / "log.sqlite3"
    with Runtime.open(f"sqlite:///{path}") as runtime:
        model = ScriptedModel()
        model.add("hi")
        session = runtime.create_session(Agent("a", model=model), session_id="s1")
        assert session.prompt("hello", timeout=10).completed
        for name in names:
            shutil.copy(live / name, archive / name)
    return archive


def test_commits_still_in_the_write_ahead_log_are_read(
    turnlog: Turnlog, tmp_path: Path
) -> None:
    # A copy taken while a runtime had the log open, as a crash leaves it:
    # the latest commits are only in the -wal file, beside its -shm index.
    archive = copied_while_open(
        tmp_path, ("log.sqlite3", "log.sqlite3-wal", "log.sqlite3-shm")
    )
    copy = archive / "log.sqlite3"
    assert (archive / "log.sqlite3-wal").stat().st_size > 0

    with immutable(*archive.iterdir(), archive):
        verified = turnlog("--store", f"sqlite:///{copy}", "audit", "s1", "--verify")
        shown = turnlog("--store", f"sqlite:///{copy}", "audit", "s1")

    assert (verified.code, verified.err) == (0, ""), verified.err
    assert verified.out.startswith("s1: ok, ")
    assert (shown.code, shown.err) == (0, ""), shown.err
    assert "TurnCompleted" in shown.out


def test_commits_in_a_write_ahead_log_that_cannot_be_read_are_not_ignored(
    turnlog: Turnlog, tmp_path: Path
) -> None:
    # no -shm: it can't be made
    archive = copied_while_open(tmp_path, ("log.sqlite3", "log.sqlite3-wal"))
    copy = archive / "log.sqlite3"

    with immutable(*archive.iterdir(), archive):
        outcome = turnlog("--store", f"sqlite:///{copy}", "sessions")

    assert outcome.code == 1
    assert f"the log at {copy} has commits in {copy}-wal" in outcome.error_line()


def test_a_read_only_store_refuses_writes_and_leaves_the_file_alone(
    log: Path,
) -> None:
    before = _digest(log.parent)
    with immutable(log, log.parent):
        store = Store(f"sqlite:///{log}", read_only=True)
        try:
            assert store.read_only
            assert store.max_position() == 50
        finally:
            store.close()
        with pytest.raises(StoreError, match="is read-only here"):
            Store(f"sqlite:///{log}")
    assert _digest(log.parent) == before
