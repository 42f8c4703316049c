"""Approvals end to end: every decision, timeouts, providers, restarts."""

from __future__ import annotations

import threading

import pytest

from turnlog import (
    Agent,
    ApprovalDecision,
    ApprovalRequest,
    RunConfig,
    Runtime,
    ScriptedModel,
    UsageError,
    calls,
    function_tool,
    tool_call,
)
from turnlog.domain import protocol as p
from turnlog.testing import wait_for


def deploy_tool(ran: list[str]):
    @function_tool(needs_approval=lambda args: args.get("target") == "prod")
    def deploy(target: str) -> str:
        """Deploys; production needs approval."""
        ran.append(target)
        return f"deployed {target}"

    return deploy


class Counting:
    def __init__(self, answer: ApprovalDecision | Exception | None) -> None:
        self.answer = answer
        self.seen: list[ApprovalRequest] = []

    def decide(self, request: ApprovalRequest) -> ApprovalDecision | None:
        self.seen.append(request)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def resolutions(rt: Runtime, session_id: str) -> list[tuple[str, str]]:
    return [
        (e.msg.decision, e.msg.decided_by)
        for e in rt.replay_events(session_id)
        if isinstance(e.msg, p.ApprovalDecidedMsg)
    ]


def outputs(model: ScriptedModel, request: int) -> list[str]:
    items = model.requests[request].items
    return [i["output"] for i in items if i["type"] == "function_call_output"]


def test_the_predicate_asks_only_for_matching_arguments(sqlite_url: str) -> None:
    ran: list[str] = []
    model = ScriptedModel(
        [calls(tool_call("deploy", {"target": "staging"})), "staging done"]
    )
    provider = Counting(ApprovalDecision.deny())
    with Runtime.open(
        sqlite_url, run_config=RunConfig(approval_provider=provider)
    ) as rt:
        session = rt.create_session(Agent("a", model=model, tools=[deploy_tool(ran)]))
        assert session.prompt("go", timeout=10).final_output == "staging done"
    assert ran == ["staging"]
    assert provider.seen == []


def test_allow_session_is_remembered_across_a_restart(sqlite_url: str) -> None:
    ran: list[str] = []
    provider = Counting(ApprovalDecision.allow_session())
    config = RunConfig(approval_provider=provider)
    first = ScriptedModel([calls(tool_call("deploy", {"target": "prod"})), "one"])
    with Runtime.open(sqlite_url, run_config=config) as rt:
        session = rt.create_session(
            Agent("a", model=first, tools=[deploy_tool(ran)]), session_id="s"
        )
        session.prompt("deploy", timeout=10)
    second = ScriptedModel([calls(tool_call("deploy", {"target": "prod"})), "two"])
    with Runtime.open(sqlite_url, run_config=config) as rt:
        session = rt.create_session(
            Agent("a", model=second, tools=[deploy_tool(ran)]), session_id="s"
        )
        assert session.prompt("again", timeout=10).final_output == "two"
        allowed = [
            e.msg
            for e in rt.replay_events("s")
            if isinstance(e.msg, p.ToolAllowedForSessionMsg)
        ]
        assert [a.tool_name for a in allowed] == ["deploy"]
    assert ran == ["prod", "prod"]
    assert len(provider.seen) == 1


