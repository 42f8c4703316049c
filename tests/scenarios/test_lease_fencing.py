"""A writer that lost its lease must not write (fencing), with real processes.

A process owning a session is frozen (SIGSTOP) past its lease; this process
takes the session over and runs turns; the first is thawed (SIGCONT) and
tries a turn. The log refuses it, its session stops, and the session's hash
chain still verifies: no event of the frozen writer lands after the
takeover. In process: a renewal that finds its lease gone stops the
session at once, and a conflict makes the session read everything again.
"""

from __future__ import annotations

import os
import queue
import signal
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from turnlog import (
    Agent,
    AgentSession,
    ConcurrencyConflictError,
    LeaseLostError,
    Runtime,
    ScriptedModel,
    SessionBusyError,
    calls,
    function_tool,
    tool_call,
)
from turnlog.domain.ids import session_uuid
from turnlog.store.log import Store
from turnlog.store.verify import verify_all, verify_session

CHILD = Path(__file__).with_name("lease_child.py")
LEASE = 2.0
"""Seconds: short, so that a frozen owner loses the session soon."""


class ChildLines:
    """The stdout lines of a child process, read on a thread, with timeouts."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self._proc = proc
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)

    def expect(self, prefix: str, timeout: float = 30) -> str:
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            pytest.fail(f"no line from the child within {timeout} s")
        if line is None:
            assert self._proc.stderr is not None
            pytest.fail(
                f"child exited ({self._proc.wait()}): {self._proc.stderr.read()}"
            )
        assert line.startswith(prefix), line
        return line

    def send(self, command: str) -> None:
        assert self._proc.stdin is not None
        self._proc.stdin.write(command + "\n")
        self._proc.stdin.flush()


@pytest.fixture
def owner_child(store_url: str) -> Iterator[tuple[subprocess.Popen[str], ChildLines]]:
    """A child process owning session ``frozen`` (see lease_child.py)."""
    with subprocess.Popen(
        [sys.executable, str(CHILD), store_url, "frozen", str(LEASE)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        try:
            yield proc, ChildLines(proc)
        finally:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGCONT)
                proc.kill()
            proc.wait(timeout=30)


def take_over(rt: Runtime, session_id: str, agent: Agent) -> AgentSession:
    """Opens ``session_id`` as soon as its (frozen) owner's lease has expired.

    An expiry is a moment, not an event anyone sends: the refusal says
    when it comes (``retry_after``), and the taker waits until then. The
    owner is frozen and renews nothing, so the second try succeeds.
    """
    try:
        return rt.create_session(agent, session_id=session_id)
    except SessionBusyError as busy:
        retry_after = busy.retry_after
    assert retry_after is not None
    assert retry_after <= LEASE
    # Past the moment itself: a lease renewed exactly LEASE ago still holds.
    threading.Event().wait(retry_after + LEASE / 20)
    return rt.create_session(agent, session_id=session_id)


def holds_a_write(store_url: str) -> bool:
    """Whether another process is inside a transaction that locks out writes.

    SQLite: the write lock is a file lock, so a process frozen while holding
    it blocks every other writer until it is thawed, as it would in
    production; the test must not freeze the owner inside a renewal.
    PostgreSQL: a lock on one of the schema's tables held by another backend.
    """
    if store_url.startswith("sqlite:///"):
        probe = sqlite3.connect(store_url.removeprefix("sqlite:///"), timeout=0)
        try:
            probe.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError:
            return True
        finally:
            probe.close()
        return False
    import psycopg

    base, _, query = store_url.partition("?")
    schema = dict(part.split("=", 1) for part in query.split("&"))["schema"]
    with psycopg.connect(base, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND l.pid <> pg_backend_pid()",
            (schema,),
        ).fetchone()
    return bool(row and row[0])


def freeze_between_transactions(proc: subprocess.Popen[str], store_url: str) -> None:
    """SIGSTOPs ``proc`` at a moment it holds no lock in the log.

    Its lease renewals run on their own clock, so a freeze can land inside
    one; then it is thawed for a moment and frozen again.
    """
    for _ in range(50):
        os.kill(proc.pid, signal.SIGSTOP)
        if not holds_a_write(store_url):
            return
        os.kill(proc.pid, signal.SIGCONT)
        # Polling a real process: let it finish the transaction it is in.
        threading.Event().wait(0.02)
    pytest.fail("the owner was inside a transaction at every one of 50 freezes")


@pytest.mark.subprocess
def test_a_thawed_owner_that_lost_its_lease_is_refused(
    store_url: str, owner_child: tuple[subprocess.Popen[str], ChildLines]
) -> None:
    proc, child = owner_child
    child.expect("OWNED")
    freeze_between_transactions(proc, store_url)
    answers = [f"answer {n} from the new owner" for n in range(4)]
    with Runtime.open(store_url, lease_seconds=LEASE) as rt:
        session = take_over(rt, "frozen", Agent("a", model=ScriptedModel(answers)))
        for n in range(3):
            assert session.prompt(f"takeover {n}", timeout=30).status == "completed"
        os.kill(proc.pid, signal.SIGCONT)
        child.send("turn")
        refused = child.expect("REFUSED")
        assert refused.startswith("REFUSED LeaseLostError"), refused
        assert "taken over by another process" in refused
        child.send("turn")  # the session stopped there: still refused, clearly
        assert child.expect("REFUSED").startswith("REFUSED LeaseLostError")
        child.send("exit")
        assert proc.wait(timeout=30) == 0
        # The new owner goes on; its turns follow its own.
        assert session.prompt("last", timeout=30).final_output == answers[3]
        texts = [m.content for m in session.messages() if m.role == "assistant"]
        assert texts == ["answer 0 from the first owner", *answers]
    store = Store(store_url)
    try:
        reports = verify_all(store)
        assert [(r.session_id, r.ok) for r in reports] == [("frozen", True)], reports
    finally:
        store.close()


@function_tool
def wait_here(key: str) -> str:
    """Blocks until the test lets it finish."""
    TOOL_STARTED.set()
    TOOL_MAY_FINISH.wait(timeout=30)
    return key


TOOL_STARTED = threading.Event()
TOOL_MAY_FINISH = threading.Event()


def steal_lease(rt: Runtime, session_id: str) -> None:
    """Rewrites the lease row as another process's takeover would."""
    with rt.store.transaction() as cursor:
        cursor.execute(
            rt.store.sql(
                f"UPDATE {rt.ownership.table} SET owner = ?, epoch = epoch + 1 "
                "WHERE session_id = ?"
            ),
            ("elsewhere:1:thief", session_id),
        )


