"""What one hand-over between threads costs, by the means turnlog uses.

A turn hands work between threads seven times (``bench/actor_messages.py``
counts them): the caller to its session's actor, the actor to the I/O
loop for each model call and back, a tool's worker back to the actor,
the actor to the caller's future. Each costs a futex wake, a GIL
transfer and a context switch. This measures that cost alone, a
ping-pong of ``ROUNDS`` round trips for each means, so that what moving
sessions onto fewer threads could save is a number, not a guess.

Prints CPU time (every thread, ``time.process_time``) and wall time per
one-way hand-over, in microseconds.

Run: python bench/handover_cost.py [ROUNDS]
"""

from __future__ import annotations

import asyncio
import queue
import sys
import threading
import time
from collections.abc import Callable

import pykka


class Echo(pykka.ThreadingActor):
    """Answers each message (a queue) by putting into it."""

    def on_receive(self, message: object) -> None:
        assert isinstance(message, queue.SimpleQueue)
        message.put(1)


def per_handover(rounds: int, round_trip: Callable[[], object]) -> tuple[float, float]:
    """CPU and wall microseconds per one-way hand-over of ``round_trip``."""
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(rounds):
        round_trip()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return cpu / rounds / 2 * 1e6, wall / rounds / 2 * 1e6


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
    back: queue.SimpleQueue[int] = queue.SimpleQueue()
    results: dict[str, tuple[float, float]] = {}

    actor = Echo.start()

    def tell() -> int:
        actor.tell(back)
        return back.get()

    try:
        results["pykka tell (an actor's inbox)"] = per_handover(rounds, tell)
    finally:
        actor.stop()

    there: queue.SimpleQueue[int | None] = queue.SimpleQueue()

    def echo() -> None:
        while (item := there.get()) is not None:
            back.put(item)

    def put() -> int:
        there.put(1)
        return back.get()

    thread = threading.Thread(target=echo)
    thread.start()
    try:
        results["SimpleQueue (two bare threads)"] = per_handover(rounds, put)
    finally:
        there.put(None)
        thread.join()

    loop = asyncio.new_event_loop()
    runner = threading.Thread(target=loop.run_forever)
    runner.start()

    async def answer() -> None:
        back.put(1)

    try:
        results["call_soon_threadsafe (to an asyncio loop)"] = per_handover(
            rounds, lambda: (loop.call_soon_threadsafe(back.put, 1), back.get())
        )
        results["run_coroutine_threadsafe (a task on the loop)"] = per_handover(
            rounds,
            lambda: (asyncio.run_coroutine_threadsafe(answer(), loop), back.get()),
        )
    finally:
        loop.call_soon_threadsafe(loop.stop)
        runner.join()
        loop.close()

    print(f"{rounds} round trips each; microseconds per one-way hand-over")
    for means, (cpu, wall) in results.items():
        print(f"  {means:48} CPU {cpu:6.1f}  wall {wall:6.1f}")


if __name__ == "__main__":
    main()
