"""Steering that steers (README, "Steering"; issue 23, item 3).

A steer takes effect before every tool call of the running turn that has
not started: those calls are never run, their outputs say the user
steered, the log records them as skipped, and the model's next request
carries the steer with those outputs. Calls already running finish.
"""

from __future__ import annotations

import threading
from typing import Any

from turnlog import (
    Agent,
    Runtime,
    ScriptedModel,
    SessionClosedError,
    calls,
    function_tool,
    tool_call,
)
from turnlog.domain import protocol as p
from turnlog.testing import HeldModel, wait_for

SKIPPED = "skipped: the user steered the turn before this call started"


class Tools:
    """A tool ``first`` that blocks until released, and two that count runs."""

    def __init__(self, *, first_idempotent: bool = False) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.ran: list[str] = []

        @function_tool(idempotent=first_idempotent)
        def first() -> str:
            """Blocks until the test releases it."""
            self.ran.append("first")
            self.entered.set()
            assert self.release.wait(10)
            return "first done"

        @function_tool
        def second() -> str:
            """Must not run once the user steered."""
            self.ran.append("second")
            return "second done"

        @function_tool(needs_approval=True)
        def third() -> str:
            """Needs approval; must not run once the user steered."""
            self.ran.append("third")
            return "third done"

        self.all = [first, second, third]


def three_calls() -> Any:
    return calls(
        tool_call("first", call_id="c1"),
        tool_call("second", call_id="c2"),
        tool_call("second", call_id="c3"),
    )


def prompt_in_background(session: Any, text: str) -> tuple[threading.Thread, list]:
    results: list[Any] = []
    worker = threading.Thread(
        target=lambda: results.append(session.prompt(text, timeout=20))
    )
    worker.start()
    return worker, results


def outputs(request: Any) -> dict[str, str]:
    return {
        item["call_id"]: item["output"]
        for item in request.items
        if item["type"] == "function_call_output"
    }


def user_texts(request: Any) -> list[str]:
    return [
        item["content"]
        for item in request.items
        if item.get("type") == "message" and item.get("role") == "user"
    ]


def finished_calls(rt: Runtime, session_id: str) -> list[p.ToolCallFinishedMsg]:
    return [
        e.msg
        for e in rt.replay_events(session_id)
        if isinstance(e.msg, p.ToolCallFinishedMsg)
    ]


def test_a_steer_skips_the_calls_that_have_not_started(store_url: str) -> None:
    tools = Tools()
    model = ScriptedModel([three_calls(), "changed course"])
    agent = Agent("a", model=model, tools=tools.all, parallel_tool_calls=False)
    with Runtime.open(store_url) as rt:
        session = rt.create_session(agent, session_id="steer")
        events = session.subscribe()
        worker, results = prompt_in_background(session, "do three things")
        assert tools.entered.wait(10)
        session.steer("stop; do something else")  # returns once recorded
        skipped = [m for m in finished_calls(rt, "steer") if m.skipped == "steered"]
        assert [(m.call_id, m.output, m.is_error) for m in skipped] == [
            ("c2", SKIPPED, True),
            ("c3", SKIPPED, True),
        ]
        tools.release.set()
        worker.join(20)
        assert results[0].final_output == "changed course"
        assert tools.ran == ["first"]  # the skipped calls never ran
        # The next request carries the first call's output, the skips and
        # the steer, after them.
        request = model.requests[1]
        assert outputs(request) == {"c1": "first done", "c2": SKIPPED, "c3": SKIPPED}
        assert user_texts(request) == ["do three things", "stop; do something else"]
        # The live stream says so too, and equals the replay.
        _, seen = wait_for(events, lambda m: isinstance(m, p.TurnCompletedMsg))
        live = [
            item.event.msg
            for item in seen
            if isinstance(getattr(item, "event", None), p.Event)
            and isinstance(item.event.msg, p.ToolCallFinishedMsg)
        ]
        assert [(m.call_id, m.skipped) for m in live] == [
            ("c2", "steered"),
            ("c3", "steered"),
            ("c1", ""),
        ]
        started = [
            e.msg.call_id
            for e in rt.replay_events("steer")
            if isinstance(e.msg, p.ToolCallStartedMsg)
        ]
        assert started == ["c1"]


def test_calls_run_one_after_another_without_a_steer(store_url: str) -> None:
    tools = Tools()
    tools.release.set()
    model = ScriptedModel([three_calls(), "all done"])
    agent = Agent("a", model=model, tools=tools.all, parallel_tool_calls=False)
    with Runtime.open(store_url) as rt:
        session = rt.create_session(agent, session_id="seq")
        result = session.prompt("do three things", timeout=20)
        assert result.final_output == "all done"
        assert tools.ran == ["first", "second", "second"]
        replayed = [
            (type(e.msg).__name__, e.msg.call_id)
            for e in rt.replay_events("seq")
            if isinstance(e.msg, p.ToolCallStartedMsg | p.ToolCallFinishedMsg)
        ]
        # each call starts once the one before it has its output
        assert replayed == [
            ("ToolCallStartedMsg", "c1"),
            ("ToolCallFinishedMsg", "c1"),
            ("ToolCallStartedMsg", "c2"),
            ("ToolCallFinishedMsg", "c2"),
            ("ToolCallStartedMsg", "c3"),
            ("ToolCallFinishedMsg", "c3"),
        ]


