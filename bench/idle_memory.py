"""Memory per idle session: 1,000 sessions open at once in one runtime.

Each session is created, runs one turn, and then sits idle with its actor
(and thread) live; the TurnActor a session keeps between turns is retired
after TURN_ACTOR_IDLE_SECONDS, and the figure is read once all are.
Printed: the process's resident memory before and after, and the growth
per idle session (budget: 64 KiB).

Run: python bench/idle_memory.py [--sessions 1000]
"""

from __future__ import annotations

import argparse
import gc
import tempfile
import time
from pathlib import Path

import pykka

from turnlog import Agent, Runtime, ScriptedModel
from turnlog.actors.turn_slot import TURN_ACTOR_IDLE_SECONDS


def rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    msg = "no VmRSS in /proc/self/status"
    raise RuntimeError(msg)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{Path(folder) / 'bench.sqlite3'}"
        with Runtime.open(url) as rt:
            warm = rt.create_session(Agent("a", model=ScriptedModel(["hi"])))
            warm.prompt("warm up", timeout=30)
            gc.collect()
            before = rss_kib()
            handles = []
            for n in range(args.sessions):
                agent = Agent("a", model=ScriptedModel([f"answer {n}"]))
                session = rt.create_session(agent, session_id=f"idle-{n}")
                session.prompt("hello", timeout=30)
                handles.append(session)
            # Idle means idle: a session retires its TurnActor (a thread) when
            # no turn follows within TURN_ACTOR_IDLE_SECONDS.
            deadline = time.monotonic() + TURN_ACTOR_IDLE_SECONDS + 10
            while pykka.ActorRegistry.get_by_class_name("TurnActor"):
                if time.monotonic() > deadline:
                    raise SystemExit("turn actors were not retired")
                time.sleep(0.1)
            gc.collect()
            after = rss_kib()
            live = rt.live_sessions()
    per_session = (after - before) / args.sessions
    print(f"{args.sessions} idle sessions, {live} session actors live")
    print(f"RSS before: {before} KiB, after: {after} KiB")
    print(f"growth per idle session: {per_session:.1f} KiB (budget 64 KiB)")


if __name__ == "__main__":
    main()
