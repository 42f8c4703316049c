"""What sessions leave to the cyclic garbage collector (issue 24).

The collector's full runs cost in proportion to the GC-tracked objects
alive; every run at all is due to tracked objects allocated and not yet
freed. So two figures, both on ``memory://`` with a model that answers
after ``--latency`` seconds, one agent shared by every session (the
peers' harness's turn: a tool call, its output, a final answer):

- tracked objects alive per idle session, after ``--sessions`` sessions
  of one turn each (the growth of ``gc.get_objects()``), with its actor
  running and then passivated; and per session waiting on its model,
  mid-turn (a model that holds every turn's first call until all
  ``--sessions`` have made it): what a service with many sessions
  waiting on a provider has the collector walk;
- collector-only garbage (objects that refcounting could not free: in
  cycles) per creation, per turn and per passivation: with the collector
  off and ``gc.DEBUG_SAVEALL``, what a ``gc.collect()`` then finds.

Each figure comes with the types that make most of it.

Run: python bench/gc_objects.py [--sessions 500] [--top 15] [--latency 0.002]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import gc
import threading
import time
from collections.abc import Callable
from typing import Any

from turnlog import (
    Agent,
    ModelRequest,
    ModelResponse,
    RunConfig,
    Runtime,
    calls,
    function_tool,
    reply,
    tool_call,
)


class AddingModel:
    """Asks for one tool call, then answers with its output, each after
    ``latency`` seconds (a timer on the loop, as a real model's wait)."""

    def __init__(self, latency: float) -> None:
        self.latency = latency

    async def respond(self, request: ModelRequest) -> ModelResponse:
        await asyncio.sleep(self.latency)
        last = request.items[-1]
        if last.get("type") == "function_call_output":
            return reply(f"the sum is {last.get('output')}")
        return calls(tool_call("add", {"a": 2, "b": 3}, call_id="call_1"))


class HeldModel(AddingModel):
    """As AddingModel, but a turn's first call waits until :meth:`release`:
    so many sessions can be caught waiting on their model at once."""

    def __init__(self) -> None:
        super().__init__(0.0)
        self._arrived = threading.Condition()
        self._waiting = self._answered = 0
        self._gate: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def respond(self, request: ModelRequest) -> ModelResponse:
        if request.items[-1].get("type") != "function_call_output":
            if self._gate is None:
                self._loop = asyncio.get_running_loop()
                self._gate = asyncio.Event()
            with self._arrived:
                self._waiting += 1
                self._arrived.notify_all()
            await self._gate.wait()
        response = await super().respond(request)
        with self._arrived:
            self._answered += 1
            self._arrived.notify_all()
        return response

    def wait_for(self, calls: int, timeout: float = 60.0) -> None:
        """Returns once ``calls`` first calls are waiting."""
        self._wait(lambda: self._waiting >= calls, timeout)

    def wait_answered(self, calls: int, timeout: float = 60.0) -> None:
        """Returns once ``calls`` calls have answered."""
        self._wait(lambda: self._answered >= calls, timeout)

    def _wait(self, done: Callable[[], bool], timeout: float) -> None:
        with self._arrived:
            if not self._arrived.wait_for(done, timeout):
                raise SystemExit("the model's calls did not come in time")

    def release(self) -> None:
        """Lets every waiting call (and every later one) answer."""
        loop, gate = self._loop, self._gate
        if loop is not None and gate is not None:
            loop.call_soon_threadsafe(gate.set)


def add(a: int, b: int) -> int:
    """Adds two numbers."""
    return a + b


def tracked_by_type() -> collections.Counter[str]:
    gc.collect()
    return collections.Counter(type(o).__qualname__ for o in gc.get_objects())


def garbage_by_type() -> tuple[int, collections.Counter[str]]:
    """Collects with DEBUG_SAVEALL on: the unreachable objects, by type."""
    gc.collect()
    found = collections.Counter(type(o).__qualname__ for o in gc.garbage)
    count = len(gc.garbage)
    gc.garbage.clear()
    return count, found


def settle() -> None:
    """Lets the actors finish what a returned prompt left (turn actors ending)."""
    time.sleep(0.5)


def show(
    title: str, total: float, by_type: collections.Counter[str], n: int, top: int
) -> None:
    print(f"{title}: {total / n:.1f}")
    for name, count in by_type.most_common(top):
        if count / n >= 0.05:
            print(f"    {count / n:8.2f}  {name}")


class Bench:
    """One runtime, one agent, and the figures taken on them."""

    def __init__(self, rt: Runtime, agent: Agent, sessions: int, top: int) -> None:
        self.rt, self.agent, self.n, self.top = rt, agent, sessions, top
        self.handles: list[Any] = []

    def one_turn(self, session_id: str, config: RunConfig) -> Any:
        session = self.rt.create_session(
            self.agent, session_id=session_id, run_config=config
        )
        session.prompt("add 2 and 3", timeout=30)
        return session

    def alive(self) -> None:
        """Tracked objects alive per idle session (its actor running)."""
        before = tracked_by_type()
        self.handles += [self.one_turn(f"s-{s}", STAYING) for s in range(self.n)]
        settle()
        after = tracked_by_type()
        show(
            f"tracked objects alive per idle session ({self.rt.live_sessions()} live)",
            after.total() - before.total(),
            after - before,
            self.n,
            self.top,
        )

    def waiting(self, agent: Agent, model: HeldModel) -> None:
        """Tracked objects per session waiting on its model, mid-turn:
        what a service holding many such sessions has the collector walk."""
        before = tracked_by_type()
        sessions = [
            self.rt.create_session(agent, session_id=f"w-{s}", run_config=STAYING)
            for s in range(self.n)
        ]
        for session in sessions:
            session.send_input("add 2 and 3")
        model.wait_for(self.n)
        # The views fold what the saves handed them (else they hold the
        # latest recordings for up to their gathering interval).
        self.rt.checkpoints.load(sessions[-1].session_id)
        after = tracked_by_type()
        show(
            "tracked objects per session waiting on its model",
            after.total() - before.total(),
            after - before,
            self.n,
            self.top,
        )
        model.release()
        model.wait_answered(2 * self.n)  # each turn's two calls
        settle()
        self.handles += sessions

    def garbage(self) -> None:
        """Collector-only garbage per creation, then per turn."""
        gc.disable()
        gc.collect()
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            fresh = [
                self.rt.create_session(
                    self.agent, session_id=f"g-{s}", run_config=STAYING
                )
                for s in range(self.n)
            ]
            settle()
            count, found = garbage_by_type()
            show("collector-only garbage per creation", count, found, self.n, self.top)
            for session in fresh:
                session.prompt("add 2 and 3", timeout=30)
            settle()
            count, found = garbage_by_type()
            show("collector-only garbage per turn", count, found, self.n, self.top)
        finally:
            gc.set_debug(0)
            gc.enable()
        self.handles += fresh

    def passivated(self) -> None:
        """Sessions that passivate once idle: what stays, and what the
        passivation (with its creation and turn) left to the collector."""
        live = self.rt.live_sessions()
        before = tracked_by_type()
        gc.disable()
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            self.handles += [
                self.one_turn(f"p-{s}", PASSIVATING) for s in range(self.n)
            ]
            if not self.rt.wait_live_sessions(live, timeout=120):
                raise SystemExit("the sessions did not passivate within 120 s")
            settle()
            count, found = garbage_by_type()
        finally:
            gc.set_debug(0)
            gc.enable()
        after = tracked_by_type()
        show(
            "tracked objects alive per passivated session",
            after.total() - before.total(),
            after - before,
            self.n,
            self.top,
        )
        show(
            "collector-only garbage per session that passivated"
            " (its creation, turn and passivation)",
            count,
            found,
            self.n,
            self.top,
        )


STAYING = RunConfig(idle_timeout=None)
PASSIVATING = RunConfig(idle_timeout=1.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=500)
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--latency", type=float, default=0.002)
    args = parser.parse_args()
    tool = function_tool(add, name="add", description="Adds two numbers.")
    model = AddingModel(args.latency)
    agent = Agent("bench", model=model, tools=[tool], instructions="Add.")
    with Runtime.open("memory://", run_config=STAYING) as rt:
        bench = Bench(rt, agent, args.sessions, args.top)
        for w in range(20):  # warm up: imports, caches, pools
            bench.one_turn(f"warm-{w}", STAYING)
        settle()
        bench.alive()
        held = HeldModel()
        bench.waiting(
            Agent("held", model=held, tools=[tool], instructions="Add."), held
        )
        bench.garbage()
        bench.passivated()


if __name__ == "__main__":
    main()
