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
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from turnlog import (
    Agent,
    AgentSession,
    RunConfig,
    RunResult,
    Runtime,
    ScriptedModel,
    StoreError,
)
from turnlog.cli.main import main
from turnlog.domain.protocol import TurnAbortedMsg, TurnCompletedMsg
from turnlog.store.log import Store
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
    url: str,
    fault: Callable[[], None],
    repair: Callable[[], None],
    during_save: Callable[[Future[RunResult]], None] = lambda _: None,
    *,
    down_until_repaired: bool = False,
) -> str:
    """One completed turn; ``fault`` while the second waits on its model;
    ``repair``; then the same session must take a third prompt."""
    answers = ["first answer", "second answer " + "x" * 200_000, "third"]
    held = HeldModel(ScriptedModel(answers), hold_all=True)
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
        during_save(second)
        second_run = second.result(60)
        # A store that retries on a fresh connection may save the turn after
        # all; if it cannot, the turn fails, saying why.
        assert second_run.status in ("completed", "failed"), second_run
        assert (second_run.status == "failed") == (second_run.error is not None)
        assert not session.running()
        if down_until_repaired:
            # The store's own error, not "session is running"; nothing run.
            with pytest.raises(StoreError, match="full"):
                session.prompt("too soon", timeout=30)
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
    assert ends[1] == (
        "failed" if second_run.status == "failed" else f"completed: {answers[1]}"
    )
    assert ends[-1] == "completed: third"
    audit_verifies(url, "f")
    return second_run.status


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

    status = fault_during_second_turn(
        url, fault=lambda: _fill(full_disk), repair=repair, down_until_repaired=True
    )
    assert status == "failed"


# -- PostgreSQL: a connection lost, a server restarted ---------------------------


def _schema_of(url: str) -> str:
    return url.rsplit("schema=", maxsplit=1)[1].split("&", maxsplit=1)[0]


class LostConnection:
    """Ends the server backends of this test's schema while they save.

    The events table is locked from outside, so the next save waits on
    the lock; each backend of this schema that waits (and only those) is
    terminated, the retries on fresh connections too, until the run
    ended; then the lock is let go.
    """

    def __init__(self, url: str) -> None:
        import psycopg

        self.url, self.schema = url, _schema_of(url)
        self.base = url.split("?", maxsplit=1)[0]
        self.locker = psycopg.connect(self.base)

    def lock(self) -> None:
        store = Store(self.url)
        try:
            table = store.events_table
        finally:
            store.close()
        self.locker.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")

    def terminate_waiting_saves(self, run: Future[RunResult]) -> None:
        import psycopg

        deadline = time.monotonic() + 60
        terminated = 0
        with psycopg.connect(self.base, autocommit=True) as conn:
            while not run.done():
                rows = conn.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE pid <> %s AND wait_event_type = 'Lock' "
                    "AND position(%s in query) > 0",
                    (self.locker.info.backend_pid, self.schema),
                ).fetchall()
                terminated += len(rows)
                assert time.monotonic() < deadline, "the run did not end"
                # Polling the server: whether a backend of another
                # connection waits on the lock is learnt only by asking.
                time.sleep(0.02)
        self.locker.rollback()  # lets the lock go
        self.locker.close()
        assert terminated, "no save waited on the lock"


def _restart_postgres(url: str) -> None:
    """Restarts the local cluster (quickly) and waits until it answers."""
    import psycopg

    version = sorted(os.listdir("/etc/postgresql"))[-1]
    subprocess.run(
        [
            "pg_ctlcluster",
            "--skip-systemctl-redirect",
            version,
            "main",
            "restart",
            "-m",
            "fast",
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    # PostgreSQL's own readiness wait, rather than a loop of ours.
    base = url.split("?", maxsplit=1)[0]
    subprocess.run(
        ["pg_isready", "--dbname", base, "--timeout", "60"],
        check=True,
        capture_output=True,
        timeout=90,
    )
    with psycopg.connect(base, connect_timeout=10) as conn:
        conn.execute("SELECT 1")


@pytest.mark.postgres
def test_a_lost_connection_fails_the_turn_and_the_session_goes_on(
    postgres_schema_url: str,
) -> None:
    lost = LostConnection(postgres_schema_url)
    status = fault_during_second_turn(
        postgres_schema_url,
        fault=lost.lock,
        repair=lambda: None,
        during_save=lost.terminate_waiting_saves,
    )
    assert status == "failed"


@pytest.mark.postgres
@pytest.mark.serial
def test_a_server_restart_fails_the_turn_and_the_session_goes_on(
    postgres_schema_url: str,
) -> None:
    if not os.path.isdir("/etc/postgresql") or os.geteuid() != 0:
        pytest.skip("restarting the server needs root and a local cluster")
    url = postgres_schema_url
    fault_during_second_turn(
        url, fault=lambda: _restart_postgres(url), repair=lambda: None
    )


def test_a_runtime_closed_on_a_full_disk_stops_and_loses_nothing_reported(
    full_disk: Path,
) -> None:
    url = f"sqlite:///{full_disk}/log.sqlite3"
    runtime = Runtime.open(url)
    try:
        model = ScriptedModel(["one", "two"])
        session = runtime.create_session(Agent("a", model=model), session_id="c")
        assert session.prompt("one", timeout=30).status == "completed"
        _fill(full_disk)
        try:
            failed = session.prompt("two " + "x" * 200_000, timeout=30)
        except StoreError:
            pass  # the turn could not even start: nothing was recorded
        else:
            assert failed.status == "failed"
    finally:
        started = time.monotonic()
        # The leases cannot be given back (they expire) nor the views
        # written: it says so, and still stops every actor it started.
        runtime.close()
        assert time.monotonic() - started < 8
    (full_disk / "ballast").unlink()
    assert turn_ends(url, "c")[0] == "completed: one"
    audit_verifies(url, "c")


def test_an_idle_session_records_its_failed_turn_once_the_disk_has_room(
    full_disk: Path,
) -> None:
    url = f"sqlite:///{full_disk}/log.sqlite3"
    held = HeldModel(ScriptedModel(["answer " + "x" * 200_000]), hold_all=True)
    runtime = Runtime.open(url, run_config=RunConfig(idle_timeout=0.3))
    prompter: Prompter | None = None
    try:
        session = runtime.create_session(Agent("a", model=held), session_id="i")
        prompter = Prompter(session)
        second = prompter.start("two")
        assert held.entered.wait(10)
        _fill(full_disk)
        held.release()
        assert second.result(60).status == "failed"
        (full_disk / "ballast").unlink()
        # Nobody calls: the session records the failure on its own, and
        # then passivates like any idle session.
        assert session.wait_passivated(timeout=30)
        assert turn_ends(url, "i") == ["failed"]
    finally:
        if prompter is not None:
            prompter.close()
        runtime.close()
    audit_verifies(url, "i")
