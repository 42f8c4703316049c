"""A process killed around a handoff: the log keeps who is in charge.

The child (handoff_child.py) hands a session from triage to billing and
is SIGKILLed; the session reopened here, with the agent it was created
with, goes on with billing, on SQLite and PostgreSQL.
"""

from __future__ import annotations

from pathlib import Path

from kill_support import kill_when  # scenarios/conftest puts this folder on sys.path

from turnlog import (
    Agent,
    ApprovalDecision,
    Runtime,
    ScriptedModel,
    function_tool,
)
from turnlog.domain import protocol as p
from turnlog.events import RunFinished
from turnlog.testing import wait_for

CHILD = Path(__file__).with_name("handoff_child.py")


def kill_child_at(url: str, session_id: str, mode: str, marker: str) -> None:
    """Runs handoff_child.py until it prints ``marker``, then SIGKILLs it."""
    kill_when(CHILD, marker, url, session_id, mode)


@function_tool(needs_approval=True)
def deploy(target: str) -> str:
    """Needs approval."""
    return f"deployed {target}"


def agents(model: ScriptedModel) -> Agent:
    billing = Agent("billing", model=model, instructions="billing", handoffs=["triage"])
    return Agent(
        "triage", model=model, instructions="triage", tools=[deploy], handoffs=[billing]
    )


def test_killed_in_the_new_agents_step_the_session_reopens_with_it(
    store_url: str,
) -> None:
    kill_child_at(store_url, "k1", "in-new-agent-step", "BILLING STEP")
    model = ScriptedModel(["billing, after the crash"])
    with Runtime.open(store_url) as rt:
        session = rt.create_session(agents(model), session_id="k1")
        result = session.prompt("still there?", timeout=10)
        assert result.final_output == "billing, after the crash"
        assert [r.instructions for r in model.requests] == ["billing"]
        msgs = [e.msg for e in rt.replay_events("k1")]
        handed = [m for m in msgs if isinstance(m, p.AgentHandedOffMsg)]
        assert [(m.from_agent, m.to_agent, m.reason) for m in handed] == [
            ("triage", "billing", "invoice")
        ]
        aborted = [m for m in msgs if isinstance(m, p.TurnAbortedMsg)]
        assert [m.failed for m in aborted] == [True]  # the turn the kill cut off


def test_an_approval_left_by_the_old_agent_is_answered_without_running(
    store_url: str,
) -> None:
    kill_child_at(store_url, "k2", "pending-approval", "PENDING")
    model = ScriptedModel(["billing takes it from here"])
    with Runtime.open(store_url) as rt:
        session = rt.create_session(agents(model), session_id="k2")
        (pending,) = session.pending_approvals()
        assert pending.tool_name == "deploy"
        events = session.subscribe()
        session.approve(pending.request_id, ApprovalDecision.allow())
        finished, _ = wait_for(events, lambda m: isinstance(m, RunFinished))
        assert finished.result.final_output == "billing takes it from here"
        (request,) = model.requests
        assert request.instructions == "billing"
        outputs = {
            i["call_id"]: i["output"]
            for i in request.items
            if i["type"] == "function_call_output"
        }
        assert outputs["h1"] == '{"assistant":"billing"}'
        # deploy was triage's: billing, in charge after the restart, lacks it.
        assert outputs["d1"] == "not run: the agent in charge has no tool 'deploy'"
