"""Background jobs: a tool starts work that finishes after its call.

The result is recorded when the job ends; an idle session gets a
notification (``JobFinishedMsg``) and starts no turn, and the model sees
the result at its next step (the next turn's, or the running turn's next
step, as a steer). Timing is held with threading.Events, never sleeps.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from turnlog import (
    Agent,
    AgentSession,
    Middleware,
    Runtime,
    ScriptedModel,
    StepInfo,
    Subscription,
    ToolContext,
    UsageError,
    calls,
    function_tool,
    tool_call,
)
from turnlog.domain.jobs import CLOSED_JOB_OUTPUT, INTERRUPTED_JOB_OUTPUT
from turnlog.domain.model import ModelRequest
from turnlog.events import (
    Event,
    JobFinishedMsg,
    JobStartedMsg,
    RunEvent,
    RunFinished,
    TurnStartedMsg,
)

WAIT = 30.0


@pytest.fixture
def rt(store_url: str) -> Iterator[Runtime]:
    runtime = Runtime.open(store_url)
    yield runtime
    runtime.close()


def gated(gate: threading.Event, result: str) -> Callable[[], str]:
    def work() -> str:
        assert gate.wait(WAIT), "the test never opened the gate"
        return result

    return work


def build_tool(work: Callable[..., Any], *, max_output: int | None = None) -> Any:
    @function_tool(max_output=max_output)
    def build(context: ToolContext) -> str:
        """Starts a build in the background."""
        job = context.start_job("build", work)
        return f"build started as job {job}"

    return build


def next_job_finished(session: AgentSession, release: Callable[[], None]) -> Any:
    """Subscribes, calls ``release``, and returns the first JobFinished event."""
    with session.subscribe() as events:
        release()
        for item in events:
            if isinstance(item, RunEvent) and isinstance(
                item.event.msg, JobFinishedMsg
            ):
                return item.event
    pytest.fail("the subscription ended before the job finished")


def durable_events(subscription: Subscription, *, runs: int) -> list[Event]:
    """The durable events a subscription got, up to the end of ``runs`` runs."""
    events = []
    with subscription:
        for item in subscription:
            if isinstance(item, RunEvent) and not item.event.transient:
                events.append(item.event)
            elif isinstance(item, RunFinished):
                runs -= 1
                if runs == 0:
                    return events
    pytest.fail("the subscription ended early")


def job_notes(request: ModelRequest) -> list[str]:
    return [
        str(item["content"])
        for item in request.items
        if item.get("turnlog_kind") == "job_result"
    ]


def msgs(rt: Runtime, session_id: str, kind: type[Any]) -> list[Any]:
    return [e.msg for e in rt.replay_events(session_id) if isinstance(e.msg, kind)]


def test_a_job_finishing_while_idle_is_recorded_and_notified_and_starts_no_turn(
    rt: Runtime,
) -> None:
    gate = threading.Event()
    model = ScriptedModel([calls(tool_call("build")), "started it", "noted"])
    agent = Agent("builder", model=model, tools=[build_tool(gated(gate, "built ok"))])
    session = rt.create_session(agent, session_id="idle-job")
    live = session.subscribe()

    first = session.prompt("build it")
    assert first.status == "completed"
    assert not session.running()  # the turn ended; the job still runs
    [started] = msgs(rt, "idle-job", JobStartedMsg)
    assert started.name == "build"
    assert msgs(rt, "idle-job", JobFinishedMsg) == []

    event = next_job_finished(session, gate.set)
    assert event.msg == JobFinishedMsg(started.job_id, "build", "built ok", False)
    assert event.turn_id is None  # a notification, outside any turn
    assert msgs(rt, "idle-job", JobFinishedMsg) == [event.msg]

    # No turn started for it: the next prompt gets the next scripted answer,
    # and its model request carries the result as a note.
    second = session.prompt("and now?")
    assert second.final_output == "noted"
    # The live stream, notification included, is what replay regenerates.
    seen = durable_events(live, runs=2)
    assert seen == rt.replay_events("idle-job")[-len(seen) :]
    assert len(msgs(rt, "idle-job", TurnStartedMsg)) == 2
    assert len(model.requests) == 3
    assert job_notes(model.requests[1]) == []
    [note] = job_notes(model.requests[2])
    assert started.job_id in note
    assert note.endswith("built ok")
    # Taken once: a later turn does not see it again as new.
    model.add("fine")
    session.prompt("again")
    assert job_notes(model.requests[3]) == [note]


class Watching(Middleware):
    """A pre_model hook: each step is prepared by the hooks first."""

    def __init__(self) -> None:
        self.steps: list[int] = []

    def pre_model(self, info: StepInfo) -> None:
        self.steps.append(info.step)


@pytest.mark.parametrize("hooks", [False, True], ids=["plain", "pre_model-hook"])
def test_a_job_finishing_during_a_turn_reaches_the_model_at_its_next_step(
    rt: Runtime, hooks: bool
) -> None:
    gate = threading.Event()
    sessions: list[AgentSession] = []
    finished: list[Any] = []

    @function_tool
    def wait_for_build() -> str:
        """Lets the build finish and waits until it is recorded."""
        finished.append(next_job_finished(sessions[0], gate.set))
        return "the build is done"

    model = ScriptedModel(
        [calls(tool_call("build")), calls(tool_call("wait_for_build")), "shipped"]
    )
    tools = [build_tool(gated(gate, "built during the turn")), wait_for_build]
    watching = Watching()
    middleware = [watching] if hooks else []
    agent = Agent("b", model=model, tools=tools, middleware=middleware)
    sessions.append(rt.create_session(agent))
    result = sessions[0].prompt("build and ship")
    assert watching.steps == ([1, 2, 3] if hooks else [])

    assert result.final_output == "shipped"
    assert len(result.turn_ids) == 1
    [event] = finished
    assert event.turn_id == result.turn_ids[0]
    assert job_notes(model.requests[1]) == []
    [note] = job_notes(model.requests[2])
    assert note.endswith("built during the turn")


def test_a_jobs_error_is_recorded_and_reaches_the_model(rt: Runtime) -> None:
    gate = threading.Event()

    async def failing() -> str:
        assert await asyncio.to_thread(gate.wait, WAIT)
        msg = "disk full"
        raise RuntimeError(msg)

    @function_tool
    async def build(context: ToolContext) -> str:
        """Starts a build from an async tool."""
        return await context.start_job_async("build", failing)

    model = ScriptedModel([calls(tool_call("build")), "started", "sorry"])
    session = rt.create_session(Agent("b", model=model, tools=[build]))
    session.prompt("build")

    event = next_job_finished(session, gate.set)
    assert event.msg.is_error
    assert event.msg.output == "job failed: RuntimeError: disk full"
    session.prompt("how did it go?")
    [note] = job_notes(model.requests[2])
    assert "failed" in note
    assert note.endswith("RuntimeError: disk full")


def test_a_jobs_output_is_cut_to_its_tools_limit(rt: Runtime) -> None:
    gate = threading.Event()
    tool = build_tool(gated(gate, "x" * 500), max_output=100)
    model = ScriptedModel([calls(tool_call("build")), "started"])
    session = rt.create_session(Agent("b", model=model, tools=[tool]))
    session.prompt("build")
    event = next_job_finished(session, gate.set)
    assert event.msg.output.startswith("x" * 10)
    assert len(event.msg.output) < 500


def test_closing_a_session_records_its_running_job_as_interrupted(
    rt: Runtime,
) -> None:
    gate = threading.Event()
    model = ScriptedModel([calls(tool_call("build")), "started"])
    agent = Agent("b", model=model, tools=[build_tool(gated(gate, "too late"))])
    session = rt.create_session(agent, session_id="closing")
    session.prompt("build")
    [started] = msgs(rt, "closing", JobStartedMsg)

    session.close()
    [interrupted] = msgs(rt, "closing", JobFinishedMsg)
    assert interrupted == JobFinishedMsg(
        started.job_id, "build", CLOSED_JOB_OUTPUT, True, interrupted=True
    )
    gate.set()
    [worker] = [t for t in threading.enumerate() if t.name.endswith(started.job_id)]
    worker.join(WAIT)
    assert not worker.is_alive()
    # Its late result is dropped: nothing is recorded after the close.
    assert type(rt.replay_events("closing")[-1].msg).__name__ == "SessionClosedMsg"
    assert msgs(rt, "closing", JobFinishedMsg) == [interrupted]


def test_an_idempotent_job_must_be_declared_on_its_tool(rt: Runtime) -> None:
    refused: list[BaseException] = []

    @function_tool
    def build(context: ToolContext) -> str:
        """Tries to start an undeclared idempotent job."""
        try:
            context.start_job("build", lambda: "x", idempotent=True)
        except UsageError as error:
            refused.append(error)
        return "refused"

    model = ScriptedModel([calls(tool_call("build")), "ok"])
    session = rt.create_session(Agent("b", model=model, tools=[build]), session_id="u")
    session.prompt("build")
    [error] = refused
    assert "function_tool(jobs=" in str(error)
    assert msgs(rt, "u", JobStartedMsg) == []


def test_a_job_left_running_by_rt_close_is_interrupted_when_reopened(
    store_url: str,
) -> None:
    gate = threading.Event()
    agent = Agent(
        "b",
        model=ScriptedModel([calls(tool_call("build")), "started"]),
        tools=[build_tool(gated(gate, "finished after the close"))],
    )
    with Runtime.open(store_url) as first:
        first.create_session(agent, session_id="left").prompt("build")
        [started] = msgs(first, "left", JobStartedMsg)
    # rt.close() did not wait: the job still runs, and its result has no
    # session to go to once it ends.
    gate.set()
    [worker] = [t for t in threading.enumerate() if t.name.endswith(started.job_id)]
    worker.join(WAIT)
    assert not worker.is_alive()
    with Runtime.open(store_url) as second:
        second.create_session(agent, session_id="left")
        [finished] = msgs(second, "left", JobFinishedMsg)
        assert finished == JobFinishedMsg(
            started.job_id, "build", INTERRUPTED_JOB_OUTPUT, True, interrupted=True
        )
