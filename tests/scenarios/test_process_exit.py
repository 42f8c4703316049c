"""A process that never closes its runtime still exits, and leaves its
sessions ready for the next process: real processes, no kills."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest

from turnlog import Agent, Message, Runtime, ScriptedModel
from turnlog.store.ownership import LEASE_TABLE
from turnlog.store.verify import verify_session

pytestmark = pytest.mark.subprocess

CHILD = Path(__file__).with_name("exit_child.py")
EXIT_TIMEOUT = 30.0
"""Generous: the child exits in well under a second; a hang waits forever."""


def run_child(url: str, session_id: str, mode: str) -> subprocess.CompletedProcess[str]:
    """Runs exit_child.py and waits for it to exit by itself (or fails)."""
    with subprocess.Popen(
        [sys.executable, str(CHILD), url, session_id, mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        try:
            out, err = proc.communicate(timeout=EXIT_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            pytest.fail(f"the child did not exit by itself; stderr:\n{err}")
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def leases(path: Path) -> list[tuple[str, str]]:
    """The session leases left in the SQLite log at ``path``."""
    with closing(sqlite3.connect(path)) as db:
        return db.execute(f"SELECT session_id, owner FROM {LEASE_TABLE}").fetchall()


def test_an_uncaught_exception_ends_a_process_that_never_closed(
    tmp_path: Path,
) -> None:
    path = tmp_path / "turnlog.sqlite3"
    done = run_child(f"sqlite:///{path}", "s", "raise")
    assert done.stdout == "PROMPTED\n"
    assert done.returncode == 1
    # the program's own traceback, and nothing from turnlog's shutdown
    assert done.stderr.count("Traceback") == 1
    assert done.stderr.rstrip().endswith("RuntimeError: boom after a turn")
    assert leases(path) == []  # closed at exit: the lease was given back


def test_falling_off_the_end_exits_cleanly_and_the_session_reopens(
    tmp_path: Path,
) -> None:
    path = tmp_path / "turnlog.sqlite3"
    url = f"sqlite:///{path}"
    done = run_child(url, "s", "fall-off")
    assert (done.returncode, done.stdout, done.stderr) == (0, "PROMPTED\n", "")
    assert leases(path) == []
    with Runtime.open(url) as rt:
        session = rt.create_session(
            Agent("a", model=ScriptedModel(["second answer"])), session_id="s"
        )
        assert session.messages() == [
            Message.user("first question"),
            Message.assistant("first answer"),
        ]
        assert session.prompt("second question", timeout=10).final_output == (
            "second answer"
        )
        report = verify_session(rt.store, "s")
        assert report.ok, report.problem
        assert report.events > 0


def test_an_exception_during_a_turn_still_exits_and_the_turn_is_closed(
    tmp_path: Path,
) -> None:
    path = tmp_path / "turnlog.sqlite3"
    url = f"sqlite:///{path}"
    done = run_child(url, "s", "raise-in-turn")
    assert done.stdout == "IN TURN\n"
    assert done.returncode == 1
    assert done.stderr.count("Traceback") == 1
    assert done.stderr.rstrip().endswith("RuntimeError: boom while a turn runs")
    assert leases(path) == []
    with Runtime.open(url) as rt:
        rt.create_session(Agent("a", model=ScriptedModel(["later"])), session_id="s")
        checkpoint = rt.checkpoints.load("s")
        assert checkpoint is not None
        assert checkpoint.running_turn is None
        assert verify_session(rt.store, "s").ok
