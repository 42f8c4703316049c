"""Per-turn overhead of turnlog itself, on the embedded SQLite file store.

One session, 200 turns; each turn is two scripted model calls and one
trivial tool call, so what is measured is turnlog: deciding, saving the
events (synchronous=FULL, one transaction per step), publishing, and the
actor hand-offs. Prints the median microseconds per turn and the mean of
turns 181-200 over the mean of turns 1-20 (the log is appended, never
re-read whole, so that ratio should stay near 1).

Run: python bench/turn_overhead.py [--turns 200] [--store URL]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from turnlog import Agent, Runtime, ScriptedModel, calls, function_tool, tool_call


@function_tool
def echo(text: str) -> str:
    """Returns its argument."""
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument(
        "--store", default=None, help="store URL (default: temp SQLite)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        url = args.store or f"sqlite:///{Path(folder) / 'bench.sqlite3'}"
        model = ScriptedModel()
        for _ in range(args.turns):
            model.add(calls(tool_call("echo", {"text": "hi"})), "done")
        agent = Agent("bench", model=model, tools=[echo])
        durations: list[float] = []
        with Runtime.open(url) as rt:
            session = rt.create_session(agent, session_id="bench")
            for turn in range(args.turns):
                started = time.perf_counter()
                result = session.prompt(f"turn {turn}", timeout=30)
                durations.append(time.perf_counter() - started)
                assert result.final_output == "done", result
            events = rt.store.max_position()
    micros = [d * 1e6 for d in durations]
    head = statistics.fmean(micros[:20])
    tail = statistics.fmean(micros[-20:])
    print(f"store: {'given URL' if args.store else 'SQLite file (synchronous=FULL)'}")
    print(f"turns: {args.turns}, events in the log: {events}")
    print(f"median per turn: {statistics.median(micros):.0f} us")
    print(f"p90 per turn: {statistics.quantiles(micros, n=10)[-1]:.0f} us")
    print(f"mean turns 1-20: {head:.0f} us, mean of the last 20: {tail:.0f} us")
    print(f"ratio last-20 / first-20: {tail / head:.2f}")


if __name__ == "__main__":
    main()
