"""Offline rebuild of every view, against the raw rate of reading the log.

Builds a log of ``--events`` events (default 200,000) across many sessions,
written through ``Store.save`` with Session and Turn aggregates directly
(running that many actor turns one by one would take far longer than the
measurement). Each turn is the runtime's tool-call turn, 12 events: its
input and first step; the step's output, usage and tool start; the tool's
output and the second step; the answer, usage and turn end. Sessions run
``--concurrent`` at a time, interleaved step by step as a busy runtime
interleaves them. On SQLite each step is one save, as the runtime saves
it; on PostgreSQL each turn is one save (one commit per step would make
building the log the slowest part of the run by far).

Then, on a fresh Store over the same log, it times:

- the raw read: paging through ``store.notifications(start, 1000)`` and
  ``store.decode`` of each entry, nothing else;
- ``turnlog.projections.rebuild.rebuild(store)``: the four views (checkpoints,
  transcript, executions, sessions), folded from one pass over the log
  and swapped in (each run rebuilds them all again from the log);
- ``turnlog.store.verify.verify_all(store)``: every session's hash chain.

``--runs`` raw passes and rebuilds take turns (one more raw pass closes),
and each is judged by its best run: on a shared machine the best run is
the one least slowed by others.

``--profile LINES`` rebuilds once more under cProfile and prints where the
time went.

Budget: the rebuild of all views, in log events per second, runs at no
less than 50% of the raw read rate. The rate counted per view (4 folds a
log event) is printed too, marked as not the budget.

Run: python bench/rebuild.py [--events 200000] [--backend sqlite|postgres|both]
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import os
import pstats
import shlex
import sqlite3
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from turnlog.domain.model import assistant_message, function_call
from turnlog.domain.session import Session
from turnlog.domain.turn import Turn
from turnlog.projections.rebuild import ViewReport, rebuild
from turnlog.store.log import Store
from turnlog.store.verify import verify_all

EVENTS_PER_TURN = 12
BUDGET = 0.5
"""A view's rebuild pass must run at this fraction of the raw read rate."""
DEFAULT_POSTGRES = "postgresql://postgres@127.0.0.1:5432/test"
ROUTE = "default"
USAGE = {"input_tokens": 812, "output_tokens": 64, "total_tokens": 876}
DIAGNOSTICS = {
    "route": ROUTE,
    "prompt_cache": {"context_epoch": 0, "outcome": "append", "rewrite_reasons": []},
}
# Payloads of a plausible size: a rebuild moves the stored bytes, so empty
# events would flatter it.
PROMPT = "Please look up the delivery status of order {} and summarise it for me."
ANSWER = (
    "Order {} left the warehouse on Tuesday and is with the carrier; the "
    "tracking page expects delivery within two working days. Nothing is "
    "needed from you for now; I will tell you if the estimate changes."
)
TOOL_OUTPUT = (
    '{{"order": "{}", "status": "in_transit", "carrier": "DHL", "eta_days": 2}}'
)


# -- building the log ---------------------------------------------------------


class _LiveSession:
    """One session being written: its aggregates and the turn in progress."""

    def __init__(self, session_id: str, turns: int) -> None:
        self.session = Session.create(
            session_id,
            agent_name="bench",
            agent_digest="0" * 64,
            shared_state={"todo_list": []},
            model_route=ROUTE,
        )
        self.turns = turns
        self.turn: Turn | None = None
        self.call_id = ""

    def steps(self, number: int) -> list[Callable[[], list[Any]]]:
        """Turn ``number`` as the runtime decides it: four steps, in order.

        Each step returns the aggregates to save together.
        """
        session = self.session
        sid = session.session_id
        order = f"{sid}-{number}"

        def begin() -> list[Any]:
            submission = uuid.uuid4().hex
            session.start_turn(submission)
            self.turn = Turn.open(sid, number, submission)
            self.turn.accept_input(submission, "prompt", PROMPT.format(order))
            self.turn.start_step(ROUTE)
            return [session, self.turn]

        def call_tool() -> list[Any]:
            assert self.turn is not None
            self.call_id = f"call_{uuid.uuid4().hex[:12]}"
            arguments = f'{{"order": "{order}"}}'
            item = function_call(self.call_id, "lookup_order", arguments)
            self.turn.complete_step(1, [item], USAGE, DIAGNOSTICS)
            session.record_usage(number, 1, ROUTE, USAGE)
            self.turn.start_tool_call(self.call_id, "lookup_order", arguments)
            return [session, self.turn]

        def tool_done() -> list[Any]:
            assert self.turn is not None
            output = TOOL_OUTPUT.format(order)
            self.turn.finish_tool_call(self.call_id, output, is_error=False)
            self.turn.start_step(ROUTE)
            return [session, self.turn]

        def answer() -> list[Any]:
            assert self.turn is not None
            text = ANSWER.format(order)
            self.turn.complete_step(2, [assistant_message(text)], USAGE, DIAGNOSTICS)
            session.record_usage(number, 2, ROUTE, USAGE)
            session.complete_turn(number, text)
            return [session, self.turn]

        return [begin, call_tool, tool_done, answer]


