"""Sessions waiting on a model with a real provider's latency: bursts, arrivals.

Every model call answers after ``--latency`` seconds (default 1.0), streamed
as a real provider would (an asyncio sleep on turnlog's I/O loop, a few text
deltas on the way); each turn is one tool call and an answer, so two model
calls a turn. So what a service sees: most sessions waiting on a model at
any moment, each holding its actors while it waits.

Two modes:

- ``burst`` (default): ``--sessions`` sessions (default 2,000) created
  together (``create_session_async``), then all prompted at once
  (sessions/s counts from the prompts).
- ``arrivals``: a new session every ``1 / --rate`` seconds (default 200 a
  second) for ``--seconds`` (default 10), each created (with
  ``create_session_async``, as a service on asyncio would) and prompted
  as it arrives.

Printed: per-turn time minus model time (the turn's wall time minus the
time its two model calls took, as the model measured it) at p50/p99, and
for arrivals how long creating the session took before that;
sessions/s (all sessions over the wall time from the first start to the
last end); failures by type; peak RSS and peak thread count (sampled from
/proc/self/status); and whether any thread died (``threading.excepthook``)
or anything logged an error. With ``--gc-pauses``, each full collection of
the garbage collector (which stops every thread) with how long it took
and how many objects it walked, and the younger collections' count,
longest and sum. ``--service-collector`` sets the collector as ``turnlog
serve`` does (turnlog.collector): the start-up frozen, the young
generation widened; ``--freeze-startup`` does only the first, and
``--gc-threshold N`` sets the collector's first threshold before the
run.

Run: python bench/latency.py [--mode burst|arrivals] [--sessions 2000]
[--rate 200] [--seconds 10] [--latency 1.0] [--store URL] [--freeze-startup]
[--service-collector] [--gc-threshold N] [--gc-pauses]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import gc
import logging
import statistics
import tempfile
import threading
import time
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
from turnlog.collector import freeze_startup_objects, prepare_collector
from turnlog.domain.streaming import DeltaSink, discard_deltas

DELTAS = 4
"""Text fragments a model call streams, spread over its latency."""


@function_tool
def lookup(key: str) -> str:
    """Returns the key, upper-cased."""
    return key.upper()


class SlowModel:
    """A streaming model that answers after ``latency`` seconds.

    It records how long each call took, per session, so that the model's
    own time can be taken out of a turn's time.
    """

    def __init__(self, latency: float) -> None:
        self.latency = latency
        self.spent: collections.Counter[str] = collections.Counter()
        self.calls: dict[str, list[float]] = collections.defaultdict(list)
        """Per session: each call's start and end (perf_counter)."""
        self.phases: dict[str, tuple[float, float, float]] = {}
        """Per session: prompt to first call, between calls, last call to end."""
        self.creations: dict[str, float] = {}
        """Per session created as it arrived: how long its creation took."""

    async def respond(
        self, request: ModelRequest, on_delta: DeltaSink = discard_deltas
    ) -> ModelResponse:
        started = time.perf_counter()
        answered = request.items[-1].get("type") == "function_call_output"
        for n in range(DELTAS):
            await asyncio.sleep(self.latency / DELTAS)
            if answered:
                on_delta(f"part {n} ")
        ended = time.perf_counter()
        self.spent[request.session_id] += ended - started
        self.calls[request.session_id] += (started, ended)
        if answered:
            return reply("done", usage={"input_tokens": 10, "output_tokens": 5})
        return calls(tool_call("lookup", {"key": request.session_id}))


class Watch:
    """Peak RSS and thread count, dead threads and error logs, meanwhile."""

    def __init__(self) -> None:
        self.peak_rss_kib = 0
        self.peak_threads = 0
        self.dead_threads: list[str] = []
        self.errors_logged: collections.Counter[str] = collections.Counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._previous_hook = threading.excepthook

    def __enter__(self) -> Watch:
        threading.excepthook = self._thread_died
        logging.getLogger().addHandler(_ErrorCounter(self.errors_logged))
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        threading.excepthook = self._previous_hook

    def _thread_died(self, args: threading.ExceptHookArgs) -> None:
        name = args.thread.name if args.thread else "?"
        self.dead_threads.append(f"{name}: {args.exc_type.__name__}: {args.exc_value}")
        self._previous_hook(args)

    def _sample(self) -> None:
        while not self._stop.wait(0.05):
            status = Path("/proc/self/status").read_text()
            for line in status.splitlines():
                if line.startswith("VmRSS:"):
                    self.peak_rss_kib = max(self.peak_rss_kib, int(line.split()[1]))
                elif line.startswith("Threads:"):
                    self.peak_threads = max(self.peak_threads, int(line.split()[1]))


