"""What sessions hosted on the I/O loop, their saves committed together, would give.

The fourteenth pass measured a stand-in that runs every pooled actor's
messages on the I/O loop, saves included as they come: among many
sessions on a durable store its commits are no longer grouped (one fsync
a save, the loop held for each), and it served fewer sessions a second.
It named the design that would not lose the grouping: the loop commits
each iteration's saves together. This measures that design's reward
before anyone builds it, with a stand-in that is not a correct runtime
(a save's wait suspends only on the loop's thread; a sync tool runs on
the loop; nothing else that blocks has been looked at):

- ``free``: turnlog as it is;
- ``on-loop``: every pooled actor's run on the I/O loop, saves committed
  as they come (``bench/thread_topology.py``'s stand-in);
- ``loop-commit``: the same, each run in a greenlet of its own; a save
  made on the loop queues for the iteration's batch and suspends its run
  (the greenlet switches back to the loop), and the batch, every save
  the iteration made, is committed in one transaction by a callback the
  loop runs next (through the group commit's queue, beside other threads'
  saves), after which each suspended run resumes where it saved;
- ``loop-commit-alone``: the same, but a save commits at once when no
  save waits in the batch and no other run waits on the loop to start:
  with nothing to share a commit with, the loop's next step only adds.

The workload is the peers' phase B: ``--sessions`` sessions (default 50)
created together (``create_session_async``) on a fresh SQLite file, then
``--turns`` turns each (default 4), all prompted at once from asyncio
(``prompt_async``); each turn a model call asking for ``add``, the tool,
and a model call answering. Each round runs every variant once, each in a
fresh process, in a shuffled order; printed are sessions/s, the process's
CPU a session and the transactions committed a round, as medians over the
rounds, and each variant's sessions/s against ``free``'s in its round.

Needs greenlet (``pip install greenlet``), for ``loop-commit`` only.

``--sessions 1 --turns 300`` measures a lone session instead (its CPU a
turn is the figure), ``--store memory://`` on memory://.

Run: python bench/loop_commit.py [--rounds 5] [--sessions 50] [--turns 4]
[--store sqlite | memory://]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from turnlog import (
    Agent,
    ModelRequest,
    ModelResponse,
    Runtime,
    calls,
    function_tool,
    reply,
    tool_call,
)

VARIANTS = ("free", "on-loop", "loop-commit", "loop-commit-alone")


def add(a: int, b: int) -> int:
    """Adds two integers."""
    return a + b


class Adder:
    """Asks for ``add`` of the prompt's two numbers, then states the sum."""

    async def respond(self, request: ModelRequest) -> ModelResponse:
        last = request.items[-1]
        if last.get("type") == "function_call_output":
            return reply(f"The sum is {last['output']}.")
        a, b = (int(word) for word in str(last["content"]).split()[-2:])
        return calls(tool_call("add", {"a": a, "b": b}))


class Hosted:
    """Where the runs went: the loop, and how many wait on it to start."""

    def __init__(self) -> None:
        self.loops: list[Any] = []
        self.waiting = 0

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self.loops[-1]._loop  # type: ignore[no-any-return]


def host_runs_on_loop(in_greenlet: bool) -> Hosted:
    """Every pooled actor's run goes to the runtime's I/O loop (each in a
    greenlet of its own if ``in_greenlet``)."""
    from turnlog.actors import actor_pool, io_loop

    hosted = Hosted()
    made = io_loop.IoLoop.__init__

    def init(self: Any, name: str = "turnlog-io") -> None:
        made(self, name)
        if name == "turnlog-io":
            hosted.loops.append(self)

    def start(run: Callable[[], None]) -> None:
        hosted.waiting -= 1
        if in_greenlet:
            import greenlet  # type: ignore[import-not-found]

            greenlet.greenlet(run).switch()
        else:
            run()

    def submit(self: Any, run: Callable[[], None]) -> None:
        loop = hosted.loop
        hosted.waiting += 1  # (a stand-in: the count is not thread-safe)
        if threading.current_thread().name == "turnlog-io":
            loop.call_soon(start, run)
        else:
            loop.call_soon_threadsafe(start, run)

    io_loop.IoLoop.__init__ = init  # type: ignore[method-assign]
    actor_pool.ActorPool.submit = submit  # type: ignore[method-assign]
    return hosted


