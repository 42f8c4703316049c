"""Memory and threads per idle session: many sessions open at once in one runtime.

Each session is created, runs one turn, and is then left idle, its handle
kept (a turn's TurnActor has no thread and ends with its turn). With
``--idle-timeout`` the sessions passivate (their actors stop) after that
many seconds idle; the figure is then read once no session actor runs.
Printed: the process's resident memory before and after, the growth per
idle session, and the threads in the process.

Budget (issue 12): at 10,000 idle sessions, at most 16 KiB RSS per idle
session and at most 50 threads.

Run: python bench/idle_memory.py [--sessions 10000] [--idle-timeout 1]
"""

from __future__ import annotations

import argparse
import gc
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from turnlog import Agent, RunConfig, Runtime, ScriptedModel

try:
    from turnlog.actors.actor_pool import POOL
except ImportError:  # a build before the pool: a thread per session actor
    POOL = None


def rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    msg = "no VmRSS in /proc/self/status"
    raise RuntimeError(msg)


def wait_for(condition: Any, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"{what} within {seconds} s: no")
        time.sleep(0.1)


def timed_ms(call: Any) -> float:
    started = time.monotonic()
    call()
    return (time.monotonic() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument(
        "--idle-timeout",
        type=float,
        default=None,
        help="seconds before an idle session passivates (default: never)",
    )
    args = parser.parse_args()
    config: dict[str, Any] = {}
    if args.idle_timeout is not None:
        config["idle_timeout"] = args.idle_timeout
    else:
        config_fields = getattr(RunConfig, "model_fields", {})
        if "idle_timeout" in config_fields:
            config["idle_timeout"] = None  # the actors stay: the figure before
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{Path(folder) / 'bench.sqlite3'}"
        with Runtime.open(url, run_config=RunConfig(**config)) as rt:
            warm = rt.create_session(Agent("a", model=ScriptedModel(["hi"])))
            warm.prompt("warm up", timeout=30)
            gc.collect()
            before = rss_kib()
            threads_before = threading.active_count()
            handles = []
            started = time.monotonic()
            for n in range(args.sessions):
                agent = Agent("a", model=ScriptedModel([f"answer {n}", f"again {n}"]))
                session = rt.create_session(agent, session_id=f"idle-{n}")
                session.prompt("hello", timeout=30)
                handles.append(session)
            opened = time.monotonic() - started
            if args.idle_timeout is not None:
                wait_for(
                    lambda: rt.live_sessions() == 0,
                    args.idle_timeout + 120,
                    "every session passivated",
                )
            gc.collect()
            after = rss_kib()
            threads = threading.active_count()
            # Passivating ten thousand sessions at once is a burst of work
            # for the sessions' worker pool: its surplus workers end once
            # idle for a few seconds (actors.actor_pool); the spares stay.
            if POOL is not None:
                POOL.wait_for_workers(POOL.spare, POOL.surplus_seconds + 30)
            threads_settled = threading.active_count()
            live = rt.live_sessions()
            # What a revival costs: the first call on an idle session, then
            # the same call on the actor it started.
            first_ms = timed_ms(handles[1].messages)
            next_ms = timed_ms(handles[1].messages)
            revive_ms = timed_ms(lambda: handles[0].prompt("again", timeout=30))
            latest = handles[0].latest_run()
            assert latest is not None
            assert latest.status == "completed", latest
    per_session = (after - before) / args.sessions
    print(f"{args.sessions} idle sessions, {live} session actors live")
    print(f"opened and ran one turn each in {opened:.1f} s")
    print(f"RSS before: {before} KiB, after: {after} KiB")
    print(f"growth per idle session: {per_session:.1f} KiB (budget 16 KiB)")
    print(
        f"threads: {threads_before} before, {threads} after,"
        f" {threads_settled} once the pool's surplus ended (budget 50)"
    )
    print(f"messages() on an idle session: {first_ms:.2f} ms, again {next_ms:.2f} ms")
    print(f"a prompt (one turn) on an idle session: {revive_ms:.1f} ms")


if __name__ == "__main__":
    main()