class _ErrorCounter(logging.Handler):
    def __init__(self, counts: collections.Counter[str]) -> None:
        super().__init__(logging.ERROR)
        self.counts = counts

    def emit(self, record: logging.LogRecord) -> None:
        self.counts[f"{record.name}: {record.getMessage()[:100]}"] += 1


async def one_session(
    rt: Runtime, agent: Agent, model: SlowModel, name: str, session: Any = None
) -> float:
    """Runs one turn (creating the session first unless given); returns the
    turn's time less the model's."""
    if session is None:
        arrived = time.perf_counter()
        session = await rt.create_session_async(agent, session_id=name)
        model.creations[name] = time.perf_counter() - arrived
    started = time.perf_counter()
    result = await session.prompt_async("go")
    elapsed = time.perf_counter() - started
    if result.final_output != "done":
        msg = f"{name}: unexpected answer {result.final_output!r}"
        raise AssertionError(msg)
    marks = model.calls[name]
    if len(marks) == 4:
        model.phases[name] = (
            marks[0] - started,
            marks[2] - marks[1],
            started + elapsed - marks[3],
        )
    return elapsed - model.spent[name]


async def create_all(rt: Runtime, agent: Agent, count: int) -> list:
    return await asyncio.gather(
        *(rt.create_session_async(agent, session_id=f"s{n}") for n in range(count))
    )


async def burst(rt: Runtime, agent: Agent, model: SlowModel, handles: list) -> list:
    return await asyncio.gather(
        *(
            one_session(rt, agent, model, f"s{n}", handle)
            for n, handle in enumerate(handles)
        ),
        return_exceptions=True,
    )


async def arrivals(
    rt: Runtime, agent: Agent, model: SlowModel, rate: float, seconds: float
) -> list:
    # Created as a service on asyncio creates them: create_session_async,
    # which keeps the loop free and shares commits between creations.
    tasks = []
    start = time.perf_counter()
    for n in range(int(rate * seconds)):
        due = start + n / rate
        delay = due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.ensure_future(one_session(rt, agent, model, f"a{n}")))
    return await asyncio.gather(*tasks, return_exceptions=True)


