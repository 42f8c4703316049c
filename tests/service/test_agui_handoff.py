"""A handoff in the service: a CUSTOM event on AG-UI, and the agent in
charge in the session's resource and the sessions listing."""

from __future__ import annotations

from ag_ui.core import CustomEvent

from turnlog import Agent, ScriptedModel, calls, tool_call
from turnlog.domain.protocol import AgentHandedOffMsg, Event
from turnlog.service.agui_events import HANDOFF_EVENT, AguiTranslator


def test_a_handoff_is_a_custom_event() -> None:
    translator = AguiTranslator("s", "run-1", {})
    translator.start()
    msg = AgentHandedOffMsg("triage", "billing", "c1", "an invoice")
    (event,) = translator.durable(Event("s", "sub", "t", 7, msg))
    assert isinstance(event, CustomEvent)
    assert event.name == HANDOFF_EVENT
    assert event.value == {
        "from_agent": "triage",
        "to_agent": "billing",
        "reason": "an invoice",
    }


def test_the_service_shows_the_agent_in_charge(serve) -> None:
    def triage() -> Agent:
        model = ScriptedModel([calls(tool_call("transfer_to_billing")), "billing"])
        billing = Agent("billing", model=model, handoffs=["triage"])
        return Agent("triage", model=model, handoffs=[billing])

    served = serve({"triage": triage})
    with served.client() as client:
        session_id = client.post("/sessions", json={}).json()["session_id"]
        done = client.post(
            f"/sessions/{session_id}/prompts?wait=true", json={"text": "invoice?"}
        )
        assert done.status_code == 200, done.text
        read = client.get(f"/sessions/{session_id}").json()
        assert (read["agent_name"], read["agent_in_charge"]) == ("triage", "billing")
        (listed,) = client.get("/sessions").json()["sessions"]
        assert (listed["agent"], listed["agent_in_charge"]) == ("triage", "billing")
