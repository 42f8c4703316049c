"""The turn machine's handoffs, pure: (state, fact) -> (events, effects).

Agent "a" (tools echo and risky) hands off to "b" (tool lookup, route
``route-b``), which may hand back to "a". Each row plays facts to a state
and checks what one more fact records and asks for; every transition
taken is a row of the table in turn_machine (the harness checks it).
"""

from __future__ import annotations

from typing import Any

import pytest
from turn_machine_support import (
    PROMPT,
    USAGE,
    Given,
    Harness,
    calls,
    decide,
    finished,
    handoff_rules,
    harness_at,
    prepared,
)

from turnlog.domain.handoff import agent_in_charge
from turnlog.domain.model import ModelResponse, function_call
from turnlog.domain.protocol import Interrupt
from turnlog.domain.session_snapshot import SessionSnapshot
from turnlog.domain.turn_facts import StepSucceeded, TurnInput


def step2(*names: str) -> StepSucceeded:
    """Model step 2 calling ``names`` (call ids d1, d2...: c1 is step 1's)."""
    output = tuple(
        function_call(f"d{n}", name, "{}") for n, name in enumerate(names, 1)
    )
    return StepSucceeded(1, 2, ModelResponse(output, USAGE))


B = {"b": handoff_rules("b", ("lookup",))}
B_ONE_STEP = {"b": handoff_rules("b", ("lookup",), max_steps=1)}

ROWS: list[tuple[str, dict[str, Any], Given, Any, list[str], list[str]]] = [
    (
        "a handoff alone is answered and the next step is the new agent's",
        {"handoffs": B},
        [PROMPT],
        calls("transfer_to_b"),
        [
            "ModelStepCompleted",
            "UsageRecorded",
            "ToolCallFinished",
            "AgentHandedOff",
            "ModelStepStarted",
        ],
        ["SwitchAgent(b)", "RunModelStep(2)"],
    ),
    (
        "a handoff beside a tool call waits for it",
        {"handoffs": B},
        [PROMPT],
        calls("transfer_to_b", "echo"),
        [
            "ModelStepCompleted",
            "UsageRecorded",
            "ToolCallFinished",
            "AgentHandedOff",
            "ToolCallStarted",
        ],
        ["RunToolCalls(c2)"],
    ),
    (
        "the last call answered after a handoff switches to the new agent",
        {"handoffs": B},
        [PROMPT, calls("transfer_to_b", "echo")],
        finished("c2"),
        ["ToolCallFinished", "ModelStepStarted"],
        ["SwitchAgent(b)", "RunModelStep(2)"],
    ),
    (
        "a handoff beside a call waiting for approval waits for the decision",
        {"handoffs": B},
        [PROMPT, calls("transfer_to_b", "risky")],
        decide("r1", "deny"),
        ["ApprovalDecided", "ToolCallFinished", "ModelStepStarted"],
        ["SettleApprovals(r1)", "SwitchAgent(b)", "RunModelStep(2)"],
    ),
    (
        "of two handoffs in a step the first wins, the second is refused",
        {"handoffs": {**B, "c": handoff_rules("c", ())}},
        [PROMPT],
        calls("transfer_to_c", "transfer_to_b"),
        [
            "ModelStepCompleted",
            "UsageRecorded",
            "ToolCallFinished",
            "AgentHandedOff",
            "ToolCallFinished",
            "ModelStepStarted",
        ],
        ["SwitchAgent(c)", "RunModelStep(2)"],
    ),
    (
        "the new agent's hooks prepare its step",
        {"handoffs": {"b": handoff_rules("b", ("lookup",), middleware=True)}},
        [PROMPT],
        calls("transfer_to_b"),
        [
            "ModelStepCompleted",
            "UsageRecorded",
            "ToolCallFinished",
            "AgentHandedOff",
        ],
        ["SwitchAgent(b)", "PrepareModelStep(2)"],
    ),
    (
        "the old agent's hooks do not prepare the new agent's step",
        {"handoffs": B, "middleware": True},
        [PROMPT, prepared()],
        calls("transfer_to_b"),
        [
            "ModelStepCompleted",
            "UsageRecorded",
            "ToolCallFinished",
            "AgentHandedOff",
            "ModelStepStarted",
        ],
        ["SwitchAgent(b)", "RunModelStep(2)"],
    ),
    (
        "the new agent's rules apply: a's tool is unknown to b",
        {"handoffs": B},
        [PROMPT, calls("transfer_to_b")],
        step2("echo"),
        ["ModelStepCompleted", "UsageRecorded", "ToolCallFinished", "ModelStepStarted"],
        ["RunModelStep(3)"],
    ),
    (
        "the new agent's step limit applies",
        {"handoffs": B_ONE_STEP},
        [PROMPT],
        calls("transfer_to_b"),
        [
            "ModelStepCompleted",
            "UsageRecorded",
            "ToolCallFinished",
            "AgentHandedOff",
            "TurnAborted",
        ],
        [
            "SwitchAgent(b)",
            "EndTurn(failed, None, step limit reached)",
        ],
    ),
    (
        "a turn that ended before the switch hands over at the next input",
        {"handoffs": B},
        [PROMPT, calls("transfer_to_b", "echo"), Interrupt()],
        TurnInput("sub-2", "prompt", "again", []),
        ["TurnStarted", "TurnOpened", "InputAccepted", "ModelStepStarted"],
        ["SwitchAgent(b)", "BeginTurn(2)", "RunModelStep(1)"],
    ),
    (
        "b hands back to a",
        {"handoffs": B},
        [PROMPT, calls("transfer_to_b")],
        step2("transfer_to_a"),
        [
            "ModelStepCompleted",
            "UsageRecorded",
            "ToolCallFinished",
            "AgentHandedOff",
            "ModelStepStarted",
        ],
        ["SwitchAgent(a)", "RunModelStep(3)"],
    ),
]


