"""Seed scenarios from ../shared/seeds/000_8fbdb16dfc52d034.txt (issue 3 part)."""

from __future__ import annotations

import queue
import threading

from turnlog import (
    Agent,
    ApprovalBroker,
    ApprovalDecision,
    ApprovalRequest,
    RunConfig,
    Runtime,
    ScriptedModel,
    calls,
    function_tool,
    tool_call,
)


def dangerous_tool(executions: list[str]):
    @function_tool(needs_approval=True)
    def dangerous() -> str:
        """Run an approved operation."""
        executions.append("ran")
        return "allowed"

    return dangerous


class DeferredApprovalProvider:
    """Answers later: hands each request id to the test and returns None."""

    def __init__(self) -> None:
        self.requests = 0
        self.request_ids: queue.Queue[str] = queue.Queue()

    def decide(self, request: ApprovalRequest) -> ApprovalDecision | None:
        self.requests += 1
        self.request_ids.put(request.request_id)
        return None


class SynchronouslyResolvedApprovalProvider:
    """Resolves the request through the broker from inside decide()."""

    def __init__(self) -> None:
        self.broker: ApprovalBroker | None = None

    def decide(self, request: ApprovalRequest) -> ApprovalDecision | None:
        assert self.broker is not None
        self.broker.resolve(request.request_id, ApprovalDecision.allow())
        return None


def test_allow_session_persists_across_automatic_follow_up(sqlite_url: str) -> None:
    executions: list[str] = []
    model = ScriptedModel(
        [
            calls(tool_call("dangerous", call_id="call_1"), text="first call"),
            "first",
            calls(tool_call("dangerous", call_id="call_2"), text="second call"),
            "second",
        ]
    )
    agent = Agent(
        "assistant",
        model=model,
        tools=[dangerous_tool(executions)],
        instructions="Run the operation and finish.",
    )
    provider = DeferredApprovalProvider()
    config = RunConfig(approval_provider=provider, approval_timeout=5)
    with Runtime.open(sqlite_url) as rt:
        session = rt.create_session(
            agent, session_id="allow-session", run_config=config
        )
        session.follow_up("run it again")
        results = []
        prompting = threading.Thread(
            target=lambda: results.append(session.prompt("run it", timeout=10))
        )
        prompting.start()
        request_id = provider.request_ids.get(timeout=5)
        session.approve(request_id, ApprovalDecision.allow_session())
        prompting.join(10)

        assert results[0].final_output == "second"
        assert executions == ["ran", "ran"]
        assert provider.requests == 1


def test_provider_can_resolve_request_synchronously_from_decide(
    sqlite_url: str,
) -> None:
    executions: list[str] = []
    model = ScriptedModel([calls(tool_call("dangerous"), text="call"), "done"])
    agent = Agent(
        "assistant",
        model=model,
        tools=[dangerous_tool(executions)],
        instructions="Run the operation and finish.",
    )
    provider = SynchronouslyResolvedApprovalProvider()
    config = RunConfig(approval_provider=provider, approval_timeout=5)
    with Runtime.open(sqlite_url) as rt:
        provider.broker = rt.approvals
        session = rt.create_session(
            agent, session_id="synchronous-approval", run_config=config
        )
        result = session.prompt("run it", timeout=10)
        assert result.final_output == "done"
        assert executions == ["ran"]
