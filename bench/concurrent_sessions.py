"""Many sessions in one runtime at once, and what one stuck session costs them.

200 sessions run concurrently in one runtime on the SQLite file store;
each runs 5 turns of one tool call and an answer. Printed: sessions per
second and the p50/p99 latency of a turn. Then the same load runs beside
one session stuck in a slow tool and one waiting on an approval nobody
gives: the others' p50 should move by less than 20% (a session never waits
for another; they share only the store's single writer). The two loads
alternate (A, B, A, B) so drift on a shared machine shows up as spread.

Run: python bench/concurrent_sessions.py [--sessions 200] [--turns 5]
[--store URL] (default: a fresh SQLite file in a temporary folder; a
``postgresql://`` URL should name an empty schema, e.g. ``?schema=bench1``)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import tempfile
import threading
import time
from pathlib import Path

from turnlog import (
    Agent,
    AgentSession,
    Runtime,
    ScriptedModel,
    SessionClosedError,
    calls,
    function_tool,
    tool_call,
)

release = threading.Event()


@function_tool
def lookup(key: str) -> str:
    """Returns the key, upper-cased."""
    return key.upper()


@function_tool
def stuck() -> str:
    """Blocks until the benchmark ends."""
    release.wait()
    return "released"


@function_tool(needs_approval=True)
def guarded() -> str:
    """Needs an approval that never comes."""
    return "never"


def agent_for(turns: int) -> Agent:
    model = ScriptedModel()
    for turn in range(turns):
        model.add(calls(tool_call("lookup", {"key": f"k{turn}"})), f"answer {turn}")
    return Agent("bench", model=model, tools=[lookup])


async def run_session(rt: Runtime, session_id: str, turns: int) -> list[float]:
    session = rt.create_session(agent_for(turns), session_id=session_id)
    latencies = []
    for turn in range(turns):
        started = time.perf_counter()
        result = await session.prompt_async(f"question {turn}")
        latencies.append(time.perf_counter() - started)
        assert result.final_output == f"answer {turn}", result
    return latencies


async def load(
    rt: Runtime, label: str, sessions: int, turns: int
) -> tuple[float, list[float]]:
    started = time.perf_counter()
    per_session = await asyncio.gather(
        *(run_session(rt, f"{label}-{n}", turns) for n in range(sessions))
    )
    elapsed = time.perf_counter() - started
    return elapsed, [latency for latencies in per_session for latency in latencies]


def block_two_sessions(rt: Runtime, label: str) -> None:
    """One session stuck in a tool, one waiting for an approval."""
    slow = Agent(
        "slow", model=ScriptedModel([calls(tool_call("stuck"))]), tools=[stuck]
    )
    waiting = Agent(
        "waiting", model=ScriptedModel([calls(tool_call("guarded"))]), tools=[guarded]
    )
    for agent, name in ((slow, "stuck"), (waiting, "approval")):
        session = rt.create_session(agent, session_id=f"{label}-{name}")
        threading.Thread(target=prompt_quietly, args=(session,), daemon=True).start()


def prompt_quietly(session: AgentSession) -> None:
    # The runtime closes under this prompt at the end of the benchmark.
    with contextlib.suppress(SessionClosedError):
        session.prompt("block")


def report(label: str, sessions: int, elapsed: float, latencies: list[float]) -> float:
    p50 = statistics.median(latencies) * 1e3
    p99 = statistics.quantiles(latencies, n=100)[-1] * 1e3
    print(
        f"{label:<28} {sessions / elapsed:7.1f} sessions/s   "
        f"turn p50 {p50:6.1f} ms   p99 {p99:6.1f} ms"
    )
    return p50


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument(
        "--store", help="store URL (default: a new SQLite file in a temporary folder)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        url = args.store or f"sqlite:///{Path(folder) / 'bench.sqlite3'}"
        kind = "SQLite file" if url.startswith("sqlite") else url.split(":", 1)[0]
        with Runtime.open(url) as rt:
            print(f"{args.sessions} sessions x {args.turns} turns, {kind} store")
            medians: dict[str, list[float]] = {"alone": [], "beside": []}
            for round_ in range(2):
                elapsed, latencies = asyncio.run(
                    load(rt, f"a{round_}", args.sessions, args.turns)
                )
                medians["alone"].append(
                    report(
                        f"round {round_ + 1}, alone", args.sessions, elapsed, latencies
                    )
                )
                block_two_sessions(rt, f"b{round_}")
                elapsed, latencies = asyncio.run(
                    load(rt, f"b{round_}", args.sessions, args.turns)
                )
                medians["beside"].append(
                    report(
                        f"round {round_ + 1}, beside 2 stuck",
                        args.sessions,
                        elapsed,
                        latencies,
                    )
                )
            release.set()
            alone = statistics.fmean(medians["alone"])
            beside = statistics.fmean(medians["beside"])
            print(f"p50 beside stuck sessions / p50 alone: {beside / alone:.2f}")


if __name__ == "__main__":
    main()