def test_a_steer_withdraws_a_call_waiting_for_approval(store_url: str) -> None:
    # Calls of a step run together (the default): the running one
    # finishes, the one waiting for a decision is skipped.
    tools = Tools()
    model = ScriptedModel(
        [
            calls(tool_call("first", call_id="c1"), tool_call("third", call_id="c2")),
            "changed course",
        ]
    )
    with Runtime.open(store_url) as rt:
        session = rt.create_session(
            Agent("a", model=model, tools=tools.all), session_id="withdrawn"
        )
        worker, results = prompt_in_background(session, "go")
        assert tools.entered.wait(10)
        [request] = session.pending_approvals()
        session.steer("never mind the third")
        assert session.pending_approvals() == []
        tools.release.set()
        worker.join(20)
        assert results[0].final_output == "changed course"
        assert tools.ran == ["first"]
        assert outputs(model.requests[1]) == {"c1": "first done", "c2": SKIPPED}
        decided = [
            (e.msg.request_id, e.msg.decision, e.msg.decided_by)
            for e in rt.replay_events("withdrawn")
            if isinstance(e.msg, p.ApprovalDecidedMsg)
        ]
        assert decided == [(request.request_id, "abort", "steer")]


def test_a_steer_during_the_model_call_skips_that_steps_calls(
    store_url: str,
) -> None:
    tools = Tools()
    held = HeldModel(
        ScriptedModel([calls(tool_call("second", call_id="c1")), "as you say"])
    )
    with Runtime.open(store_url) as rt:
        session = rt.create_session(
            Agent("a", model=held, tools=tools.all), session_id="early"
        )
        worker, results = prompt_in_background(session, "go")
        assert held.entered.wait(10)
        session.steer("wait, do it differently")
        held.release()
        worker.join(20)
        assert results[0].final_output == "as you say"
        assert tools.ran == []
        second = held.inner.requests[1]
        assert outputs(second) == {"c1": SKIPPED}
        assert user_texts(second)[-1] == "wait, do it differently"


def test_a_skipped_call_is_not_run_when_the_session_is_reopened(
    store_url: str,
) -> None:
    # The runtime closes while the first call runs, as a crash would stop
    # it: the log shows the turn running, the first call started and the
    # others skipped. Reopened, the first (idempotent) call runs again and
    # the skipped ones stay skipped.
    tools = Tools(first_idempotent=True)
    agent = Agent(
        "a",
        model=ScriptedModel([three_calls()]),
        tools=tools.all,
        parallel_tool_calls=False,
    )
    rt = Runtime.open(store_url)
    try:
        session = rt.create_session(agent, session_id="reopened")
        session.subscribe()
        refused: list[BaseException] = []
        waiter = threading.Thread(target=_prompt_until_closed, args=(session, refused))
        waiter.start()
        assert tools.entered.wait(10)
        session.steer("take another way")
    finally:
        rt.close()
    tools.release.set()
    waiter.join(20)
    assert len(refused) == 1
    again = Tools(first_idempotent=True)
    again.release.set()
    model = ScriptedModel(["took another way"])
    held = HeldModel(model)  # the resumed turn waits at its model call
    with Runtime.open(store_url) as rt:
        session = rt.create_session(
            agent.clone(model=held, tools=again.all), session_id="reopened"
        )
        events = session.subscribe()
        assert held.entered.wait(10)
        held.release()
        wait_for(events, lambda m: isinstance(m, p.TurnCompletedMsg))
        assert again.ran == ["first"]  # run again: it is idempotent
        assert outputs(model.requests[0]) == {
            "c1": "first done",
            "c2": SKIPPED,
            "c3": SKIPPED,
        }
        assert user_texts(model.requests[0])[-1] == "take another way"
        finished = [(m.call_id, m.skipped) for m in finished_calls(rt, "reopened")]
        assert finished == [("c2", "steered"), ("c3", "steered"), ("c1", "")]


def _prompt_until_closed(session: Any, refused: list[BaseException]) -> None:
    try:
        session.prompt("do three things", timeout=20)
    except SessionClosedError as error:  # the runtime closed under it
        refused.append(error)


def test_a_call_waiting_its_turn_runs_in_it_after_reopening(store_url: str) -> None:
    # One after another: the runtime closes (as a crash would stop it)
    # while the first, idempotent, call runs and the others wait. Reopened,
    # the first runs again and the others then run in their turn.
    tools = Tools(first_idempotent=True)
    agent = Agent(
        "a",
        model=ScriptedModel([three_calls()]),
        tools=tools.all,
        parallel_tool_calls=False,
    )
    rt = Runtime.open(store_url)
    try:
        session = rt.create_session(agent, session_id="waited")
        refused: list[BaseException] = []
        waiter = threading.Thread(target=_prompt_until_closed, args=(session, refused))
        waiter.start()
        assert tools.entered.wait(10)
    finally:
        rt.close()
    tools.release.set()
    waiter.join(20)
    again = Tools(first_idempotent=True)
    again.release.set()
    model = ScriptedModel(["all three done"])
    held = HeldModel(model)
    with Runtime.open(store_url) as rt:
        session = rt.create_session(
            agent.clone(model=held, tools=again.all), session_id="waited"
        )
        events = session.subscribe()
        assert held.entered.wait(10)
        held.release()
        wait_for(events, lambda m: isinstance(m, p.TurnCompletedMsg))
        assert again.ran == ["first", "second", "second"]
        assert outputs(model.requests[0]) == {
            "c1": "first done",
            "c2": "second done",
            "c3": "second done",
        }