def commit_each_iteration(hosted: Hosted, *, alone_now: bool) -> None:
    """A save made in a run on the loop waits for the iteration's batch.

    ``alone_now``: a save commits at once, as it would on a thread, when
    no save waits in the batch and no other run waits to start: a lone
    session has nothing to share a commit with, and waiting for the loop's
    next step would only add one.
    """
    import greenlet

    from turnlog.store import group_commit

    writer = group_commit.GroupCommit
    save_now = writer.save
    batches: dict[int, list[tuple[Any, Any]]] = {}

    def commit(self: Any) -> None:
        batch = batches.pop(id(self))
        saves = [pending for pending, _ in batch]
        first = saves[0]
        # Into the group commit's queue as one run of saves: whoever writes
        # next takes them all. Only ``first`` can be woken to write, so a
        # run of more than MAX_BATCH saves (1,000), which the writer would
        # split, would leave its rest waiting for ever: a stand-in's limit,
        # far above the 50 sessions it is run with.
        with self._lock:
            self._queue.extend(saves)
            first.lead = not self._writing
            if not first.lead:
                first.queue_behind()
            self._writing = True
        if not first.lead:
            first.wait()
        if first.lead:
            self._write()
        for _, run in batch:
            run.switch()

    def save(self: Any, events: Any, fence: Any, claim: Any = None) -> Any:
        run = greenlet.getcurrent()
        if run.parent is None or threading.current_thread().name != "turnlog-io":
            return save_now(self, events, fence, claim)
        batch = batches.setdefault(id(self), [])
        if alone_now and not batch and not hosted.waiting:
            return save_now(self, events, fence, claim)
        pending = group_commit.PendingSave(events, fence, claim)
        if not batch:
            hosted.loop.call_soon(commit, self)
        batch.append((pending, run))
        run.parent.switch()  # back to the loop until the batch has committed
        if pending.error is not None:
            raise pending.error
        return pending.ids

    writer.save = save  # type: ignore[method-assign]


async def sessions_at_once(
    rt: Runtime, agent: Agent, sessions: int, turns: int
) -> None:
    """Creates ``sessions`` sessions together, then runs their turns at once."""
    handles = await asyncio.gather(
        *(rt.create_session_async(agent, session_id=f"s{n}") for n in range(sessions))
    )

    async def run(number: int, handle: Any) -> None:
        for turn in range(1, turns + 1):
            a, b = turn, 1000 * (number + 1) + 7 * turn
            result = await handle.prompt_async(f"Turn {turn}: what is {a} {b}")
            assert result.final_output == f"The sum is {a + b}.", result.final_output

    await asyncio.gather(*(run(n, h) for n, h in enumerate(handles)))


def child(variant: str, sessions: int, turns: int, store: str) -> None:
    """One variant's run: prints sessions/s, CPU ms a session, commits."""
    if variant != "free":
        hosted = host_runs_on_loop(in_greenlet=variant.startswith("loop-commit"))
        if variant.startswith("loop-commit"):
            commit_each_iteration(hosted, alone_now=variant == "loop-commit-alone")
    agent = Agent(
        "adder", model=Adder(), tools=[function_tool(add)], instructions="Add."
    )
    with tempfile.TemporaryDirectory() as folder:
        warm = f"sqlite:///{Path(folder) / 'warm.sqlite3'}"
        with Runtime.open(warm) as rt:  # imports, first connections
            asyncio.run(sessions_at_once(rt, agent, 5, 1))
        url = store if store != "sqlite" else f"sqlite:///{Path(folder) / 'b.sqlite3'}"
        with Runtime.open(url) as rt:
            writer = rt.store._writer
            commits = writer.commits
            cpu, wall = time.process_time(), time.perf_counter()
            asyncio.run(sessions_at_once(rt, agent, sessions, turns))
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            commits = writer.commits - commits
    print(f"{sessions / wall:.1f} {cpu / sessions * 1e3:.3f} {commits}")


def measure(
    variant: str, sessions: int, turns: int, store: str
) -> tuple[float, float, int]:
    out = subprocess.run(
        [
            sys.executable,
            __file__,
            "--child",
            variant,
            str(sessions),
            str(turns),
            store,
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    ).stdout.split()
    return float(out[0]), float(out[1]), int(out[2])


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--store", default="sqlite", help="sqlite or memory://")
    args = parser.parse_args()
    got: dict[str, list[tuple[float, float, int]]] = {v: [] for v in VARIANTS}
    ratios: dict[str, list[float]] = {v: [] for v in VARIANTS}
    for number in range(args.rounds):
        order = list(VARIANTS)
        random.shuffle(order)
        this = {v: measure(v, args.sessions, args.turns, args.store) for v in order}
        for variant, figures in this.items():
            got[variant].append(figures)
            ratios[variant].append(figures[0] / this["free"][0])
        listed = ", ".join(f"{v} {this[v][0]:.0f}" for v in VARIANTS)
        print(f"round {number + 1} (sessions/s): {listed}", flush=True)
    print(
        f"{args.sessions} sessions of {args.turns} turns on {args.store};"
        " medians over the rounds"
    )
    for variant in VARIANTS:
        rows = got[variant]
        rate = statistics.median(r[0] for r in rows)
        cpu = statistics.median(r[1] for r in rows)
        commits = statistics.median(r[2] for r in rows)
        ratio = statistics.median(ratios[variant])
        print(
            f"{variant}: {rate:.1f} sessions/s ({ratio:.2f} of free),"
            f" CPU {cpu:.2f} ms a session ({cpu / args.turns * 1e3:.0f} us a turn),"
            f" {commits:.0f} commits"
        )


if __name__ == "__main__":
    main()
