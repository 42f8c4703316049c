"""How fast a runtime opens brand-new sessions, one after another.

``--sessions`` (default 1,000) ``Runtime.create_session`` calls, each of
a session id the log has never seen, made one at a time from one thread
on an SQLite file (or ``--store URL``): what a service does when many
sessions arrive at once. Printed: sessions/s and the mean time of one
creation. With ``--profile``, the cProfile of the loop (top 25 by
cumulative time).

``--burst`` runs instead what the peers burst does (issue 12): from one
asyncio task per session, a synchronous ``create_session`` (so the
creations run one after another on the event loop's thread, blocking
it), then one turn by ``prompt_async`` of a model that answers after
``--model-latency`` seconds with a call of an ``add`` tool, and after
that with the sum. Printed: sessions/s over the whole burst, the time
spent in creations, and the process's CPU time.

Run: python bench/create_sessions.py [--sessions 1000] [--store URL] [--profile]
     python bench/create_sessions.py --burst [--model-latency 1.0]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import tempfile
import time
from pathlib import Path

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
from turnlog.store.log import Store


class _Model:
    """A model never called: only sessions are created here."""

    async def respond(self, request: object, on_delta: object = None) -> ModelResponse:
        raise NotImplementedError


class _SlowAdder:
    """Asks for ``add`` once, then states its result; each answer takes a while."""

    def __init__(self, latency: float) -> None:
        self.latency = latency

    async def respond(self, request: ModelRequest) -> ModelResponse:
        await asyncio.sleep(self.latency)
        last = request.items[-1]
        if last.get("type") == "function_call_output":
            return reply(f"The sum is {last.get('output')}.")
        return calls(tool_call("add", {"a": 1, "b": 2}, call_id="call_1"))


def add(a: int, b: int) -> int:
    """Adds two integers."""
    return a + b


def creations(args: argparse.Namespace, url: str) -> None:
    store = Store(url)
    runtime = Runtime(store, follow_projections=False)
    agent = Agent("bench", model=_Model())
    runtime.create_session(agent, session_id="warm-up")
    profile = cProfile.Profile() if args.profile else None
    start = time.perf_counter()
    if profile is not None:
        profile.enable()
    for n in range(args.sessions):
        runtime.create_session(agent, session_id=f"new-{n}")
    if profile is not None:
        profile.disable()
    elapsed = time.perf_counter() - start
    runtime.close()
    store.close()
    print(
        f"{args.sessions} new sessions in {elapsed:.2f} s: "
        f"{args.sessions / elapsed:.0f} sessions/s, "
        f"{elapsed / args.sessions * 1000:.2f} ms each"
    )
    if profile is not None:
        pstats.Stats(profile).sort_stats("cumulative").print_stats(25)


async def burst(args: argparse.Namespace, url: str) -> None:
    # As the peers adapter opens it: projections followed live.
    runtime = Runtime.open(url)
    tool = function_tool(add, name="add", description="Add two integers.")
    agent = Agent("bench", model=_SlowAdder(args.model_latency), tools=[tool])
    creating = 0.0

    async def one(n: int) -> None:
        nonlocal creating
        start = time.perf_counter()
        session = runtime.create_session(agent, session_id=f"s{n}")
        creating += time.perf_counter() - start
        result = await session.prompt_async("What is 1 + 2?")
        assert result.final_output == "The sum is 3.", result.final_output

    cpu, start = os.times(), time.perf_counter()
    await asyncio.gather(*(one(n) for n in range(args.sessions)))
    elapsed, used = time.perf_counter() - start, os.times()
    runtime.close()
    cpu_seconds = used.user + used.system - cpu.user - cpu.system
    print(
        f"{args.sessions} one-turn sessions in {elapsed:.2f} s: "
        f"{args.sessions / elapsed:.1f} sessions/s; creations {creating:.2f} s "
        f"({creating / args.sessions * 1000:.2f} ms each); CPU {cpu_seconds:.2f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--store", default=None)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--burst", action="store_true")
    parser.add_argument("--model-latency", type=float, default=1.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = args.store or f"sqlite:///{Path(tmp) / 'log.sqlite3'}"
        if args.burst:
            asyncio.run(burst(args, url))
        else:
            creations(args, url)


if __name__ == "__main__":
    main()
