"""Reopening a long session costs what its last context epoch costs, not more.

One session grows to 2,000 turns on the SQLite file store, compacting
(natively) about every 200 turns. At 200, 1,000 and 2,000 turns a fresh
process opens the runtime and the session and reads its messages; the
time from ``Runtime.open`` to the messages is printed (imports and
interpreter start excluded). Since the Session is snapshotted and only the
turns since the last compaction are read, the three figures should match.

Run: python bench/compaction.py [--turns 2000]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from turnlog import (
    Agent,
    Compaction,
    ModelRequest,
    ModelResponse,
    Runtime,
    ScriptedModel,
)
from turnlog.domain.ids import session_uuid
from turnlog.domain.streaming import DeltaSink, discard_deltas

CHECKPOINTS = (200, 1000, 2000)
# Each turn adds ~28 estimated tokens (a short question and answer); the
# threshold makes compaction come about every 200 turns.
THRESHOLD_TOKENS = 5_000

REOPEN = textwrap.dedent(
    """
    import sys, time
    from turnlog import Agent, Runtime, ScriptedModel
    started = time.perf_counter()
    with Runtime.open(sys.argv[1]) as rt:
        agent = Agent("bench", model=ScriptedModel())
        session = rt.create_session(agent, session_id="long")
        messages = session.messages()
        elapsed = time.perf_counter() - started
    print(f"{elapsed * 1e3:.1f} {len(messages)}")
    """
)


class NativeCompactor(ScriptedModel):
    """Answers every step; compacts to one opaque item."""

    def __init__(self) -> None:
        super().__init__()
        self.compactions = 0

    async def respond(
        self, request: ModelRequest, on_delta: DeltaSink = discard_deltas
    ) -> ModelResponse:
        self.requests.append(request)
        return ModelResponse(
            ({"type": "message", "role": "assistant", "content": "ok"},)
        )

    async def compact(self, request: ModelRequest) -> ModelResponse:
        self.compactions += 1
        item = {"type": "compaction", "encrypted_content": f"epoch {self.compactions}"}
        return ModelResponse((item,))


def reopen_ms(url: str, folder: str) -> tuple[float, int]:
    # cwd: not the checkout, whose turnlog/ folder would shadow the install.
    done = subprocess.run(
        [sys.executable, "-c", REOPEN, url],
        capture_output=True,
        text=True,
        check=False,
        cwd=folder,
    )
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    elapsed, messages = done.stdout.split()
    return float(elapsed), int(messages)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=2000)
    args = parser.parse_args()
    checkpoints = [n for n in CHECKPOINTS if n <= args.turns]
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{Path(folder) / 'bench.sqlite3'}"
        model = NativeCompactor()
        agent = Agent("bench", model=model, middleware=[Compaction(THRESHOLD_TOKENS)])
        done = 0
        print(
            "turns  compactions  turns since  events   reopen (fresh process)  messages"
        )
        for target in checkpoints:
            with Runtime.open(url) as rt:
                session = rt.create_session(agent, session_id="long")
                while done < target:
                    done += 1
                    session.prompt(f"question {done}", timeout=30)
                events = rt.store.max_position()
                state = rt.store.get(session_uuid("long"))
                compactions = state.compaction_count
                since = state.turn_count - state.context_start_turn + 1
            timings = [reopen_ms(url, folder) for _ in range(3)]
            best = min(t for t, _ in timings)
            print(
                f"{target:5d}  {compactions:11d}  {since:11d}  {events:6d}   "
                f"{best:8.1f} ms (best of 3)     {timings[0][1]:5d}"
            )


if __name__ == "__main__":
    main()
