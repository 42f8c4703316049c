"""A turn with one part of the log's pipeline taken away: what that part costs.

``bench/turn_cpu.py``'s workload on memory:// (one session, 10 warm-up
turns, then ``turns`` turns of one tool call each), with ``variant``
switched off by replacing it in this process only:

- ``none``: nothing taken away (the reference);
- ``views``: the runtime keeps no views (``follow_projections=False``);
- ``translate``: no EventMsgs made from the saved events;
- ``chain``: no hash chain (no canonical encoding, no SHA-256);
- ``sql``: the events' rows are not inserted (the transaction still
  runs), and no views kept (they would find the rows missing and read
  the log for them): compare it with ``views``;
- ``all``: all four at once: what is left is the actors, the domain's
  decisions and the save's own machinery;
- ``floor``: ``all``, and every pooled actor's run and the caller on the
  I/O loop's thread (``bench/thread_topology.py``'s ``one-thread``
  stand-in): no hand-over between threads either.

A turn without them is not a correct turn (nothing here is for use); the
differences say which parts a faster design must make cheaper. Count
each under callgrind, as bench/turn_instructions.py does (two lengths,
the difference over the turns between them). The views fold in batches
gathered over a wall-clock interval, so under callgrind (tens of times
slower) they fold far more often a turn than at full speed: take their
share from CPU time instead (bench/turn_threads.py).

    valgrind --tool=callgrind python bench/turn_ablation.py VARIANT 100
    valgrind --tool=callgrind python bench/turn_ablation.py VARIANT 300

Run: python bench/turn_ablation.py VARIANT [TURNS]
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Sequence
from typing import Any

import turnlog.store.sqlite as sqlite_store
from turnlog import Agent, Runtime, ScriptedModel, calls, function_tool, tool_call
from turnlog.domain import translation
from turnlog.store import Store, chaining

VARIANTS = ("none", "views", "translate", "chain", "sql", "all", "floor")


@function_tool
def echo(text: str) -> str:
    """Returns its argument."""
    return text


def take_away(variant: str) -> None:
    """Replaces the parts ``variant`` names with stand-ins that do nothing."""
    every = variant in ("all", "floor")
    if variant == "translate" or every:
        translation.EventTranslator.translate = (  # type: ignore[method-assign]
            lambda _self, _event, _sequence: []
        )
    if variant == "chain" or every:
        chaining.link_state = lambda previous, *_parts: previous
    if variant == "sql" or every:
        positions = itertools.count(1)

        def no_rows(_self: Any, _cursor: Any, stored: Sequence[Any]) -> list[int]:
            return [next(positions) for _ in stored]

        sqlite_store.SQLiteLogRecorder._insert_rows = no_rows  # type: ignore[method-assign]


def main() -> None:
    variant = sys.argv[1] if len(sys.argv) > 1 else "none"
    turns = int(sys.argv[2]) if len(sys.argv) > 2 else 300
    if variant not in VARIANTS:
        sys.exit(f"variant must be one of {', '.join(VARIANTS)}")
    take_away(variant)
    if variant == "floor":
        from thread_topology import (  # type: ignore[import-not-found]
            run_actors_on_loop,
            turns_prompted_on_the_loop,
        )

        run_actors_on_loop()
        turns_prompted_on_the_loop(turns, follow_projections=False)
        return
    model = ScriptedModel()
    for _ in range(turns + 10):
        model.add(calls(tool_call("echo", {"text": "hi"})), "done")
    views = variant not in ("views", "sql", "all")
    with Runtime(Store("memory://"), follow_projections=views) as rt:
        session = rt.create_session(Agent("b", model=model, tools=[echo]))
        for turn in range(10):
            session.prompt(f"warm-up {turn}", timeout=30)
        for turn in range(turns):
            session.prompt(f"turn {turn}", timeout=30)
            model.requests.clear()


if __name__ == "__main__":
    main()
