"""What a turn's hand-overs between threads cost in place, not in a ping-pong.

``bench/handover_cost.py`` times a bare hand-over (6-18 us of CPU) and the
second pass read from it that hand-overs are under a tenth of a turn.
That misses what a hand-over does to the work around it: the thread that
takes the work up may run on the other core, away from the objects the
sender just made, and wait there for the GIL. This runs
``bench/turn_cpu.py``'s workload (one session on memory://, 10 warm-up
turns, then ``turns`` turns of one tool call each) in a fresh process a
variant, with the threads' arrangement changed:

- ``free``: as turnlog runs (since the fourteenth pass, a sync tool call
  runs on its session's worker: no hand-over for it);
- ``one-core``: the process kept on one core (``os.sched_setaffinity``
  before any thread starts): the same hand-overs, none across cores;
- ``tool-thread``: a sync tool call on a thread pool of its own, as
  before the fourteenth pass (a round trip more a turn);
- ``on-loop``: every pooled actor's messages, and so the sync tools a
  session starts, run on the I/O loop's thread (the model's two round
  trips a turn gone): only the caller's round trip is left.

- ``one-thread``: as ``on-loop``, and the caller prompts from a coroutine
  on that loop too (``prompt_async``): no turn's work leaves the loop's
  thread, so what is left is the layers' own CPU (the views still fold
  on their thread, as they do in every variant).

``on-loop`` and ``one-thread`` are stand-ins, not a correct runtime (a save on the loop
holds it; a tool there cannot time out): a measurement of what a design
with fewer threads could save, no more. The eleventh to thirteenth
passes' ``tool-inline`` (a tool run inside the session's handler) is
what ``free`` does now, and their ``both`` is ``on-loop``.
Each round runs every variant once, in a shuffled order; printed are
each variant's CPU a turn (the whole process) and its ratio to ``free``
within the round, as medians over the rounds.

Run: python bench/thread_topology.py [--rounds 6] [--turns 600]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import random
import statistics
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any

VARIANTS = ("free", "one-core", "tool-thread", "on-loop", "one-thread")


def run_tools_on_their_own_threads() -> None:
    """Sync tools run on a thread pool of their own, not a session's worker."""
    from turnlog.actors import tool_executor

    own = concurrent.futures.ThreadPoolExecutor(
        max_workers=16, thread_name_prefix="turnlog-tool"
    )

    def give_thread(self: Any, call: Any) -> None:
        own.submit(self._run_sync, call)

    tool_executor.ToolExecutor._give_thread = give_thread  # type: ignore[method-assign]


def run_actors_on_loop() -> None:
    """Every pooled actor's run goes to the runtime's I/O loop, not a worker."""
    from turnlog.actors import actor_pool, io_loop

    loops: list[Any] = []
    made = io_loop.IoLoop.__init__

    def init(self: Any, name: str = "turnlog-io") -> None:
        made(self, name)
        if name == "turnlog-io":
            loops.append(self)

    def submit(self: Any, run: Callable[[], None]) -> None:
        loop = loops[-1]._loop
        if threading.current_thread().name == "turnlog-io":
            loop.call_soon(run)
        else:
            loop.call_soon_threadsafe(run)

    io_loop.IoLoop.__init__ = init  # type: ignore[method-assign]
    actor_pool.ActorPool.submit = submit  # type: ignore[method-assign]


def turns_prompted_on_the_loop(
    turns: int, *, follow_projections: bool = True
) -> tuple[float, float]:
    """turn_cpu.py's workload, each turn prompted from a coroutine on the
    runtime's own I/O loop; (CPU seconds, wall seconds) of ``turns``.
    ``follow_projections=False``: with no views kept (turn_ablation.py)."""
    import asyncio
    import time

    from turn_cpu import echo  # type: ignore[import-not-found]

    from turnlog import Agent, Runtime, ScriptedModel, calls, tool_call
    from turnlog.store import Store

    model = ScriptedModel()
    for _ in range(turns + 10):
        model.add(calls(tool_call("echo", {"text": "hi"})), "done")

    async def prompts(session: Any) -> tuple[float, float]:
        for turn in range(10):
            await session.prompt_async(f"warm-up {turn}")
        cpu, wall = time.process_time(), time.perf_counter()
        for turn in range(turns):
            await session.prompt_async(f"turn {turn}")
            model.requests.clear()
        return time.process_time() - cpu, time.perf_counter() - wall

    with Runtime(Store("memory://"), follow_projections=follow_projections) as rt:
        session = rt.create_session(Agent("b", model=model, tools=[echo]))
        loop = rt._io_loop._loop
        return asyncio.run_coroutine_threadsafe(prompts(session), loop).result(600)


def child(variant: str, turns: int) -> None:
    """One variant's run; prints CPU and wall microseconds a turn."""
    if variant == "one-core":
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    if variant == "tool-thread":
        run_tools_on_their_own_threads()
    if variant in ("on-loop", "one-thread"):
        run_actors_on_loop()
    if variant == "one-thread":
        cpu, wall = turns_prompted_on_the_loop(turns)
        print(f"{cpu / turns * 1e6:.1f} {wall / turns * 1e6:.1f}")
        return
    # turn_cpu.py's workload itself; imported once the stand-ins are in.
    from turn_cpu import timed_turns  # type: ignore[import-not-found]

    cpu, wall = timed_turns(turns, "memory://", forget=True)
    print(f"{cpu / turns * 1e6:.1f} {wall / turns * 1e6:.1f}")


def measure(variant: str, turns: int) -> tuple[float, float]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", variant, str(turns)],
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    ).stdout.split()
    return float(out[0]), float(out[1])


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], int(sys.argv[3]))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--turns", type=int, default=600)
    args = parser.parse_args()
    cpu: dict[str, list[float]] = {variant: [] for variant in VARIANTS}
    ratios: dict[str, list[float]] = {variant: [] for variant in VARIANTS}
    for number in range(args.rounds):
        order = list(VARIANTS)
        random.shuffle(order)
        got = {variant: measure(variant, args.turns) for variant in order}
        for variant, (used, _wall) in got.items():
            cpu[variant].append(used)
            ratios[variant].append(used / got["free"][0])
        listed = ", ".join(f"{v} {got[v][0]:.0f}/{got[v][1]:.0f}" for v in VARIANTS)
        print(f"round {number + 1} (CPU/wall us a turn): {listed}", flush=True)
    print("variant: CPU us a turn, median (range); ratio to free, median (range)")
    for variant in VARIANTS:
        used, ratio = cpu[variant], ratios[variant]
        spread = f"{min(used):.0f}-{max(used):.0f}"
        print(
            f"{variant}: {statistics.median(used):.0f} ({spread});"
            f" {statistics.median(ratio):.3f} ({min(ratio):.2f}-{max(ratio):.2f})"
        )


if __name__ == "__main__":
    main()
