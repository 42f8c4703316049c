"""``turnlog audit`` and the sessions view show a handoff, on both stores."""

from __future__ import annotations

import pytest
from cli_support import audit_lines, run

from turnlog import Agent, Runtime, ScriptedModel, calls, tool_call


def handed_off_session(url: str) -> None:
    model = ScriptedModel(
        [
            calls(
                tool_call("transfer_to_billing", {"reason": "invoice"}, call_id="c1")
            ),
            "billing here",
        ]
    )
    billing = Agent("billing", model=model, handoffs=["triage"])
    triage = Agent("triage", model=model, handoffs=[billing])
    with Runtime.open(url) as rt:
        rt.create_session(triage, session_id="h").prompt("invoice?", timeout=10)


def test_audit_shows_the_handoff_between_the_call_and_the_next_step(
    capsys: pytest.CaptureFixture[str], store_url: str
) -> None:
    handed_off_session(store_url)

    code, out, err = run(capsys, "--store", store_url, "audit", "h")

    assert (code, err) == (0, "")
    lines = [(name, summary) for _, _, name, summary in audit_lines(out)]
    names = [name for name, _ in lines]
    handed = names.index("AgentHandedOff")
    assert names[handed - 1] == "ToolCallFinished"
    assert names[handed + 1] == "ModelStepStarted"
    assert lines[handed][1] == (
        'triage handed off to billing: "invoice" (call c1, route default)'
    )
    assert lines[handed - 1][1] == 'transfer_to_billing ok: "{"assistant":"billing"}"'


def test_the_sessions_view_shows_the_agent_in_charge(store_url: str) -> None:
    handed_off_session(store_url)
    with Runtime.open(store_url) as rt:
        summary = rt.summaries.load("h")
        assert summary is not None
        assert (summary.agent_name, summary.agent_in_charge) == ("triage", "billing")
