"""CPU a turn, thread by thread: where a store's extra CPU goes.

``bench/turn_cpu.py``'s workload (one session, 10 warm-up turns, then
``turns`` turns of one tool call each), on any store URL; prints the
process's CPU and wall time a turn, then each thread's CPU a turn (the
kernel's ``schedstat``, in microseconds, user and system time together)
for the threads alive at the end, and how much of it the kernel spent
(system calls: on a file, the commits' writes and ``fdatasync``).
``pg`` runs on a fresh schema of the PostgreSQL server named by
TURNLOG_BENCH_POSTGRES_URL (default postgresql://postgres@127.0.0.1:5432/test),
dropped afterwards.

Run: python bench/turn_threads.py [TURNS] [memory:// | sqlite | pg | URL]
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

from turnlog import Agent, Runtime, ScriptedModel, calls, function_tool, tool_call


@function_tool
def echo(text: str) -> str:
    """Returns its argument."""
    return text


TICK = 1e6 / os.sysconf("SC_CLK_TCK")
"""Microseconds a clock tick: /proc's user and system times count in them."""


def thread_cpu() -> dict[int, tuple[str, float, float]]:
    """(name, CPU microseconds so far, of them in the kernel) of each live
    thread, by native id.

    The CPU is the scheduler's (``schedstat``, in nanoseconds); the
    kernel's part comes from ``stat``'s system time, counted in clock
    ticks, so it is coarse: read it over hundreds of turns.
    """
    names = {t.native_id: t.name for t in threading.enumerate()}
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as stat:
                nanoseconds = int(stat.read().split()[0])
            with open(f"/proc/self/task/{tid}/stat") as stat:
                # The fields after the name, which is in parentheses.
                fields = stat.read().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue  # ended meanwhile
        system = int(fields[12]) * TICK  # stime, field 15 of stat(5)
        out[int(tid)] = (
            names.get(int(tid), f"thread {tid}"),
            nanoseconds / 1e3,
            system,
        )
    return out


def drop_schema(base: str, schema: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
        )


def main() -> None:
    turns = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    store = sys.argv[2] if len(sys.argv) > 2 else "memory://"
    base = os.environ.get(
        "TURNLOG_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
    )
    schema = f"bench_threads_{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory() as folder:
        url = {
            "sqlite": f"sqlite:///{Path(folder) / 'b.sqlite3'}",
            "pg": f"{base}?schema={schema}",
        }.get(store, store)
        model = ScriptedModel()
        for _ in range(turns + 10):
            model.add(calls(tool_call("echo", {"text": "hi"})), "done")
        try:
            with Runtime.open(url) as rt:
                session = rt.create_session(Agent("b", model=model, tools=[echo]))
                for turn in range(10):
                    session.prompt(f"warm-up {turn}", timeout=30)
                before = thread_cpu()
                cpu, wall = time.process_time(), time.perf_counter()
                for turn in range(turns):
                    session.prompt(f"turn {turn}", timeout=30)
                cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
                after = thread_cpu()
        finally:
            if store == "pg":
                drop_schema(base, schema)
    print(f"cpu us/turn {cpu / turns * 1e6:.0f}, wall us/turn {wall / turns * 1e6:.0f}")
    spent = sorted(
        (
            (
                used - before.get(tid, (name, 0.0, 0.0))[1],
                system - before.get(tid, (name, 0.0, 0.0))[2],
                name,
            )
            for tid, (name, used, system) in after.items()
        ),
        reverse=True,
    )
    for used, system, name in spent:
        if used / turns >= 1:
            print(
                f"  {used / turns:7.0f} us/turn ({system / turns:5.0f} in the kernel)"
                f"  {name}"
            )


if __name__ == "__main__":
    main()
