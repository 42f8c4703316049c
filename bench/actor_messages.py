"""Actor messages and thread hand-overs a turn, counted.

A wrapper around every ``tell`` and ``ask`` (pykka's ``ActorRef`` and
turnlog's ``LoopActorRef``) counts the messages of one session running
``--turns`` turns of one tool call each on ``memory://``; prints the mean
a turn and how many of each message type were sent (as issue 12 counted
them).

Then the hand-overs: every time one thread gives another work (a futex
wake and a GIL transfer each), by sending and receiving thread: a tell or
an ask to a pykka actor, anything scheduled on the I/O loop from another
thread (LoopActor messages, coroutines, timers), a sync tool call given
to a pool worker other than the submitting one (a call a session starts
runs on the session's own worker: no hand-over). The caller's wake by its
answer is not wrapped; add one a turn. ``tests/actors/test_handovers.py``
holds the count.

Run: python bench/actor_messages.py [--turns 20] [--timeout SECONDS]
"""

from __future__ import annotations

import argparse
import functools
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

import pykka

from turnlog import Agent, Runtime, ScriptedModel, calls, function_tool, tool_call
from turnlog.actors.actor_pool import ActorPool
from turnlog.actors.loop_actor import LoopActorRef

SENT: Counter[str] = Counter()
HANDED: Counter[tuple[str, str]] = Counter()
LOOP_THREAD: list[threading.Thread] = []


def counted(send: Callable[..., Any]) -> Callable[..., Any]:
    """``send`` (a tell or an ask), counting each message by its type."""

    def wrapper(self: Any, message: Any, *args: Any, **kwargs: Any) -> Any:
        SENT[type(message).__name__] += 1
        if isinstance(self, pykka.ActorRef):
            handed(self.actor_class.__name__)
        return send(self, message, *args, **kwargs)

    return wrapper


def thread_kind(thread: threading.Thread) -> str:
    if LOOP_THREAD and thread is LOOP_THREAD[0]:
        return "I/O loop"
    if thread is threading.main_thread():
        return "caller"
    if thread.name.startswith("SessionWorker"):  # a session's actor, or a tool
        return "SessionActor"
    return thread.name.rsplit("-", 1)[0]  # an actor's: "ApprovalBroker-3"


def handed(receiver: str) -> None:
    sender = thread_kind(threading.current_thread())
    if sender != receiver:
        HANDED[(sender, receiver)] += 1


def count_handovers(rt: Runtime) -> None:
    """Wraps the ways threads give each other work (pykka: see ``counted``)."""
    LOOP_THREAD.append(rt._io_loop._thread)
    loop = rt._io_loop._loop
    schedule = loop.call_soon_threadsafe

    def on_the_loop(callback: Any, *args: Any, **kwargs: Any) -> Any:
        handed("I/O loop")
        return schedule(callback, *args, **kwargs)

    loop.call_soon_threadsafe = on_the_loop  # type: ignore[method-assign]
    submit = ActorPool.submit

    def to_a_worker(pool: ActorPool, run: Any) -> None:
        # A session's run is counted as its tell; a tool call's, unless its
        # submitting worker keeps it.
        submit(pool, run)
        kept = pool.kept_here()
        tool = isinstance(run, functools.partial) and run.func.__name__ == "_run_sync"
        if tool and (kept is None or kept.run is not run):
            handed("tool worker")

    ActorPool.submit = to_a_worker  # type: ignore[method-assign]


def echo_text(text: str) -> str:
    """Returns its argument."""
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--timeout", type=float, default=None, help="the tool's")
    args = parser.parse_args()
    tool = function_tool(echo_text, name="echo", timeout=args.timeout)
    model = ScriptedModel()
    for _ in range(args.turns + 1):
        model.add(calls(tool_call("echo", {"text": "hi"})), "done")
    agent = Agent("bench", model=model, tools=[tool])
    with Runtime.open("memory://") as rt:
        session = rt.create_session(agent, session_id="bench")
        session.prompt("warm-up", timeout=30)
        count_handovers(rt)
        pykka.ActorRef.tell = counted(pykka.ActorRef.tell)  # type: ignore[method-assign]
        pykka.ActorRef.ask = counted(pykka.ActorRef.ask)  # type: ignore[method-assign]
        LoopActorRef.tell = counted(LoopActorRef.tell)  # type: ignore[method-assign]
        for turn in range(args.turns):
            result = session.prompt(f"turn {turn}", timeout=30)
            assert result.final_output == "done", result
        sent = dict(SENT)
        handovers = dict(HANDED)
    total = sum(sent.values())
    print(f"turns: {args.turns}, actor messages: {total}")
    print(f"actor messages a turn: {total / args.turns:.1f}")
    for name, count in sorted(sent.items(), key=lambda kv: -kv[1]):
        print(f"  {name}: {count / args.turns:.2f} a turn")

    total = sum(handovers.values())
    print(f"thread hand-overs a turn: {total / args.turns:.1f} (+1: the answer)")
    for (sender, receiver), count in sorted(handovers.items(), key=lambda kv: -kv[1]):
        print(f"  {sender} -> {receiver}: {count / args.turns:.2f} a turn")


if __name__ == "__main__":
    main()
