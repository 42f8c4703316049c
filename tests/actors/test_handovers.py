"""How many times a turn hands work from one thread to another: counted.

Each hand-over is a futex wake, a context switch and a GIL transfer,
paid for mostly in the kernel and in waiting for the GIL, not in Python
code a profile names. Every way one of turnlog's
threads gives another work is wrapped here: telling or asking a pykka
actor (its thread), scheduling on the I/O loop (LoopActor messages,
coroutines, timers), and giving a sync tool call a pool worker other than
the caller's own. A send from a thread to itself is no hand-over and is
not counted: a sync call a session starts runs on the session's worker
after its handler, and its output is handled there (actors.actor_pool's
``hand_on_here``). The caller's
prompt is one (caller -> session); its answer (a future set) is not
wrapped. Counted, not timed: a hand-over that creeps back fails here.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

import pykka
import pytest

from turnlog import Agent, Runtime, ScriptedModel, calls, function_tool, tool_call
from turnlog.actors.actor_pool import POOL, ActorPool
from turnlog.actors.tool_executor import ToolExecutor

TURNS = 5


class HandOvers:
    """Counts (sending thread, receiving thread) pairs while ``counting``."""

    def __init__(self) -> None:
        self.sent: Counter[tuple[str, str]] = Counter()
        self.counting = False
        self.loop_thread: threading.Thread | None = None

    def note(self, receiver: str) -> None:
        if self.counting:
            sender = self.kind(threading.current_thread())
            if sender != receiver:
                self.sent[(sender, receiver)] += 1

    def kind(self, thread: threading.Thread) -> str:
        if thread is self.loop_thread:
            return "I/O loop"
        if thread is threading.main_thread():
            return "caller"
        if thread.name.startswith(POOL.name):  # a session's actor, or a tool
            return "SessionActor"
        return thread.name.rsplit("-", 1)[0]  # an actor's: "ApprovalBroker-3"

    def per_turn(self) -> dict[tuple[str, str], float]:
        return {pair: count / TURNS for pair, count in self.sent.items()}


@pytest.fixture
def handovers(monkeypatch: pytest.MonkeyPatch) -> HandOvers:
    counter = HandOvers()

    def wrapped(send: Callable[..., Any], receiver: Callable[[Any], str]) -> Any:
        def send_counted(self: Any, *args: Any, **kwargs: Any) -> Any:
            counter.note(receiver(self))
            return send(self, *args, **kwargs)

        return send_counted

    def actor(ref: Any) -> str:
        return str(ref.actor_class.__name__)

    monkeypatch.setattr(pykka.ActorRef, "tell", wrapped(pykka.ActorRef.tell, actor))
    monkeypatch.setattr(pykka.ActorRef, "ask", wrapped(pykka.ActorRef.ask, actor))
    submit = ActorPool.submit

    def submit_counted(pool: ActorPool, run: Any) -> None:
        # A tool call's run (a session's run is counted as its tell) that
        # is not kept for the worker submitting it: another worker's.
        submit(pool, run)
        kept = pool.kept_here()
        if _is_tool_run(run) and (kept is None or kept.run is not run):
            counter.note("tool worker")

    monkeypatch.setattr(ActorPool, "submit", submit_counted)
    return counter


def _is_tool_run(run: Any) -> bool:
    return isinstance(run, functools.partial) and run.func.__func__ is (
        ToolExecutor._run_sync
    )


def count_turns(rt: Runtime, agent: Agent, counter: HandOvers) -> None:
    """Runs TURNS turns of ``agent`` after two warm-up turns, counting."""
    io_loop = rt._io_loop
    counter.loop_thread = io_loop._thread
    loop = io_loop._loop
    schedule = loop.call_soon_threadsafe

    def on_the_loop(callback: Any, *args: Any, **kwargs: Any) -> Any:
        counter.note("I/O loop")
        return schedule(callback, *args, **kwargs)

    loop.call_soon_threadsafe = on_the_loop  # type: ignore[method-assign]
    session = rt.create_session(agent)
    for turn in range(2):
        session.prompt(f"warm-up {turn}", timeout=30)
    counter.counting = True
    for turn in range(TURNS):
        assert session.prompt(f"turn {turn}", timeout=30).final_output == "done"
    counter.counting = False


def one_tool_call_a_turn(tool: Any) -> Agent:
    model = ScriptedModel()
    for _ in range(TURNS + 2):
        model.add(calls(tool_call(tool.name, {"text": "hi"})), "done")
    return Agent("counted", model=model, tools=[tool])


@function_tool
def echo(text: str) -> str:
    """Returns its argument."""
    return text


@function_tool
async def echo_async(text: str) -> str:
    """Returns its argument, from the I/O loop."""
    return text


def test_a_turn_with_a_sync_tool_call_hands_over_five_times(
    handovers: HandOvers,
) -> None:
    counter = handovers
    with Runtime.open("memory://") as rt:
        count_turns(rt, one_tool_call_a_turn(echo), counter)
    # The prompt; two model calls on the loop and their answers. The call
    # runs on the session's worker, which handles its output too.
    assert counter.per_turn() == {
        ("caller", "SessionActor"): 1,
        ("SessionActor", "I/O loop"): 2,
        ("I/O loop", "SessionActor"): 2,
    }


def test_streamed_fragments_cost_no_hand_over(handovers: HandOvers) -> None:
    # Each fragment is published from the loop (actors.delta_gate), not
    # told to the session: a streamed turn hands over as one that is not.
    model = ScriptedModel(stream_chunk=2)
    for _ in range(TURNS + 2):
        model.add(calls(tool_call("echo", {"text": "hi"})), "done")  # "do", "ne"
    with Runtime.open("memory://") as rt:
        count_turns(rt, Agent("streams", model=model, tools=[echo]), handovers)
    assert handovers.per_turn() == {
        ("caller", "SessionActor"): 1,
        ("SessionActor", "I/O loop"): 2,
        ("I/O loop", "SessionActor"): 2,
    }


def test_a_turn_with_an_async_tool_call_hands_over_seven_times(
    handovers: HandOvers,
) -> None:
    counter = handovers
    with Runtime.open("memory://") as rt:
        count_turns(rt, one_tool_call_a_turn(echo_async), counter)

    # The async call runs on the loop: one hand-over there and one back.
    assert counter.per_turn() == {
        ("caller", "SessionActor"): 1,
        ("SessionActor", "I/O loop"): 3,
        ("I/O loop", "SessionActor"): 3,
    }


@function_tool(timeout=600)
def echo_timed(text: str) -> str:
    """Returns its argument, well within its timeout."""
    return text


@function_tool(timeout=600)
async def echo_timed_async(text: str) -> str:
    """Returns its argument from the I/O loop, well within its timeout."""
    return text


@pytest.mark.parametrize(
    ("tool", "expected"),
    [
        (
            echo_timed,
            {
                ("caller", "SessionActor"): 1,
                ("SessionActor", "I/O loop"): 2,
                ("I/O loop", "SessionActor"): 2,
            },
        ),
        (
            echo_timed_async,
            {
                ("caller", "SessionActor"): 1,
                ("SessionActor", "I/O loop"): 3,
                ("I/O loop", "SessionActor"): 3,
            },
        ),
    ],
    ids=["sync", "async"],
)
def test_a_timeout_costs_no_hand_over(
    handovers: HandOvers, tool: Any, expected: dict[tuple[str, str], float]
) -> None:
    # A sync call's deadline waits for the one timer the warm-up set (no
    # timer of its own to set or cancel); an async call's timer is set
    # where the call runs, on the loop.
    with Runtime.open("memory://") as rt:
        count_turns(rt, one_tool_call_a_turn(tool), handovers)
    assert handovers.per_turn() == expected


def test_a_model_call_costs_the_loop_two_callbacks(
    handovers: HandOvers, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The CallModel message, and the step of the task that calls the model
    # and tells the session its fact as it ends (no done callback a step
    # later). The loop's own wake-up (reading its self-pipe) is not counted.
    run = asyncio.events.Handle._run
    callbacks: Counter[str] = Counter()

    def counted(handle: asyncio.events.Handle) -> None:
        callback = getattr(handle._callback, "__name__", "")  # type: ignore[attr-defined]
        if handovers.counting and callback != "_read_from_self":
            callbacks[type(handle._callback).__name__] += 1  # type: ignore[attr-defined]
        run(handle)

    monkeypatch.setattr(asyncio.events.Handle, "_run", counted)
    with Runtime.open("memory://") as rt:
        count_turns(rt, one_tool_call_a_turn(echo), handovers)
    per_turn = {kind: count / TURNS for kind, count in callbacks.items()}
    assert per_turn == {"method": 2, "TaskStepMethWrapper": 2}