def turns_per_session(events: int, sessions: int) -> list[int]:
    """How many turns each session gets so the log holds about ``events``."""
    total = max(sessions, round((events - sessions) / EVENTS_PER_TURN))
    share, extra = divmod(total, sessions)
    return [share + (index < extra) for index in range(sessions)]


def build_log(
    store: Store, events: int, sessions: int, concurrent: int, *, per_turn: bool
) -> int:
    """Writes the log; returns the number of saves (commits)."""
    plan = turns_per_session(events, sessions)
    saves = 0
    for first in range(0, sessions, concurrent):
        wave = [
            _LiveSession(f"bench-{index:06d}", plan[index])
            for index in range(first, min(first + concurrent, sessions))
        ]
        for live in wave:
            store.save(live.session)
            saves += 1
        for number in range(1, max(live.turns for live in wave) + 1):
            running = [live for live in wave if live.turns >= number]
            turns = [live.steps(number) for live in running]
            if per_turn:
                for steps in turns:
                    aggregates: list[Any] = []
                    for step in steps:
                        aggregates = step()
                    store.save(*aggregates)
                    saves += 1
                continue
            for index in range(4):
                for steps in turns:
                    store.save(*steps[index]())
                    saves += 1
    return saves


# -- measuring ------------------------------------------------------------------


def raw_read(store: Store) -> tuple[int, float]:
    """(entries, seconds) of one pass reading and decoding the whole log."""
    started = time.perf_counter()
    count, start = 0, 1
    while True:
        batch = store.notifications(start, 1000)
        if not batch:
            break
        for notification in batch:
            store.decode(notification)
        count += len(batch)
        start = batch[-1].id + 1
    return count, time.perf_counter() - started


def timed(work: Callable[[], Any]) -> tuple[Any, float]:
    """``work()``'s result and the seconds it took."""
    started = time.perf_counter()
    result = work()
    return result, time.perf_counter() - started


def profiled(work: Callable[[], Any], lines: int) -> str:
    """The top ``lines`` functions of ``work()`` by cumulative and own time."""
    profile = cProfile.Profile()
    profile.runcall(work)
    out = io.StringIO()
    stats = pstats.Stats(profile, stream=out)
    stats.sort_stats("cumulative").print_stats(lines)
    stats.sort_stats("tottime").print_stats(lines)
    return out.getvalue()


class Measured:
    """Everything one backend's run measured."""

    def __init__(self) -> None:
        self.events = 0
        self.sessions = 0
        self.saves = 0
        self.per_turn = False
        self.build_seconds = 0.0
        self.raw_rates: list[float] = []
        self.reports: list[ViewReport] = []
        self.rebuild_seconds: list[float] = []
        self.verify_events = 0
        self.verify_seconds = 0.0
        self.verify_ok = False
        self.profile = ""