class Collections:
    """Times the collector's collections, each of which stops every thread.

    A full one also counts the objects it walked (counting adds a few ms
    before it, untimed); the younger ones are only timed, per generation.
    """

    def __init__(self) -> None:
        self.pauses: list[tuple[float, int]] = []
        self.younger: dict[int, list[float]] = {0: [], 1: []}
        self._started = 0.0
        self._objects = 0
        gc.callbacks.append(self._note)

    def _note(self, phase: str, info: dict[str, Any]) -> None:
        generation = info["generation"]
        if phase == "start":
            if generation == 2:
                self._objects = sum(len(gc.get_objects(g)) for g in range(3))
            self._started = time.perf_counter()
            return
        seconds = time.perf_counter() - self._started
        if generation == 2:
            self.pauses.append((seconds, self._objects))
        else:
            self.younger[generation].append(seconds)

    def close(self) -> None:
        gc.callbacks.remove(self._note)

    def describe(self) -> str:
        """Each full one as ``MILLISECONDS ms/THOUSANDS k`` objects, in order."""
        return (
            " ".join(f"{s * 1e3:.0f} ms/{n // 1000}k" for s, n in self.pauses) or "none"
        )

    def describe_younger(self) -> str:
        """How many of each younger generation, their longest and their sum."""
        parts = []
        for generation, pauses in self.younger.items():
            if pauses:
                parts.append(
                    f"generation {generation}: {len(pauses)},"
                    f" longest {max(pauses) * 1e3:.1f} ms,"
                    f" {sum(pauses) * 1e3:.0f} ms in all"
                )
        return "; ".join(parts) or "none"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mode", choices=("burst", "arrivals"), default="burst")
    parser.add_argument("--sessions", type=int, default=2000)
    parser.add_argument("--rate", type=float, default=200.0)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--latency", type=float, default=1.0)
    parser.add_argument(
        "--store", help="store URL (default: a new SQLite file in a temporary folder)"
    )
    parser.add_argument(
        "--gc-pauses",
        action="store_true",
        help="time every collection of the garbage collector, and count the "
        "objects each full one walked (counting adds a few ms to each, untimed)",
    )
    parser.add_argument(
        "--freeze-startup",
        action="store_true",
        help="freeze the start-up objects once the runtime is open, as "
        "`turnlog serve` does before it serves (see the README's Service section)",
    )
    parser.add_argument(
        "--service-collector",
        action="store_true",
        help="the collector as `turnlog serve` sets it before it serves: the "
        "start-up frozen and the young generation widened "
        "(turnlog.collector.prepare_collector)",
    )
    parser.add_argument(
        "--gc-threshold",
        type=int,
        help="the collector's first threshold (the objects allocated between "
        "young collections; Python's default is 700), set before the run",
    )
    args = parser.parse_args()
    if args.gc_threshold is not None:
        gc.set_threshold(args.gc_threshold, *gc.get_threshold()[1:])
    logging.basicConfig(level=logging.WARNING)
    model = SlowModel(args.latency)
    agent = Agent("bench", model=model, tools=[lookup])
    pauses = Collections() if args.gc_pauses else None
    with tempfile.TemporaryDirectory() as folder, Watch() as watch:
        url = args.store or f"sqlite:///{Path(folder) / 'bench.sqlite3'}"
        with Runtime.open(url) as rt:
            if args.service_collector:
                print(
                    f"froze {prepare_collector()} start-up objects, "
                    f"first threshold {gc.get_threshold()[0]}"
                )
            elif args.freeze_startup:
                print(f"froze {freeze_startup_objects()} start-up objects")
            if args.mode == "burst":
                # Created first, so that every prompt starts at once.
                created = time.perf_counter()
                handles = asyncio.run(create_all(rt, agent, args.sessions))
                print(
                    f"created {args.sessions} sessions in "
                    f"{time.perf_counter() - created:.1f} s"
                )
                label = f"{args.sessions} sessions prompted at once"
                started = time.perf_counter()
                outcomes = asyncio.run(burst(rt, agent, model, handles))
            else:
                started = time.perf_counter()
                label = f"{args.rate:g} sessions/s for {args.seconds:g} s"
                outcomes = asyncio.run(
                    arrivals(rt, agent, model, args.rate, args.seconds)
                )
            elapsed = time.perf_counter() - started
    report(label, args.latency, outcomes, elapsed, watch)
    if pauses is not None:
        pauses.close()
        print(f"  full collections: {pauses.describe()}")
        print(f"  younger collections: {pauses.describe_younger()}")
    if len(model.creations) >= 2:
        values = [seconds * 1e3 for seconds in model.creations.values()]
        print(
            f"  arrival to created (before the turn): "
            f"p50 {statistics.median(values):.0f} ms, "
            f"p99 {statistics.quantiles(values, n=100)[-1]:.0f} ms"
        )
    if model.phases:
        for n, part in enumerate(
            ("prompt to first model call", "first call to second", "second call to end")
        ):
            values = [phases[n] * 1e3 for phases in model.phases.values()]
            print(
                f"  {part}: p50 {statistics.median(values):.0f} ms, "
                f"p99 {statistics.quantiles(values, n=100)[-1]:.0f} ms"
            )


def report(
    label: str, latency: float, outcomes: list, elapsed: float, watch: Watch
) -> None:
    overheads = [o * 1e3 for o in outcomes if isinstance(o, float)]
    failures = collections.Counter(
        type(o).__name__ for o in outcomes if not isinstance(o, float)
    )
    print(f"{label}, model {latency:g} s a call, 2 calls and 1 tool a turn")
    print(f"  completed {len(overheads)} of {len(outcomes)} in {elapsed:.1f} s")
    print(f"  sessions/s {len(overheads) / elapsed:.1f}")
    if len(overheads) >= 2:
        p50 = statistics.median(overheads)
        p99 = statistics.quantiles(overheads, n=100)[-1]
        print(f"  turn time minus model time: p50 {p50:.0f} ms, p99 {p99:.0f} ms")
    print(f"  failures: {dict(failures) or 'none'}")
    for o in outcomes:
        if not isinstance(o, float):
            print(f"  first failure: {type(o).__name__}: {o}")
            break
    print(
        f"  peak RSS {watch.peak_rss_kib / 1024:.0f} MiB, "
        f"peak threads {watch.peak_threads}"
    )
    print(f"  dead threads: {watch.dead_threads or 'none'}")
    print(f"  errors logged: {dict(watch.errors_logged) or 'none'}")


if __name__ == "__main__":
    main()