def test_a_renewal_that_finds_the_lease_gone_stops_the_session_at_once(
    store_url: str,
) -> None:
    TOOL_STARTED.clear()
    TOOL_MAY_FINISH.clear()
    model = ScriptedModel([calls(tool_call("wait_here", {"key": "k"})), "done"])
    with Runtime.open(store_url) as rt:
        session = rt.create_session(
            Agent("a", model=model, tools=[wait_here]), session_id="stolen"
        )
        events = session.subscribe()
        outcome: list[BaseException | object] = []

        def prompt() -> None:
            try:
                outcome.append(session.prompt("go", timeout=30))
            except BaseException as error:
                outcome.append(error)

        worker = threading.Thread(target=prompt)
        worker.start()
        assert TOOL_STARTED.wait(timeout=30)
        position = rt.store.max_position()
        steal_lease(rt, "stolen")
        assert rt.ownership.renew() == ["stolen"]
        # The run in flight is answered with the lost lease, and the
        # session's subscribers see their stream end.
        worker.join(timeout=30)
        TOOL_MAY_FINISH.set()
        assert len(outcome) == 1
        assert isinstance(outcome[0], LeaseLostError), outcome
        assert list(events)  # iteration ends: the session stopped
        with pytest.raises(LeaseLostError):
            session.prompt("more", timeout=30)
        assert rt.store.max_position() == position  # not even the tool's output
        assert rt.live_sessions() == 0


def test_a_renewal_that_still_holds_every_lease_stops_nothing(store_url: str) -> None:
    with Runtime.open(store_url) as rt:
        session = rt.create_session(Agent("a", model=ScriptedModel(["x"])))
        assert rt.ownership.renew() == []
        assert session.prompt("hi", timeout=30).final_output == "x"


def test_after_a_conflict_the_session_reads_everything_again(store_url: str) -> None:
    model = ScriptedModel(["one", "two"])
    with Runtime.open(store_url) as rt:
        session = rt.create_session(Agent("a", model=model), session_id="s")
        session.prompt("first", timeout=30)
        # A writer that does not hold the lease (an import, a repair tool)
        # appends to the session behind the actor's back.
        other = Store(store_url)
        try:
            stale = other.get(session_uuid("s"))
            stale.update_shared_state({"by": "someone else"})
            other.save(stale)
        finally:
            other.close()
        with pytest.raises(ConcurrencyConflictError):
            session.update_shared_state(mine=1)
        assert session.shared_state()["by"] == "someone else"
        assert session.prompt("second", timeout=30).final_output == "two"
        report = verify_session(rt.store, "s")
        assert report.ok, report.problem


def test_the_lease_length_is_checked() -> None:
    from turnlog import InvalidInputError

    with pytest.raises(InvalidInputError, match="lease_seconds"):
        Runtime.open("memory://", lease_seconds=0)
