"""What a streamed answer's deltas cost a turn, beside the same stream's waits.

One session on memory://, a model that answers each turn with ``--deltas``
fragments, waiting ``--spacing`` seconds on the I/O loop before each (as
a provider reading a stream from the network does: a chunk a wake-up of
the loop). Three variants, each in a fresh process, alternating over
``--rounds``:

- ``waits``: the model waits as often but hands no fragment on: what the
  loop's wake-ups cost alone;
- ``deltas``: each fragment is handed on, and nobody is subscribed;
- ``subscribed``: the same, read by a subscriber on a thread of its own;
- ``thread-to-loop``: read on a thread of its own that hands each delta
  to an event loop on another thread (``call_soon_threadsafe``), as the
  service's delta pump did until the fifteenth pass;
- ``loop``: read by ``async for`` in a task on that event loop, as the
  service's pump does since (turnlog.service.delta_pumps).

Each fragment went to the session as a message (a TextDelta), waking its
worker to publish it; since the fourteenth pass the turn's DeltaGate
publishes it from the loop (actors/delta_gate.py).

Printed: CPU a turn (the whole process, ``time.process_time``) for each,
and what a delta adds over ``waits``. The peers' workload streams
nothing, so its figures leave this out.

Run: python bench/stream_deltas.py [--deltas 50] [--spacing 0.002]
     [--turns 60] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import threading
import time

from turnlog import Agent, ModelRequest, ModelResponse, Runtime, Subscription, reply
from turnlog.domain.streaming import DeltaSink

VARIANTS = ("waits", "deltas", "subscribed", "thread-to-loop", "loop")


class Streamer:
    """A model whose answer comes in ``fragments`` pieces, ``spacing`` apart."""

    def __init__(self, fragments: int, spacing: float, *, hand_on: bool) -> None:
        self.fragments, self.spacing, self.hand_on = fragments, spacing, hand_on

    async def respond(
        self, request: ModelRequest, on_delta: DeltaSink
    ) -> ModelResponse:
        for _ in range(self.fragments):
            await asyncio.sleep(self.spacing)
            if self.hand_on:
                on_delta("word ")
        return reply("word " * self.fragments)


def read_on_a_loop(subscription: Subscription, *, handed_on: bool) -> None:
    """Has an event loop on a thread of its own take every item read, read
    there (``async for``) or on another thread that hands each one on."""
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True).start()
    taken: list[object] = []
    if handed_on:

        def pump() -> None:
            for item in subscription:
                loop.call_soon_threadsafe(taken.append, item)

        threading.Thread(target=pump, daemon=True).start()
        return

    async def read() -> None:
        async for item in subscription:
            taken.append(item)  # noqa: PERF401 (one at a time, as a pump)

    asyncio.run_coroutine_threadsafe(read(), loop)


def child(variant: str, deltas: int, spacing: float, turns: int) -> None:
    """One variant's run; prints the CPU microseconds a turn."""
    model = Streamer(deltas, spacing, hand_on=variant != "waits")
    with Runtime.open("memory://") as rt:
        session = rt.create_session(Agent("streams", model=model))
        if variant == "subscribed":
            subscription = session.subscribe()
            threading.Thread(
                target=lambda: sum(1 for _ in subscription), daemon=True
            ).start()
        elif variant in ("thread-to-loop", "loop"):
            read_on_a_loop(session.subscribe(), handed_on=variant == "thread-to-loop")
        for turn in range(3):
            session.prompt(f"warm-up {turn}", timeout=60)
        cpu = time.process_time()
        for turn in range(turns):
            session.prompt(f"turn {turn}", timeout=60)
        print(f"{(time.process_time() - cpu) / turns * 1e6:.1f}")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--deltas", type=int, default=50)
    parser.add_argument("--spacing", type=float, default=0.002)
    parser.add_argument("--turns", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    cpu: dict[str, list[float]] = {variant: [] for variant in VARIANTS}
    for _ in range(args.rounds):
        for variant in VARIANTS:
            numbers = (str(args.deltas), str(args.spacing), str(args.turns))
            out = subprocess.run(
                [sys.executable, __file__, "--child", variant, *numbers],
                check=True,
                capture_output=True,
                text=True,
                timeout=600,
            )
            cpu[variant].append(float(out.stdout.split()[-1]))
    print(
        f"{args.deltas} fragments a turn, {args.spacing * 1000:g} ms apart,"
        f" {args.turns} turns, {args.rounds} rounds"
    )
    waits = statistics.median(cpu["waits"])
    for variant in VARIANTS:
        used = statistics.median(cpu[variant])
        spread = ", ".join(f"{value:.0f}" for value in cpu[variant])
        extra = (used - waits) / args.deltas
        added = f"; a delta adds {extra:.1f} us" if variant != "waits" else ""
        print(f"{variant}: CPU a turn median {used:.0f} us ({spread}){added}")


if __name__ == "__main__":
    main()