def test_allow_session_covers_calls_of_the_same_tool_waiting_beside_it(
    sqlite_url: str,
) -> None:
    ran: list[str] = []
    model = ScriptedModel(
        [
            calls(
                tool_call("deploy", {"target": "prod"}),
                tool_call("deploy", {"target": "prod"}),
            ),
            "both",
        ]
    )
    provider = Counting(None)
    with Runtime.open(
        sqlite_url, run_config=RunConfig(approval_provider=provider)
    ) as rt:
        session = rt.create_session(
            Agent("a", model=model, tools=[deploy_tool(ran)]), session_id="s"
        )
        events = session.subscribe()
        results = []
        worker = threading.Thread(target=lambda: results.append(session.prompt("go")))
        worker.start()
        first, _ = wait_for(events, lambda m: isinstance(m, p.ApprovalRequestedMsg))
        wait_for(events, lambda m: isinstance(m, p.ApprovalRequestedMsg))
        session.approve(first.event.msg.request_id, ApprovalDecision.allow_session())
        worker.join(10)
        assert results[0].final_output == "both"
        assert sorted(resolutions(rt, "s")) == [
            ("allow", "session allowance"),
            ("allow_session", "user"),
        ]
    assert ran == ["prod", "prod"]


@pytest.mark.parametrize(
    ("answer", "status", "output", "resolved"),
    [
        (ApprovalDecision.allow(), "completed", "deployed prod", ("allow", "provider")),
        (
            ApprovalDecision.deny(),
            "completed",
            "the call was denied approval and was not run",
            ("deny", "provider"),
        ),
        (ApprovalDecision.abort(), "aborted", None, ("abort", "provider")),
    ],
)
def test_each_provider_answer_is_recorded_and_obeyed(
    sqlite_url: str, answer, status: str, output: str | None, resolved
) -> None:
    ran: list[str] = []
    model = ScriptedModel([calls(tool_call("deploy", {"target": "prod"})), "after"])
    config = RunConfig(approval_provider=Counting(answer))
    with Runtime.open(sqlite_url, run_config=config) as rt:
        session = rt.create_session(
            Agent("a", model=model, tools=[deploy_tool(ran)]), session_id="s"
        )
        result = session.prompt("go", timeout=10)
        assert result.status == status
        assert resolutions(rt, "s") == [resolved]
        if output is None:
            assert len(model.requests) == 1
            assert ran == []
        else:
            assert outputs(model, 1) == [output]
            assert ran == (["prod"] if output.startswith("deployed") else [])
        assert rt.checkpoints.load("s").pending_approval is None


def test_an_unanswered_request_times_out_recorded_and_unrun(sqlite_url: str) -> None:
    ran: list[str] = []
    model = ScriptedModel([calls(tool_call("deploy", {"target": "prod"})), "gave up"])
    config = RunConfig(approval_timeout=0.05)
    with Runtime.open(sqlite_url, run_config=config) as rt:
        session = rt.create_session(
            Agent("a", model=model, tools=[deploy_tool(ran)]), session_id="s"
        )
        events = session.subscribe()
        assert session.prompt("go", timeout=10).final_output == "gave up"
        request, _ = wait_for(events, lambda m: isinstance(m, p.ApprovalRequestedMsg))
        assert resolutions(rt, "s") == [("timeout", "timeout")]
        assert outputs(model, 1) == ["approval timed out; the call was not run"]
        with pytest.raises(UsageError, match="already decided 'timeout'"):
            session.approve(request.event.msg.request_id, ApprovalDecision.allow())
    assert ran == []


def test_the_first_decision_stands(sqlite_url: str) -> None:
    ran: list[str] = []
    model = ScriptedModel([calls(tool_call("deploy", {"target": "prod"})), "done"])
    with Runtime.open(sqlite_url) as rt:
        session = rt.create_session(
            Agent("a", model=model, tools=[deploy_tool(ran)]), session_id="s"
        )
        events = session.subscribe()
        worker = threading.Thread(target=lambda: session.prompt("go"))
        worker.start()
        request, _ = wait_for(events, lambda m: isinstance(m, p.ApprovalRequestedMsg))
        request_id = request.event.msg.request_id
        session.approve(request_id, "deny")
        with pytest.raises(UsageError):
            session.approve(request_id, "allow")
        with pytest.raises(UsageError):
            rt.approvals.resolve(request_id, "allow")
        worker.join(10)
        assert resolutions(rt, "s") == [("deny", "user")]
    assert ran == []
