"""Forking a long session: events written, time taken, cost of opening the fork.

Builds one session of at least ``--events`` events (turns of one tool call
each, on a temporary SQLite file unless ``--store`` is given), then:

- forks it ``--repeat`` times at its latest point and at its middle turn,
  timing the fork itself (finding the point in the log, writing the fork:
  ``turnlog.hosting.forking.record_fork``, what ``rt.fork_session`` does before it
  opens the fork) and ``rt.fork_session`` whole (the fork, then opening it
  as ``create_session`` would), and counting the events each fork wrote;
- opens, in a fresh runtime, the fork of the latest point and the source
  itself (the same point), and prints both times (median of ``--repeat``).

Budget (issue 21): a fork writes O(1) events (one) and takes under 50 ms on
SQLite; opening the fork costs what opening the source at that point costs.

Run: python bench/fork.py [--events 10000] [--repeat 5] [--store URL]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from turnlog import Agent, Runtime, ScriptedModel, calls, function_tool, tool_call
from turnlog.domain.ids import session_uuid
from turnlog.hosting.forking import record_fork


@function_tool
def lookup(key: str) -> str:
    """Returns a value."""
    return f"value of {key}"


def fill(rt: Runtime, events: int) -> int:
    """Runs turns of session ``src`` until the log holds ``events``; turns run."""
    model = ScriptedModel()
    session = rt.create_session(
        Agent("a", model=model, tools=[lookup]), session_id="src"
    )
    turns = 0
    while rt.store.max_position() < events:
        model.add(calls(tool_call("lookup", {"key": f"k{turns}"})), f"answer {turns}")
        session.prompt(f"question {turns}", timeout=30)
        turns += 1
    return turns


def agent() -> Agent:
    return Agent("a", model=ScriptedModel(), tools=[lookup])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--store")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = args.store or f"sqlite:///{Path(tmp) / 'bench.sqlite3'}"
        with Runtime.open(url) as rt:
            turns = fill(rt, args.events)
            total = rt.store.max_position()
            print(f"source: {turns} turns, {total} events")
            for label, point in (("latest", None), ("middle", turns // 2)):
                times, whole, written = [], [], []
                for n in range(args.repeat):
                    before = rt.store.max_position()
                    started = time.perf_counter()
                    record_fork(
                        rt.store, "src", after_turn=point, session_id=f"{label}-{n}"
                    )
                    times.append((time.perf_counter() - started) * 1000)
                    written.append(rt.store.max_position() - before)
                    started = time.perf_counter()
                    rt.fork_session(
                        "src",
                        after_turn=point,
                        session_id=f"{label}-open-{n}",
                        agent=agent(),
                    )
                    whole.append((time.perf_counter() - started) * 1000)
                rows = len(rt.store.stored_rows([session_uuid(f"{label}-0")]))
                median = statistics.median
                print(
                    f"fork at the {label} point: median {median(times):.1f} ms "
                    f"(min {min(times):.1f}, max {max(times):.1f}); events written "
                    f"{sorted(set(written))}; rows of the fork {rows}; "
                    f"rt.fork_session with opening: median {median(whole):.1f} ms"
                )
        opened: dict[str, list[float]] = {"fork": [], "source": []}
        for n in range(args.repeat):
            order = (("latest-0", "fork"), ("src", "source"))
            for session_id, key in order if n % 2 else order[::-1]:
                with Runtime.open(url) as rt:
                    started = time.perf_counter()
                    session = rt.create_session(agent(), session_id=session_id)
                    count = len(session.messages())
                    opened[key].append((time.perf_counter() - started) * 1000)
        print(
            f"open in a fresh runtime ({count} messages): fork "
            f"{statistics.median(opened['fork']):.1f} ms, source at the same point "
            f"{statistics.median(opened['source']):.1f} ms (medians)"
        )


if __name__ == "__main__":
    main()
