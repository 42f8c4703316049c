"""A durable turn beside the disk's floor: what turnlog adds to its commits.

Issue 24, budget 2: a turn on the SQLite file costs at most the floor plus
1 ms, where the floor is the turn's commits times one commit's cost. Both
are measured here, in one process, in alternating rounds, so that the
machine's noise falls on both alike:

- one commit: a bare ``sqlite3`` loop on a file in the same folder, WAL
  and ``synchronous=FULL`` as turnlog's log, each commit inserting three
  rows of event size (a save's usual size);
- a turn: one turnlog session on an SQLite file, each turn a prompt, a
  model step asking for one tool call, the tool, and the answer (the
  peers workload's shape), with its commits counted by the store's group
  commit.

Printed per round: one commit's cost (wall, and CPU: SQLite's and the
kernel's write and ``fdatasync``), commits a turn, the floor, the turn's
wall time and CPU time (and the CPU besides its commits' own, had they
cost what a bare commit does), and the turn minus the floor.

Run: python bench/durable_floor.py [--rounds 3] [--turns 200] [--commits 300]
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

from turnlog import Agent, Runtime, ScriptedModel, calls, function_tool, tool_call

ROW = b'{"session_id":"bench","text":"' + b"x" * 240 + b'"}'


@function_tool
def echo(text: str) -> str:
    """Returns its argument."""
    return text


def commit_cost(folder: Path, commits: int) -> tuple[float, float]:
    """(wall seconds, CPU seconds) one bare WAL, synchronous=FULL commit of
    three rows takes; its CPU is mostly the kernel's write and fdatasync."""
    path = folder / f"bare-{os.getpid()}-{time.monotonic_ns()}.sqlite3"
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=FULL")
        connection.execute(
            "CREATE TABLE events (id TEXT, version INTEGER, topic TEXT, state BLOB,"
            " PRIMARY KEY (id, version))"
        )
        cpu, started = time.process_time(), time.perf_counter()
        for number in range(commits):
            connection.execute("BEGIN")
            for version in (1, 2, 3):
                connection.execute(
                    "INSERT INTO events VALUES (?, ?, ?, ?)",
                    (str(number), version, "turnlog:Bench", ROW),
                )
            connection.execute("COMMIT")
        return (
            (time.perf_counter() - started) / commits,
            (time.process_time() - cpu) / commits,
        )
    finally:
        connection.close()


def turn_cost(folder: Path, turns: int) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds, commits) a turn takes on an SQLite file."""
    path = folder / f"turnlog-{os.getpid()}-{time.monotonic_ns()}.sqlite3"
    model = ScriptedModel()
    for _ in range(turns + 10):
        model.add(calls(tool_call("echo", {"text": "hi"})), "done")
    with Runtime.open(f"sqlite:///{path}") as rt:
        session = rt.create_session(Agent("bench", model=model, tools=[echo]))
        for turn in range(10):
            session.prompt(f"warm-up {turn}", timeout=30)
        writer = rt.store._writer  # the bench counts commits
        commits = writer.commits
        cpu, wall = time.process_time(), time.perf_counter()
        for turn in range(turns):
            session.prompt(f"turn {turn}", timeout=30)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        commits = writer.commits - commits
    return wall / turns, cpu / turns, commits / turns


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--commits", type=int, default=300)
    args = parser.parse_args()
    overheads = []
    with tempfile.TemporaryDirectory(dir=Path.cwd()) as name:
        folder = Path(name)
        for number in range(1, args.rounds + 1):
            commit, commit_cpu = commit_cost(folder, args.commits)
            wall, cpu, commits = turn_cost(folder, args.turns)
            floor = commits * commit
            overheads.append(wall - floor)
            print(
                f"round {number}: one commit {commit * 1e6:.0f} us "
                f"({commit_cpu * 1e6:.0f} us CPU), "
                f"{commits:.2f} commits a turn, floor {floor * 1e6:.0f} us; "
                f"turn {wall * 1e6:.0f} us wall, {cpu * 1e6:.0f} us CPU "
                f"({(cpu - commits * commit_cpu) * 1e6:.0f} us besides the "
                f"commits' own); turn - floor {(wall - floor) * 1e6:.0f} us"
            )
    print(f"median turn - floor: {statistics.median(overheads) * 1e6:.0f} us")


if __name__ == "__main__":
    main()
