"""Memory per idle session: 1,000 sessions open at once in one runtime.

Each session is created, runs one turn, and then sits idle with its actor
(and thread) live. Printed: the process's resident memory before and
after, and the growth per idle session (budget: 64 KiB).

Run: python bench/idle_memory.py [--sessions 1000]
"""

from __future__ import annotations

import argparse
import gc
import tempfile
from pathlib import Path

from turnlog import Agent, Runtime, ScriptedModel


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
            gc.collect()
            after = rss_kib()
            live = rt.live_sessions()
    per_session = (after - before) / args.sessions
    print(f"{args.sessions} idle sessions, {live} session actors live")
    print(f"RSS before: {before} KiB, after: {after} KiB")
    print(f"growth per idle session: {per_session:.1f} KiB (budget 64 KiB)")


if __name__ == "__main__":
    main()
