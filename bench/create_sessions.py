"""How fast a runtime opens brand-new sessions, one after another.

``--sessions`` (default 1,000) ``Runtime.create_session`` calls, each of
a session id the log has never seen, made one at a time from one thread
on an SQLite file (or ``--store URL``): what a service does when many
sessions arrive at once. Printed: sessions/s and the mean time of one
creation. With ``--profile``, the cProfile of the loop (top 25 by
cumulative time).

Run: python bench/create_sessions.py [--sessions 1000] [--store URL] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import tempfile
import time
from pathlib import Path

from turnlog import Agent, ModelResponse, Runtime
from turnlog.store.log import Store


class _Model:
    """A model never called: only sessions are created here."""

    async def respond(self, request: object, on_delta: object = None) -> ModelResponse:
        raise NotImplementedError


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--store", default=None)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = args.store or f"sqlite:///{Path(tmp) / 'log.sqlite3'}"
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


if __name__ == "__main__":
    main()
