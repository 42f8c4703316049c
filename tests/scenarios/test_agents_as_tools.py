"""An agent used as a tool runs a child session of its own: linked both
ways in the log, its answer the call's output, its approvals answered
through the parent, its usage summed with the parent's by agent, and
interrupted with the parent."""

from __future__ import annotations

import threading

import pytest

from turnlog import (
    Agent,
    AgentSession,
    ApprovalDecision,
    ApprovalRequest,
    ApprovalResponse,
    ChildSession,
    InvalidInputError,
    RunConfig,
    Runtime,
    ScriptedModel,
    UserInput,
    calls,
    function_tool,
    reply,
    tool_call,
)
from turnlog.domain import protocol as p
from turnlog.domain import session as s
from turnlog.domain import turn_events as t
from turnlog.domain.ids import session_uuid
from turnlog.testing import HeldModel


def _researcher(model: ScriptedModel | HeldModel, **kwargs: object) -> Agent:
    return Agent(
        "researcher",
        model=model,
        instructions="Find facts.",
        **kwargs,  # type: ignore[arg-type]
    )


def _lead(child: Agent, answers: list[object]) -> Agent:
    return Agent(
        "lead",
        model=ScriptedModel(answers),  # type: ignore[arg-type]
        tools=[child.as_tool(name="research", description="Ask the researcher.")],
    )


def _ask(query: str, call_id: str = "c1") -> object:
    return calls(tool_call("research", {"input": query}, call_id=call_id))


def test_a_child_session_answers_the_call_and_is_linked_both_ways(
    store_url: str,
) -> None:
    child_model = ScriptedModel(
        [reply("Paris", usage={"input_tokens": 7, "output_tokens": 2})]
    )
    lead = _lead(
        _researcher(child_model),
        [_ask("capital of France?"), reply("It is Paris.", usage={"input_tokens": 5})],
    )
    with Runtime.open(store_url) as rt:
        session = rt.create_session(lead, session_id="parent")
        result = session.prompt("Where?", timeout=30)
        assert result.final_output == "It is Paris."
        child_id = "parent:1:c1"
        assert rt.children("parent") == [
            ChildSession(child_id, "researcher", "parent", "c1")
        ]
        events = rt.replay_events("parent")
        (finished,) = [
            e.msg for e in events if isinstance(e.msg, p.ToolCallFinishedMsg)
        ]
        assert (finished.output, finished.is_error) == ("Paris", False)
        created = rt.store.events(session_uuid(child_id))[0]
        assert isinstance(created, s.SessionCreated)
        assert (created.parent_session, created.parent_call) == ("parent", "c1")
        assert created.agent_name == "researcher"
        inputs = [
            e.msg.text
            for e in rt.replay_events(child_id)
            if isinstance(e.msg, p.InputAcceptedMsg)
        ]
        assert inputs == ["capital of France?"]
        usage = rt.usage_by_agent("parent")
        assert usage["researcher"] == {"input_tokens": 7, "output_tokens": 2}
        assert usage["lead"]["input_tokens"] >= 5
        assert rt.children(child_id) == []


def test_the_parent_records_the_child_with_the_calls_start(store_url: str) -> None:
    lead = _lead(_researcher(ScriptedModel(["42"])), [_ask("q"), "done"])
    with Runtime.open(store_url) as rt:
        rt.create_session(lead, session_id="p2").prompt("go", timeout=30)
        from turnlog.store.history import SessionHistory

        kinds = [
            type(e).__name__
            for e in SessionHistory(rt.store).events("p2")
            if isinstance(
                e, t.ToolCallStarted | t.ChildSessionStarted | t.ToolCallFinished
            )
        ]
        assert kinds == ["ToolCallStarted", "ChildSessionStarted", "ToolCallFinished"]


def test_a_failed_child_is_an_error_output_naming_the_child(store_url: str) -> None:
    # The child has no scripted answer left: its model step fails.
    lead = _lead(_researcher(ScriptedModel([])), [_ask("q"), "could not find out"])
    with Runtime.open(store_url) as rt:
        result = rt.create_session(lead, session_id="p3").prompt("go", timeout=30)
        assert result.final_output == "could not find out"
        (finished,) = [
            e.msg
            for e in rt.replay_events("p3")
            if isinstance(e.msg, p.ToolCallFinishedMsg)
        ]
        assert finished.is_error
        assert finished.output.startswith("child session p3:1:c1 failed: ")


def test_each_call_runs_its_own_child_and_bad_input_runs_none(sqlite_url: str) -> None:
    child_model = ScriptedModel(["one", "two"])
    lead = _lead(
        _researcher(child_model),
        [
            calls(
                tool_call("research", {"input": "first"}, call_id="a"),
                tool_call("research", {"input": "second"}, call_id="b"),
                tool_call("research", {"input": ""}, call_id="c"),
            ),
            "both",
        ],
    )
    with Runtime.open(sqlite_url) as rt:
        rt.create_session(lead, session_id="p4").prompt("go", timeout=30)
        outputs = {
            e.msg.call_id: (e.msg.output, e.msg.is_error)
            for e in rt.replay_events("p4")
            if isinstance(e.msg, p.ToolCallFinishedMsg)
        }
        assert sorted(o for o, _ in (outputs["a"], outputs["b"])) == ["one", "two"]
        assert outputs["c"][1]
        assert "input" in outputs["c"][0]
        assert [c.session_id for c in rt.children("p4")] == [
            "p4:1:a",
            "p4:1:b",
            "p4:1:c",
        ]
        assert rt.store.get_session("p4:1:c") is None  # never created


