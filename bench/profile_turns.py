"""Where the CPU of a concurrent turn goes: a yappi profile of many sessions.

Runs S sessions x K turns at once (the workload of
bench/concurrent_sessions.py) on one store under yappi's CPU clock, all
threads, and prints the functions with the most inclusive CPU time, the
CPU per turn, and how many transactions the log committed per turn.

Run: python bench/profile_turns.py [--sessions 100] [--turns 4]
[--store memory://] [--top 30]   (needs ``pip install yappi``)
"""

from __future__ import annotations

import argparse
import asyncio
import time

import yappi  # type: ignore[import-not-found]
from concurrent_sessions import load  # type: ignore[import-not-found]

from turnlog import Runtime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--store", default="memory://")
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()
    commits = 0
    with Runtime.open(args.store) as rt:
        asyncio.run(load(rt, "warm", 10, 2))  # imports, first connections
        # Transactions of events: the group commit's count where there is
        # one, else every insert (one transaction each).
        writer = getattr(rt.store, "_writer", None)
        before = writer.commits if writer is not None else 0
        recorder = rt.store._app.recorder
        insert = recorder.insert_events

        def counting(*a: object, **k: object) -> object:
            nonlocal commits
            commits += 1
            return insert(*a, **k)

        if writer is None:
            recorder.insert_events = counting
        yappi.set_clock_type("cpu")
        yappi.start()
        started = time.perf_counter()
        asyncio.run(load(rt, "p", args.sessions, args.turns))
        elapsed = time.perf_counter() - started
        yappi.stop()
        if writer is not None:
            commits = writer.commits - before
    turns = args.sessions * args.turns
    stats = yappi.get_func_stats()
    total = sum(t.ttot for t in yappi.get_thread_stats())
    print(
        f"{args.sessions} sessions x {args.turns} turns on {args.store}: "
        f"{args.sessions / elapsed:.1f} sessions/s under the profiler, "
        f"{total / turns * 1e6:.0f} us CPU a turn, "
        f"{commits / turns:.2f} event transactions a turn"
    )
    print(f"{'incl. CPU':>9} {'share':>6} {'calls/turn':>10}  function")
    for stat in sorted(stats, key=lambda s: s.ttot, reverse=True)[: args.top]:
        where = f"{stat.module.rsplit('site-packages/', 1)[-1]}:{stat.lineno}"
        print(
            f"{stat.ttot:9.2f} {stat.ttot / total:6.1%} {stat.ncall / turns:10.1f}  "
            f"{stat.name} ({where})"
        )


if __name__ == "__main__":
    main()
