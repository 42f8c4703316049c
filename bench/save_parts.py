"""The CPU a turn spends inside a save and each of its parts, without a profiler.

A profiler's hook on every call inflates a turn built of many small calls
(yappi puts 9-10 ms on a 2 ms turn) and shifts the shares towards the
Python functions. This wraps only the functions named below, each in a
``time.thread_time`` difference (the CPU of the thread that called it),
and runs ``bench/turn_cpu.py``'s workload: one session, 10 warm-up
turns, then ``turns`` turns of one tool call each, the scripted model
keeping no requests. Printed: the process's CPU a turn (every thread),
then each wrapped function's CPU a turn, inclusive of what it calls.

Run: python bench/save_parts.py [TURNS] [memory:// | sqlite]
"""

from __future__ import annotations

import functools
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from turn_cpu import timed_turns  # type: ignore[import-not-found]

from turnlog.actors import session_actor, session_state
from turnlog.store import chaining, log, sqlite

PARTS: list[tuple[Any, str]] = [
    (session_actor.SessionActor, "on_receive"),
    (session_state.SessionState, "_save"),
    (log.Store, "save"),
    (log.Store, "_put"),
    (sqlite.WriteTransaction, "__enter__"),
    (sqlite.SQLiteLogRecorder, "_insert_events"),
    (sqlite.WriteTransaction, "__exit__"),
]
"""(owner, attribute) of each function timed; ``stamp_stored`` besides."""

spent: dict[str, float] = {}


def timed(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    spent[name] = 0.0

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.thread_time()
        try:
            return function(*args, **kwargs)
        finally:
            spent[name] += time.thread_time() - started

    return wrapper


def wrap_parts() -> None:
    for owner, attribute in PARTS:
        name = f"{owner.__name__}.{attribute}"
        setattr(owner, attribute, timed(name, getattr(owner, attribute)))
    # The store calls it by the name it imported.
    log.stamp_stored = timed("stamp_stored", chaining.stamp_stored)  # type: ignore[attr-defined]


def main() -> None:
    turns = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    store = sys.argv[2] if len(sys.argv) > 2 else "memory://"
    wrap_parts()

    def start_counting() -> None:
        for name in spent:
            spent[name] = 0.0

    with tempfile.TemporaryDirectory() as folder:
        url = store if store != "sqlite" else f"sqlite:///{Path(folder) / 'b.sqlite3'}"
        cpu, _ = timed_turns(turns, url, forget=True, before=start_counting)
    print(f"process CPU {cpu / turns * 1e6:.0f} us a turn ({store})")
    for name, seconds in spent.items():
        print(f"{seconds / turns * 1e6:8.0f} us a turn  {name}")


if __name__ == "__main__":
    main()