def test_an_agent_whose_name_is_no_tool_name_needs_one() -> None:
    agent = Agent("my researcher", model=ScriptedModel([]))
    with pytest.raises(InvalidInputError, match="tool name"):
        agent.as_tool()
    assert agent.as_tool(name="research").name == "research"


def test_a_childs_approval_is_listed_and_answered_through_the_parent(
    store_url: str,
) -> None:
    ran: list[str] = []

    @function_tool(needs_approval=True)
    def publish(text: str) -> str:
        """Needs approval."""
        ran.append(text)
        return "published"

    child = _researcher(
        ScriptedModel([calls(tool_call("publish", {"text": "hi"})), "it is out"]),
        tools=[publish],
    )
    lead = _lead(child, [_ask("publish hi"), "the researcher published it"])
    with Runtime.open(store_url) as rt:
        session = rt.create_session(lead, session_id="p5")
        waiter = threading.Thread(
            target=session.prompt, args=("go",), kwargs={"timeout": 30}
        )
        events = session.subscribe()
        waiter.start()
        pending = _wait_pending(rt, session, "p5:1:c1")
        assert (pending.session_id, pending.tool_name) == ("p5:1:c1", "publish")
        session.approve(pending.request_id, ApprovalDecision.allow())
        from turnlog import RunFinished
        from turnlog.testing import wait_for

        finished, _ = wait_for(events, lambda m: isinstance(m, RunFinished), timeout=30)
        waiter.join(10)
        assert finished.result.final_output == "the researcher published it"
        assert ran == ["hi"]
        assert session.pending_approvals() == []


def test_a_childs_approval_reaches_the_parents_provider(sqlite_url: str) -> None:
    asked: list[str] = []

    class Provider:
        def decide(self, request: object) -> ApprovalDecision:
            asked.append(request.session_id)  # type: ignore[attr-defined]
            return ApprovalDecision.deny()

    @function_tool(needs_approval=True)
    def publish(text: str) -> str:
        """Needs approval."""
        return "published"

    child = _researcher(
        ScriptedModel([calls(tool_call("publish", {"text": "hi"})), "it was refused"]),
        tools=[publish],
    )
    lead = _lead(child, [_ask("publish hi"), "refused"])
    config = RunConfig(approval_provider=Provider())
    with Runtime.open(sqlite_url) as rt:
        session = rt.create_session(lead, session_id="p6", run_config=config)
        assert session.prompt("go", timeout=30).final_output == "refused"
        assert asked == ["p6:1:c1"]


def test_interrupting_the_parent_interrupts_its_child(store_url: str) -> None:
    held = HeldModel(ScriptedModel(["never delivered"]))
    lead = _lead(_researcher(held), [_ask("slow question"), "unused"])
    with Runtime.open(store_url) as rt:
        session = rt.create_session(lead, session_id="p7")
        waiter = threading.Thread(
            target=session.prompt, args=("go",), kwargs={"timeout": 30}
        )
        waiter.start()
        assert held.entered.wait(10)
        session.interrupt()
        assert held.cancelled.wait(10)
        waiter.join(10)
        child_events = rt.replay_events("p7:1:c1")
        aborted = [e.msg for e in child_events if isinstance(e.msg, p.TurnAbortedMsg)]
        assert len(aborted) == 1
        assert not aborted[0].failed


def _wait_pending(rt: Runtime, session: AgentSession, child_id: str) -> ApprovalRequest:
    """The child's approval request, once its log holds it, as the parent lists it."""
    with rt.follow(child_id) as follower:
        while not isinstance(follower.get(10).msg, p.ApprovalRequestedMsg):
            pass
    (request,) = session.pending_approvals()
    return request


def test_the_protocol_face_answers_a_childs_request_too(sqlite_url: str) -> None:
    @function_tool(needs_approval=True)
    def publish(text: str) -> str:
        """Needs approval."""
        return "published"

    child = _researcher(
        ScriptedModel([calls(tool_call("publish", {"text": "hi"})), "it is out"]),
        tools=[publish],
    )
    lead = _lead(child, [_ask("publish hi"), "done"])
    with Runtime.open(sqlite_url) as rt:
        handle = rt.create_agent(lead, session_id="p8")
        handle.submit(UserInput("go"))
        pending = _wait_pending(rt, handle.session, "p8:1:c1")
        handle.submit(ApprovalResponse(pending.request_id, "allow"))
        while not isinstance(handle.next_event(10).msg, p.TurnCompletedMsg):
            pass
        outputs = [
            e.msg.output
            for e in rt.replay_events("p8")
            if isinstance(e.msg, p.ToolCallFinishedMsg)
        ]
        assert outputs == ["it is out"]
