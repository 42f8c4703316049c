"""Several processes on one PostgreSQL: throughput, and failover after SIGKILL.

400 sessions of 5 turns (a tool call that is not idempotent, then an
answer) run on one PostgreSQL schema, first in 1 process, then split over
2. Each process creates its sessions with ``create_session_async``, as an
asyncio service would (their commits shared), and runs them all at once.
Printed: sessions per second for each. Then 2 processes again, and one
is SIGKILLed mid-run: the survivor takes each of its sessions over and
finishes them. Printed: the failover time (from the kill until the
survivor holds the first, and the last, of the dead process's sessions),
and the checks: every session has its 5 completed turns, no tool call ran
twice, ``turnlog audit --verify --all`` is clean.

Each throughput is followed by the CPU a session took: the workers',
PostgreSQL's server's and the rest of the machine's (bench/machine_cpu.py),
and the sessions/s the machine's cores would allow at that CPU a session.

``--sqlite`` first runs one process on an SQLite file (the same workload,
for the budget that PostgreSQL be at least as fast as SQLite).

``--pin`` keeps each worker process on a core of its own (the one
process on the first core, two on the first two), as a deployment that
runs a process per core would: a CPython process runs Python on one core
at a time, and its threads hand each turn's work to each other; left
free, the kernel spreads them over the cores, which cost one process
27% of its throughput here and two 40% (the medians of eight pairs,
bench/RESULTS.md). One process gains about as much as two, so the ratio
of two over one moves little.

``--rounds N`` runs the throughputs N times in turn and prints the median
of each ratio over the rounds, each ratio taken within its round: one
process's throughput moves by a third from run to run on a shared
machine, and a ratio of two runs far apart carries all of that.

Run: python bench/cluster.py [--sessions 400] [--turns 5] [--no-failover]
     [--sqlite] [--rounds N] [--pin]
     (TURNLOG_BENCH_POSTGRES_URL, default postgresql://postgres@127.0.0.1:5432/test)
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import queue
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import psycopg
from machine_cpu import CpuSnapshot  # type: ignore[import-not-found]
from psycopg import sql

from turnlog import (
    Agent,
    Runtime,
    ScriptedModel,
    ToolContext,
    calls,
    function_tool,
    tool_call,
)
from turnlog.domain.protocol import TurnCompletedMsg

WAIT = 600.0
LEDGER = Path(os.devnull)
"""Where ``charge`` notes each call it runs (set in each worker)."""


@function_tool
def charge(amount: int, context: ToolContext) -> str:
    """Charges an amount: not safe to run twice."""
    fd = os.open(LEDGER, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, f"{context.session_id} {context.call_id}\n".encode())
    finally:
        os.close(fd)
    return f"charged {amount}"


# -- a worker process ----------------------------------------------------------


def worker(url: str, ledger: str, core: int | None) -> None:
    """Runs ``run|resume S1,S2,... TURNS`` from stdin; prints TAKEN/DONE."""
    if core is not None:
        # Before any thread starts: each thread inherits its creator's cores.
        os.sched_setaffinity(0, {core})
    global LEDGER  # noqa: PLW0603 - the tool is module level (type hints)
    LEDGER = Path(ledger)
    lock = threading.Lock()

    def say(line: str) -> None:
        with lock:
            print(line, flush=True)

    async def run(rt: Runtime, session_id: str, turns: int, resume: bool) -> None:
        model = ScriptedModel()
        for _ in range(turns + 1):
            model.add(calls(tool_call("charge", {"amount": 5})), "charged")
        agent = Agent("cashier", model=model, tools=[charge])
        session = await rt.create_session_async(agent, session_id=session_id)
        say(f"TAKEN {session_id}")
        done = 0
        if resume:
            events = await asyncio.to_thread(rt.replay_events, session_id)
            done = sum(isinstance(e.msg, TurnCompletedMsg) for e in events)
        while done < turns:
            result = await session.prompt_async(f"charge me ({done})")
            done += result.status == "completed"
        say(f"DONE {session_id}")

    async def guarded(rt: Runtime, session_id: str, turns: int, resume: bool) -> None:
        try:
            await run(rt, session_id, turns, resume)
        except Exception as error:  # noqa: BLE001 - reported to the parent
            say(f"ERROR {session_id} {error!r}")

    async def serve(rt: Runtime) -> None:
        tasks = set()
        lines: asyncio.Queue[str] = asyncio.Queue()
        loop = asyncio.get_running_loop()
        threading.Thread(
            target=lambda: (
                [loop.call_soon_threadsafe(lines.put_nowait, x) for x in sys.stdin]
                + [loop.call_soon_threadsafe(lines.put_nowait, "exit")]
            ),
            daemon=True,
        ).start()
        say("READY")
        while (line := await lines.get()).strip() != "exit":
            command, ids, turns = line.split()
            for session_id in ids.split(","):
                task = asyncio.create_task(
                    guarded(rt, session_id, int(turns), command == "resume")
                )
                tasks.add(task)
                task.add_done_callback(tasks.discard)

    with Runtime.open(url) as rt:
        asyncio.run(serve(rt))


# -- the parent ---------------------------------------------------------------


class Worker:
    def __init__(self, url: str, ledger: Path, core: int | None = None) -> None:
        pinned = [] if core is None else [str(core)]
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--worker", url, str(ledger), *pinned],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[tuple[float, str]] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        assert self.next()[1] == "READY"

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put((time.perf_counter(), line.strip()))

    def next(self) -> tuple[float, str]:
        at, line = self.lines.get(timeout=WAIT)
        if line.startswith("ERROR"):
            raise SystemExit(line)
        return at, line

    def send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def close(self) -> None:
        if self.process.poll() is None:
            self.send("exit")
            self.process.wait(timeout=WAIT)


def fresh_schema(base: str) -> str:
    return f"{base}?schema=bench_{uuid.uuid4().hex[:10]}"


def drop(url: str) -> None:
    base, _, query = url.partition("?schema=")
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(query))
        )


def prepare(url: str) -> None:
    # Tables made once, before the workers start (concurrent CREATEs race).
    Runtime.open(url).close()


def throughput(
    base: str,
    processes: int,
    sessions: int,
    turns: int,
    ledger: Path,
    *,
    pin: bool = False,
) -> float:
    """Sessions/s of ``processes`` workers on a fresh schema of ``base``, or
    on a fresh file where ``base`` is an SQLite URL ending in a folder;
    with ``pin``, each worker on a core of its own."""
    sqlite = base.startswith("sqlite:///")
    url = f"{base}/{uuid.uuid4().hex[:10]}.sqlite3" if sqlite else fresh_schema(base)
    prepare(url)
    cores = sorted(os.sched_getaffinity(0))
    workers = [
        Worker(url, ledger, cores[n % len(cores)] if pin else None)
        for n in range(processes)
    ]
    pids = [w.process.pid for w in workers]
    ids = [f"s{n}" for n in range(sessions)]
    before = CpuSnapshot.take(pids)
    started = time.perf_counter()
    for index, w in enumerate(workers):
        w.send(f"run {','.join(ids[index::processes])} {turns}")
    for index, w in enumerate(workers):
        left = len(ids[index::processes])
        while left:
            left -= w.next()[1].startswith("DONE")
    elapsed = time.perf_counter() - started
    used = CpuSnapshot.take(pids) - before
    for w in workers:
        w.close()
    if not sqlite:
        drop(url)
    print_cpu(processes, used, sessions, elapsed)
    return sessions / elapsed


def print_cpu(processes: int, used: CpuSnapshot, sessions: int, elapsed: float) -> None:
    """What the run's CPU says about how fast this machine could run it.

    Each worker is held to about one core by its GIL; the machine's cores
    are shared with PostgreSQL's server and everything else. So the
    sessions/s any number of workers could reach here is at most the cores
    over the machine's CPU a session (if that CPU a session stayed as it
    was in this run).
    """
    cores = os.cpu_count() or 1
    others = used.machine - used.own - used.postgres
    ms = 1e3 / sessions
    print(
        f"  {processes} process(es), CPU a session: turnlog {used.own * ms:.2f} ms, "
        f"PostgreSQL {used.postgres * ms:.2f} ms, the rest {others * ms:.2f} ms; "
        f"machine busy {used.machine / elapsed / cores:.0%} of {cores} cores; "
        f"the cores allow at most {cores * sessions / used.machine:.1f} sessions/s",
        flush=True,
    )


def failover(base: str, sessions: int, turns: int, ledger: Path) -> None:
    url = fresh_schema(base)
    prepare(url)
    doomed, survivor = Worker(url, ledger), Worker(url, ledger)
    ids = [f"s{n}" for n in range(sessions)]
    mine, theirs = ids[0::2], ids[1::2]
    doomed.send(f"run {','.join(mine)} {turns}")
    survivor.send(f"run {','.join(theirs)} {turns}")
    finished: set[str] = set()
    while len(finished) < len(mine) // 3:  # kill it a third of the way in
        line = doomed.next()[1]
        if line.startswith("DONE"):
            finished.add(line.split()[1])
    doomed.process.send_signal(signal.SIGKILL)
    killed = time.perf_counter()
    doomed.process.wait()
    while not doomed.lines.empty():
        line = doomed.lines.get()[1]
        if line.startswith("DONE"):
            finished.add(line.split()[1])
    orphans = [s for s in mine if s not in finished]
    survivor.send(f"resume {','.join(orphans)} {turns}")
    taken: list[float] = []
    done = 0
    while done < len(orphans) + len(theirs):
        at, line = survivor.next()
        if line.startswith("TAKEN") and line.split()[1] in orphans:
            taken.append(at - killed)
        done += line.startswith("DONE")
    completed_at = time.perf_counter() - killed
    survivor.close()
    check(url, ids, turns, ledger)
    print(
        f"failover: {len(orphans)} sessions of the killed process taken over; "
        f"first in {taken[0] * 1000:.0f} ms, last in {taken[-1] * 1000:.0f} ms, "
        f"all complete {completed_at:.1f} s after the kill"
    )
    drop(url)


def check(url: str, ids: list[str], turns: int, ledger: Path) -> None:
    ran = collections.Counter(
        line.split()[1] for line in ledger.read_text().splitlines()
    )
    twice = [call for call, count in ran.items() if count > 1]
    with Runtime.open(url) as rt:
        short = [
            s
            for s in ids
            if sum(isinstance(e.msg, TurnCompletedMsg) for e in rt.replay_events(s))
            != turns
        ]
    audit = subprocess.run(
        [
            str(Path(sys.executable).with_name("turnlog")),
            "--store",
            url,
            "audit",
            "--verify",
            "--all",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    print(
        f"checks: sessions short of {turns} turns: {len(short)}; tool calls run twice: "
        f"{len(twice)}; audit --verify --all exit {audit.returncode}"
    )
    if short or twice or audit.returncode:
        print(audit.stdout[-2000:], audit.stderr[-2000:])
        raise SystemExit(1)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(
            sys.argv[2], sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else None
        )
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=400)
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument(
        "--no-failover", action="store_true", help="the throughputs only"
    )
    parser.add_argument(
        "--sqlite",
        action="store_true",
        help="first one process on an SQLite file, for PostgreSQL's budget",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="the throughputs this many times; the median of each ratio",
    )
    parser.add_argument(
        "--pin", action="store_true", help="each worker process on a core of its own"
    )
    args = parser.parse_args()
    base = os.environ.get(
        "TURNLOG_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
    )
    ratios: dict[str, list[float]] = collections.defaultdict(list)
    with tempfile.TemporaryDirectory() as tmp:
        for number in range(args.rounds):
            if args.rounds > 1:
                print(f"round {number + 1} of {args.rounds}", flush=True)
            folder = Path(tmp) / str(number)
            folder.mkdir()
            for name, ratio in throughputs(base, folder, args).items():
                ratios[name].append(ratio)
        if args.rounds > 1:
            for name, values in ratios.items():
                listed = ", ".join(f"{value:.2f}" for value in values)
                print(f"{name}: median {statistics.median(values):.2f} ({listed})")
        if not args.no_failover:
            failover(base, args.sessions, args.turns, Path(tmp) / "ledger-failover")


def throughputs(base: str, folder: Path, args: argparse.Namespace) -> dict[str, float]:
    """One round of the throughputs, printed; the ratios the budgets ask of."""
    ratios = {}
    if args.sqlite:
        ledger = folder / "ledger-sqlite"
        sqlite = throughput(
            f"sqlite:///{folder}", 1, args.sessions, args.turns, ledger, pin=args.pin
        )
        print(f"1 process on an SQLite file: {sqlite:.1f} sessions/s", flush=True)
    rates = {}
    for processes in (1, 2):
        ledger = folder / f"ledger-{processes}"
        rates[processes] = throughput(
            base, processes, args.sessions, args.turns, ledger, pin=args.pin
        )
        print(f"{processes} process(es): {rates[processes]:.1f} sessions/s", flush=True)
    if args.sqlite:
        ratios["PostgreSQL / SQLite, one process each"] = rates[1] / sqlite
        print(f"PostgreSQL / SQLite: {rates[1] / sqlite:.2f}x")
    ratios["2 processes / 1 process"] = rates[2] / rates[1]
    print(f"2 processes / 1 process: {rates[2] / rates[1]:.2f}x", flush=True)
    return ratios


if __name__ == "__main__":
    main()
