"""A store that fails while the process lives on never wedges a session.

Each fault is the real thing: a full tmpfs under a SQLite log, a
PostgreSQL backend terminated under the runtime, and a PostgreSQL server
restarted during a turn. In each the turn that hit the fault ends as
failed, the session's memory agrees with the log, and once the store is
back the same session in the same process takes the next prompt; the
failed turn is recorded as failed (at the latest by the next save), the
log verifies, and every run reported completed is in it.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from turnlog import Agent, AgentSession, RunResult, Runtime, ScriptedModel
from turnlog.cli.main import main
from turnlog.domain.protocol import TurnAbortedMsg, TurnCompletedMsg
from turnlog.testing import HeldModel

pytestmark = pytest.mark.timeout(120)


def turn_ends(url: str, session_id: str) -> list[str]:
    """How each turn of ``session_id`` ended, as a fresh process reads it."""
    runtime = Runtime.open(url)
    try:
        ends = []
        for event in runtime.replay_events(session_id):
            if isinstance(event.msg, TurnCompletedMsg):
                ends.append(f"completed: {event.msg.last_agent_message}")
            elif isinstance(event.msg, TurnAbortedMsg):
                ends.append("failed" if event.msg.failed else "aborted")
        return ends
    finally:
        runtime.close()


def audit_verifies(url: str, session_id: str) -> None:
    """``turnlog audit SESSION --verify`` passes (the views agree too)."""
    assert main(["--store", url, "audit", session_id, "--verify"]) == 0


class Prompter:
    """Runs prompts on a thread, so the test can act while a turn waits."""

    def __init__(self, session: AgentSession) -> None:
        self.session = session
        self.pool = ThreadPoolExecutor(1)

    def start(self, text: str) -> Future[RunResult]:
        return self.pool.submit(self.session.prompt, text, timeout=60)

    def close(self) -> None:
        self.pool.shutdown(wait=True)


def fault_during_second_turn(
    url: str, fault: Callable[[], None], repair: Callable[[], None]
) -> None:
    """One completed turn; ``fault`` while the second waits on its model;
    ``repair``; then the same session must take a third prompt."""
    held = HeldModel(
        ScriptedModel(["first answer", "second answer " + "x" * 200_000, "third"]),
        hold_all=True,
    )
    runtime = Runtime.open(url)
    prompter: Prompter | None = None
    try:
        session = runtime.create_session(Agent("a", model=held), session_id="f")
        prompter = Prompter(session)
        first = prompter.start("one")
        assert held.entered.wait(10)
        held.entered.clear()
        held.release()
        assert first.result(30).status == "completed"
        second = prompter.start("two")
        assert held.entered.wait(10)
        fault()
        held.hold_all = False
        held.release()
        failed = second.result(60)
        assert failed.status == "failed", failed
        assert failed.error is not None
        assert not session.running()
        repair()
        third = session.prompt("three", timeout=60)
        assert third.status == "completed", third
        assert third.final_output == "third"
    finally:
        if prompter is not None:
            prompter.close()
        runtime.close()
    ends = turn_ends(url, "f")
    assert ends[0] == "completed: first answer"
    assert ends[1] == "failed"
    assert ends[-1] == "completed: third"
    audit_verifies(url, "f")


# -- SQLite: the disk fills up --------------------------------------------------


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs, unmounted afterwards (mounting it needs root)."""
    mount = tmp_path / "tmpfs"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(directory: Path) -> Path:
    """Writes a ballast file until the file system is full."""
    ballast = directory / "ballast"
    descriptor = os.open(ballast, os.O_WRONLY | os.O_CREAT)
    try:
        while os.write(descriptor, b"\0" * 4096):
            pass
    except OSError:
        pass
    finally:
        os.close(descriptor)
    return ballast


def test_a_full_disk_fails_the_turn_and_the_session_goes_on(full_disk: Path) -> None:
    url = f"sqlite:///{full_disk}/log.sqlite3"

    def repair() -> None:
        (full_disk / "ballast").unlink()

    fault_during_second_turn(url, fault=lambda: _fill(full_disk), repair=repair)
