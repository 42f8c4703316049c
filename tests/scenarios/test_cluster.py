"""Several processes on one PostgreSQL: following, failover, one view runner.

Each test drives real processes (cluster_child.py) on one schema, and
SIGKILLs them where a crash is the point.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from turnlog import Runtime
from turnlog.domain.protocol import ToolCallStartedMsg, TurnCompletedMsg
from turnlog.store.postgres import PostgresRunnerLock

CHILD = Path(__file__).with_name("cluster_child.py")
WAIT = 60.0


class Child:
    """A cluster_child.py process, read line by line on a thread."""

    def __init__(self, url: str, ledger: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(CHILD), url, str(ledger)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.passed: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.expect("READY")

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))

    def send(self, command: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()

    def expect(self, prefix: str) -> str:
        """The first unclaimed line starting with ``prefix`` (waits for it).

        Lines of concurrent commands interleave, so the ones passed over
        stay for a later ``expect``. An ERROR line fails the test.
        """
        for index, line in enumerate(self.passed):
            if line.startswith(prefix):
                return self.passed.pop(index)
        while True:
            line = self.lines.get(timeout=WAIT)
            assert not line.startswith("ERROR"), line
            if line.startswith(prefix):
                return line
            self.passed.append(line)

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=WAIT)

    def close(self) -> None:
        if self.process.poll() is None:
            try:
                self.send("exit")
                self.process.wait(timeout=WAIT)
            except (OSError, subprocess.TimeoutExpired):
                self.kill()
        self._reader.join(timeout=WAIT)
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                pipe.close()


@pytest.fixture
def children(postgres_schema_url: str, tmp_path: Path) -> Iterator[list[Child]]:
    started: list[Child] = []
    yield started
    for child in started:
        child.close()


def start(children: list[Child], url: str, ledger: Path) -> Child:
    child = Child(url, ledger)
    children.append(child)
    return child


def test_a_follower_in_one_process_sees_a_session_run_in_another(
    postgres_schema_url: str, children: list[Child], tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger"
    follower = start(children, postgres_schema_url, ledger)
    runner = start(children, postgres_schema_url, ledger)
    follower.send("follow s-followed 3")
    follower.expect("FOLLOWING s-followed")  # before the session even exists
    runner.send("run s-followed 3")
    runner.expect("DONE s-followed")
    seen = json.loads(follower.expect("FOLLOWED s-followed").split(" ", 2)[2])
    with Runtime.open(postgres_schema_url) as rt:
        replayed = [
            [event.sequence, type(event.msg).__name__]
            for event in rt.replay_events("s-followed")
        ]
    assert seen == replayed  # every durable event, in order, once
    assert sum(name == "TurnCompletedMsg" for _, name in seen) == 3


def test_a_killed_process_s_sessions_are_taken_over_and_complete(
    postgres_schema_url: str, children: list[Child], tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger"
    doomed = start(children, postgres_schema_url, ledger)
    survivor = start(children, postgres_schema_url, ledger)
    sessions = [f"s-{n}" for n in range(4)]
    survivor.send("follow s-0 3")
    survivor.expect("FOLLOWING s-0")
    doomed.send(f"run {','.join(sessions)} 3 2")  # each blocks in its 2nd tool
    for _ in sessions:
        doomed.expect("IN-TOOL")
    doomed.kill()
    survivor.send(f"run {','.join(sessions)} 3")
    for _ in sessions:
        survivor.expect("DONE")
    # A follower in the survivor saw s-0 through the crash and the takeover.
    seen = json.loads(survivor.expect("FOLLOWED s-0").split(" ", 2)[2])
    calls = Counter(line.split()[1] for line in ledger.read_text().splitlines())
    assert calls
    assert max(calls.values()) == 1
    with Runtime.open(postgres_schema_url) as rt:
        for session_id in sessions:
            events = rt.replay_events(session_id)
            assert sum(isinstance(e.msg, TurnCompletedMsg) for e in events) == 3
            started = {
                e.msg.call_id for e in events if isinstance(e.msg, ToolCallStartedMsg)
            }
            ran = {call for call in calls if call in started}
            # The call cut off by the kill is in the log but never ran again.
            assert len(started - ran) == 1
        replayed = [[e.sequence, type(e.msg).__name__] for e in rt.replay_events("s-0")]
    assert seen == replayed
    audit = subprocess.run(
        [
            str(Path(sys.executable).with_name("turnlog")),
            "--store",
            postgres_schema_url,
            "audit",
            "--verify",
            "--all",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert audit.returncode == 0, audit.stdout + audit.stderr


def _runner_lock_holders(url: str) -> tuple[int, int]:
    """(granted, waiting) holders of the schema's view runner lock."""
    base, _, query = url.partition("?")
    schema = query.partition("schema=")[2].partition("&")[0]
    key = PostgresRunnerLock(psycopg.connect, schema).key & 0xFFFFFFFFFFFFFFFF
    with psycopg.connect(base) as conn:
        rows = conn.execute(
            "SELECT granted, count(*) FROM pg_locks WHERE locktype = 'advisory' "
            "AND classid::bigint = %s AND objid::bigint = %s AND objsubid = 1 "
            "GROUP BY granted",
            (key >> 32, key & 0xFFFFFFFF),
        ).fetchall()
    counts = dict(rows)
    return counts.get(True, 0), counts.get(False, 0)


def test_one_view_runner_at_a_time_and_failover_when_it_is_killed(
    postgres_schema_url: str, children: list[Child], tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger"
    first = start(children, postgres_schema_url, ledger)
    first.send("lead")
    first.expect("LEADING")
    second = start(children, postgres_schema_url, ledger)
    second.send("lead")
    # The second waits on the lock (never granted while the first lives):
    # polled in the server, the only place that shows a waiter.
    polls = 0
    while _runner_lock_holders(postgres_schema_url)[1] == 0:
        polls += 1
        assert polls < WAIT * 20, "the second process never waited for the lock"
        threading.Event().wait(0.05)
    assert _runner_lock_holders(postgres_schema_url) == (1, 1)
    assert second.lines.empty()
    assert not second.passed
    first.kill()
    second.expect("LEADING")
    # The new leader keeps the views current for sessions run elsewhere.
    second.send("run s-after 1")
    second.expect("DONE s-after")
    assert os.path.exists(ledger)