def measure(url: str, args: argparse.Namespace, *, per_turn: bool) -> Measured:
    """Builds the log at ``url`` and measures reading, rebuilding, verifying."""
    out = Measured()
    out.per_turn = per_turn
    store = Store(url)
    try:
        sessions = args.sessions or max(1, args.events // 200)
        out.saves, out.build_seconds = timed(
            lambda: build_log(
                store, args.events, sessions, args.concurrent, per_turn=per_turn
            )
        )
        out.sessions = sessions
    finally:
        store.close()
    # A fresh Store, as an offline `turnlog rebuild` would open the log.
    store = Store(url)
    try:
        out.events = store.max_position()
        # Raw passes and rebuilds take turns, so a machine that gets busier
        # for a while slows both; each is judged by its best run.
        for _ in range(args.runs):
            count, seconds = raw_read(store)
            assert count == out.events, (count, out.events)
            out.raw_rates.append(count / seconds)
            out.reports, seconds = timed(lambda: rebuild(store))
            out.rebuild_seconds.append(seconds)
        count, seconds = raw_read(store)
        out.raw_rates.append(count / seconds)
        verdicts, out.verify_seconds = timed(lambda: verify_all(store))
        out.verify_events = sum(report.events for report in verdicts)
        out.verify_ok = all(report.ok for report in verdicts)
        if args.profile:
            out.profile = profiled(lambda: rebuild(store), args.profile)
    finally:
        store.close()
    return out


# -- reporting -----------------------------------------------------------------


def report(backend: str, m: Measured) -> bool:
    """Prints one backend's figures; returns whether the budget is met."""
    raw = max(m.raw_rates)
    print(f"\n== {backend} ==")
    print(
        f"log: {m.events:,} events, {m.sessions:,} sessions, {m.saves:,} saves "
        f"(one a {'turn' if m.per_turn else 'step'}), "
        f"built in {m.build_seconds:.1f} s ({m.events / m.build_seconds:,.0f} ev/s)"
    )
    rates = ", ".join(f"{rate:,.0f}" for rate in m.raw_rates)
    print(f"raw read + decode: best {raw:,.0f} ev/s (passes: {rates})")
    # rebuild() folds every view from one read of the log, so its rate is
    # log events per second of the whole rebuild, swaps included: the
    # figure the budget compares with one raw read pass.
    best = min(m.rebuild_seconds)
    rate = m.events / best
    met = rate >= BUDGET * raw
    views = ", ".join(view.view for view in m.reports)
    runs = ", ".join(f"{seconds:.2f}" for seconds in m.rebuild_seconds)
    print(
        f"  rebuild of all views ({views}) in one pass: best {best:.2f} s "
        f"(runs: {runs}) = {rate:,.0f} log events/s = {rate / raw:.1%} of raw "
        f"{'ok' if met else 'BELOW BUDGET'}"
    )
    print(
        f"  (not the budget) counted per view: {rate * len(m.reports):,.0f} "
        f"events folded/s = {rate * len(m.reports) / raw:.0%} of raw"
    )
    print(
        f"verify_all: {m.verify_events:,} events in {m.verify_seconds:.2f} s = "
        f"{m.verify_events / m.verify_seconds:,.0f} ev/s "
        f"({'all chains hold' if m.verify_ok else 'BROKEN CHAINS'})"
    )
    print(
        f"budget (the rebuild of all views >= {BUDGET:.0%} of the raw read rate): "
        f"{'met' if met else 'NOT met'}"
    )
    if m.profile:
        print(m.profile)
    return met


@contextlib.contextmanager
def sqlite_url() -> Iterator[str]:
    """A store URL of a new SQLite file, removed afterwards."""
    with tempfile.TemporaryDirectory() as folder:
        yield f"sqlite:///{Path(folder) / 'bench.sqlite3'}"


@contextlib.contextmanager
def postgres_url(base: str) -> Iterator[str]:
    """A store URL of a new PostgreSQL schema, dropped afterwards."""
    import psycopg
    from psycopg import sql

    schema = f"bench_{uuid.uuid4().hex[:12]}"
    try:
        yield f"{base}?schema={schema}"
    finally:
        with psycopg.connect(base, autocommit=True) as connection:
            connection.execute(
                sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(
                    sql.Identifier(schema)
                )
            )


def main() -> None:
    """Parses the options, runs each backend, prints the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument(
        "--backend", choices=("sqlite", "postgres", "both"), default="both"
    )
    parser.add_argument(
        "--sessions", type=int, default=0, help="default: one per 200 events"
    )
    parser.add_argument(
        "--concurrent", type=int, default=50, help="sessions interleaved at a time"
    )
    parser.add_argument(
        "--runs", type=int, default=3, help="rebuilds (and raw passes) per backend"
    )
    parser.add_argument("--postgres-url", default=DEFAULT_POSTGRES)
    parser.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="LINES",
        help="rebuild once more under cProfile and print the top LINES functions",
    )
    args = parser.parse_args()
    print("command: python " + shlex.join(sys.argv))
    print(
        f"python {sys.version.split()[0]}, sqlite {sqlite3.sqlite_version}, "
        f"{os.cpu_count()} cores"
    )
    backends = ("sqlite", "postgres") if args.backend == "both" else (args.backend,)
    verdicts = []
    for backend in backends:
        if backend == "sqlite":
            with sqlite_url() as url:
                measured = measure(url, args, per_turn=False)
        else:
            with postgres_url(args.postgres_url) as url:
                measured = measure(url, args, per_turn=True)
        verdicts.append(report(backend, measured))
    print(f"\nbudget met on every backend run: {'yes' if all(verdicts) else 'no'}")


if __name__ == "__main__":
    main()
