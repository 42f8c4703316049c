"""A handoff reaches an AG-UI client as a CUSTOM event naming the agents."""

from __future__ import annotations

from ag_ui.core import CustomEvent

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
