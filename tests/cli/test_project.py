"""``turnlog project``: a separate process that keeps the views up to date
with a log other processes write; once, or following until Ctrl-C."""

from __future__ import annotations

import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from turnlog import Agent, Runtime, ScriptedModel
from turnlog.projections.rebuild import rebuild
from turnlog.projections.tables import ViewTables
from turnlog.store.log import Store

VIEWS = ("checkpoints", "transcript", "executions", "sessions")
POSITION = re.compile(r"views (?:\([^)]*\) )?at log position (\d+)$")
WAIT = 20.0
"""Seconds a test waits at most for the follower to say something."""


def write_without_views(url: str, session_id: str, prompts: int = 2) -> int:
    """Runs a session in a runtime that does not fold its views; returns
    the log's end afterwards."""
    model = ScriptedModel([f"answer {n}" for n in range(prompts)])
    with Runtime(Store(url), follow_projections=False) as runtime:
        session = runtime.create_session(Agent("w", model=model), session_id=session_id)
        for n in range(prompts):
            assert session.prompt(f"question {n}", timeout=10).completed
        return runtime.store.max_position()


def tracking(url: str) -> dict[str, int | None]:
    store = Store(url)
    try:
        tables = ViewTables(store)
        positions = {view: tables.tracking_of(view) for view in VIEWS}
    finally:
        store.close()
    return {view: None if t is None else t[0] for view, t in positions.items()}


def documents(url: str) -> dict:
    store = Store(url)
    try:
        tables = ViewTables(store)
        return {
            (view, part): tables.range(view, part)
            for view in VIEWS
            for part in tables.parts(view)
        }
    finally:
        store.close()


def test_project_catches_the_views_up_once(turnlog, sqlite_url: str) -> None:
    end = write_without_views(sqlite_url, "s1")
    assert all(position in (None, 0) for position in tracking(sqlite_url).values())

    result = turnlog("--store", sqlite_url, "project")

    assert (result.code, result.err) == (0, "")
    assert result.out == (
        f"views (checkpoints, transcript, executions, sessions) at log position {end}\n"
    )
    assert tracking(sqlite_url) == dict.fromkeys(VIEWS, end)
    projected = documents(sqlite_url)
    store = Store(sqlite_url)
    try:
        rebuild(store)
    finally:
        store.close()
    assert documents(sqlite_url) == projected  # what a rebuild makes too
    again = turnlog("--store", sqlite_url, "project")
    assert again.out.endswith(f"at log position {end}\n")


def test_project_needs_a_log(turnlog, tmp_path: Path) -> None:
    log = tmp_path / "log.sqlite3"
    result = turnlog("--store", f"sqlite:///{log}", "project", "--follow")
    assert result.code == 2
    assert result.error_line() == f"turnlog: error: there is no log at {log}"
    assert not log.exists()
    bad = turnlog("--store", f"sqlite:///{log}", "project", "--interval", "0")
    assert bad.code == 2
    assert "'0' is not a number of seconds above 0" in bad.err


# Ctrl-C as a terminal sends it: a test run started in the background by a
# script ignores SIGINT, and a child inherits that (exec keeps an ignored
# signal ignored), so the follower is started with SIGINT's default again.
WITH_DEFAULT_SIGINT = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.argv[1], sys.argv[1:])"
)


class Follower:
    """A ``turnlog project --follow`` process and the lines it prints."""

    def __init__(self, url: str) -> None:
        script = Path(sys.executable).parent / "turnlog"
        assert script.exists(), "install the package: pip install -e ."
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-c",
                WITH_DEFAULT_SIGINT,
                script,
                "--store",
                url,
                "project",
                "--follow",
                "--interval",
                "0.05",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)  # end of output

    def position_reaches(self, end: int) -> list[str]:
        """Reads lines until one says the views are at ``end``; returns them."""
        deadline = time.monotonic() + WAIT
        seen: list[str] = []
        while True:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"the follower never reached {end}: {seen}"
            line = self.lines.get(timeout=remaining)
            assert line is not None, f"the follower ended: {seen}"
            seen.append(line)
            match = POSITION.search(line)
            assert match is not None, line
            if int(match[1]) >= end:
                return seen

    def rest(self) -> list[str]:
        """The lines left once the process has ended."""
        lines = []
        while (line := self.lines.get(timeout=WAIT)) is not None:
            lines.append(line)
        return lines


@contextmanager
def following(url: str) -> Iterator[Follower]:
    follower = Follower(url)
    try:
        yield follower
    finally:
        if follower.process.poll() is None:
            follower.process.kill()
        follower.process.wait(timeout=WAIT)
        assert follower.process.stdout is not None
        assert follower.process.stderr is not None
        follower.process.stdout.close()
        follower.process.stderr.close()


@pytest.mark.subprocess
def test_a_follower_keeps_the_views_up_to_date_until_ctrl_c(store_url: str) -> None:
    first = write_without_views(store_url, "s1")
    with following(store_url) as follower:
        (line,) = follower.position_reaches(first)
        assert line == (
            "views (checkpoints, transcript, executions, sessions) "
            f"at log position {first}"
        )

        end = write_without_views(store_url, "s2", prompts=3)
        follower.position_reaches(end)
        assert tracking(store_url) == dict.fromkeys(VIEWS, end)

        follower.process.send_signal(signal.SIGINT)
        assert follower.process.wait(timeout=WAIT) == 0
        rest = follower.rest()
        assert follower.process.stderr is not None
        assert follower.process.stderr.read() == ""
    store = Store(store_url)
    location = store.location
    store.close()
    assert rest == [f"stopped following {location}: views at log position {end}"]


def test_a_follower_far_behind_shows_its_progress(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import turnlog.cli.progress
    from turnlog.cli.progress import catch_up
    from turnlog.projections.rebuild import default_projections
    from turnlog.projections.runner import ProjectionRunner

    end = write_without_views(sqlite_url, "s1", prompts=3)
    shown = []
    monkeypatch.setattr(turnlog.cli.progress, "BATCH_SIZE", 4)
    store = Store(sqlite_url)
    try:
        runner = ProjectionRunner(store, default_projections())
        assert catch_up(runner, shown.append) == end
        assert catch_up(runner, shown.append) == end  # nothing left: silent
    finally:
        store.close()
    assert [p.done for p in shown] == [*range(4, end, 4), end]
    assert {(p.view, p.total) for p in shown} == {("views", end)}
    assert shown[-1].eta_seconds == 0


@pytest.mark.subprocess
def test_two_followers_on_one_postgres_schema_fold_one_at_a_time(
    postgres_schema_url: str,
) -> None:
    # Each follower is the view runner's elected leader: the second stands
    # by on the advisory lock, and takes over when the first is killed.
    from turnlog.cli.main import STANDBY_LINE

    url = postgres_schema_url
    first = write_without_views(url, "s1")
    with following(url) as leader:
        leader.position_reaches(first)
        with following(url) as standby:
            assert standby.lines.get(timeout=WAIT) == STANDBY_LINE
            end = write_without_views(url, "s2", prompts=3)
            leader.position_reaches(end)
            assert standby.lines.empty()  # it folded nothing, said nothing
            leader.process.kill()
            leader.process.wait(timeout=WAIT)
            (line,) = standby.position_reaches(end)
            assert line == (
                "views (checkpoints, transcript, executions, sessions) "
                f"at log position {end}"
            )
            later = write_without_views(url, "s3")
            standby.position_reaches(later)
    assert tracking(url) == dict.fromkeys(VIEWS, later)