@pytest.mark.parametrize(
    ("options", "given", "fact", "events", "effects"),
    [row[1:] for row in ROWS],
    ids=[row[0] for row in ROWS],
)
def test_handoff_transition(
    options: dict[str, Any],
    given: Given,
    fact: Any,
    events: list[str],
    effects: list[str],
) -> None:
    assert harness_at(options, given).take(fact) == (events, effects)


def test_the_handoff_records_who_why_and_the_new_route() -> None:
    harness = harness_at({"handoffs": B}, [PROMPT])
    fact = calls("transfer_to_b")
    reasoned = fact.response.output[0] | {"arguments": '{"reason": "an invoice"}'}
    harness.take(
        type(fact)(1, 1, type(fact.response)((reasoned,), fact.response.usage))
    )
    (handed,) = [e for e in harness.events if type(e).__name__ == "AgentHandedOff"]
    assert (handed.from_agent, handed.to_agent, handed.reason) == (
        "a",
        "b",
        "an invoice",
    )
    assert (handed.call_id, handed.model_route) == ("c1", "route-b")
    assert harness.held.session.handed_to == "b"
    assert harness.held.session.model_route == "route-b"
    answered = next(e for e in harness.events if type(e).__name__ == "ToolCallFinished")
    assert (answered.output, answered.is_error) == ('{"assistant":"b"}', False)
    started = next(e for e in harness.events if type(e).__name__ == "ModelStepStarted")
    assert started.route == "route-b"


def test_a_machine_without_handoff_rules_ignores_handoff_tools() -> None:
    # An agent without handoffs: transfer_to_b is an unknown tool.
    harness = Harness()
    harness.take(PROMPT)
    events, effects = harness.take(calls("transfer_to_b"))
    assert "AgentHandedOff" not in events
    assert effects == ["RunModelStep(2)"]


def test_the_agent_in_charge_survives_a_snapshot_and_older_ones_load() -> None:
    harness = harness_at({"handoffs": B}, [PROMPT, calls("transfer_to_b")])
    session = harness.held.session
    taken = SessionSnapshot.take(session).mutate(None)
    assert (taken.handed_to, taken.model_route) == ("b", "route-b")
    assert agent_in_charge(taken) == "b"
    older = SessionSnapshot.take(session)
    del older.state["handed_to"]  # a snapshot taken before handoffs existed
    assert agent_in_charge(older.mutate(None)) is None
