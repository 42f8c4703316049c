"""One process of a cluster on one PostgreSQL, for tests/scenarios/test_cluster.py.

Usage: python cluster_child.py STORE_URL LEDGER

Opens a runtime, prints READY, then runs one command per line of stdin,
each on a thread of its own (so the parent can SIGKILL it mid-command):

  run S1,S2,... TURNS [BLOCK_AT]
        runs each session (concurrently) until it has TURNS completed
        turns; each turn calls the tool ``charge`` (not idempotent), which
        appends its call id to LEDGER. With BLOCK_AT, the tool blocks for
        ever in the BLOCK_AT-th turn run here, after printing ``IN-TOOL S``.
        Prints ``DONE S`` per session.
  follow S TURNS
        prints ``FOLLOWING S``, follows S from the log until TURNS turns
        completed, then prints ``FOLLOWED S <json [[sequence, type], ...]>``.
  lead  prints ``LEADING`` once this process keeps the views current.
  exit  closes the runtime and exits 0.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

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

_print_lock = threading.Lock()
never = threading.Event()


def say(line: str) -> None:
    with _print_lock:
        print(line, flush=True)


def completed_turns(rt: Runtime, session_id: str) -> int:
    return sum(
        isinstance(event.msg, TurnCompletedMsg)
        for event in rt.replay_events(session_id)
    )


def run_session(
    rt: Runtime, ledger: str, session_id: str, turns: int, block_at: int | None
) -> None:
    ran = 0

    @function_tool
    def charge(amount: int, context: ToolContext) -> str:
        """Charges an amount: not safe to run twice."""
        if block_at is not None and ran == block_at:
            say(f"IN-TOOL {session_id}")
            never.wait()
        fd = os.open(ledger, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(fd, f"{session_id} {context.call_id}\n".encode())
        finally:
            os.close(fd)
        return f"charged {amount}"

    model = ScriptedModel()
    for _ in range(2 * turns + 2):
        model.add(calls(tool_call("charge", {"amount": 5})), "charged")
    session = rt.create_session(
        Agent("cashier", model=model, tools=[charge]), session_id=session_id
    )
    while completed_turns(rt, session_id) < turns:
        ran += 1
        session.prompt(f"charge me ({ran})", timeout=60)
    say(f"DONE {session_id}")


def follow(rt: Runtime, session_id: str, turns: int) -> None:
    seen: list[list[object]] = []
    done = 0
    with rt.follow(session_id) as events:
        say(f"FOLLOWING {session_id}")
        for event in events:
            seen.append([event.sequence, type(event.msg).__name__])
            done += isinstance(event.msg, TurnCompletedMsg)
            if done == turns:
                break
    say(f"FOLLOWED {session_id} {json.dumps(seen)}")


def main() -> None:
    url, ledger = sys.argv[1], sys.argv[2]
    pool = ThreadPoolExecutor(max_workers=64)
    with Runtime.open(url, lease_seconds=30) as rt:
        say("READY")
        for line in sys.stdin:
            command, *args = line.split()
            if command == "exit":
                break
            if command == "run":
                block = int(args[2]) if len(args) > 2 else None
                for session_id in args[0].split(","):
                    pool.submit(
                        run_session, rt, ledger, session_id, int(args[1]), block
                    ).add_done_callback(_report)
            elif command == "follow":
                pool.submit(follow, rt, args[0], int(args[1])).add_done_callback(
                    _report
                )
            elif command == "lead":
                pool.submit(
                    lambda: rt.projections.wait_leading() and say("LEADING")
                ).add_done_callback(_report)
    pool.shutdown(wait=False, cancel_futures=True)


def _report(future: object) -> None:
    error = future.exception()  # type: ignore[attr-defined]
    if error is not None:
        say(f"ERROR {type(error).__name__}: {error}")


if __name__ == "__main__":
    main()
