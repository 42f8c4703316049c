"""Rows of the turn machine's table (see test_turn_machine) for steering.

A steer queues; the calls of the running turn that have not started are
skipped (their approval requests withdrawn), and once none runs the next
step takes the steer in. Without ``parallel_tool_calls`` a step's calls
start one after another, so a steer skips those after the running one.
"""

from __future__ import annotations

from typing import Any

from turn_machine_support import (
    PROMPT,
    Given,
    Harness,
    calls,
    decide,
    finished,
    handoff_rules,
    prepared,
)

from turnlog.domain.turn_facts import Resumed, SteerArrived

STEER = SteerArrived("sub-2", "do this instead", [])
ONE_BY_ONE = {"parallel_tool_calls": False}


def steered(harness: Harness) -> None:
    harness.take(STEER)


def crashed_in_c1(harness: Harness) -> None:
    """What reopening after a crash records for c1, which was running."""
    turn = harness.held.turn
    assert turn is not None
    turn.finish_tool_call("c1", "interrupted; outcome unknown", is_error=True)
    turn.collect_events()


STEER_ROWS: list[tuple[str, dict[str, Any], Given, Any, list[str], list[str]]] = [
    (
        "a steer to an idle session waits in the queue",
        {},
        [],
        STEER,
        ["InputQueued"],
        [],
    ),
    (
        "a steer during a model call waits for the step's answer",
        {},
        [PROMPT],
        STEER,
        ["InputQueued"],
        [],
    ),
    (
        "a steer while every call runs skips none: they finish",
        {},
        [PROMPT, calls("echo", "echo")],
        STEER,
        ["InputQueued"],
        [],
    ),
    (
        "a step's answer after a steer starts none of its calls",
        {},
        [PROMPT, steered],
        calls("echo", "risky"),
        [
            "ModelStepCompleted",
            "UsageRecorded",
            "ToolCallFinished",
            "ToolCallFinished",
            "QueuedInputTaken",
            "InputAccepted",
            "ModelStepStarted",
        ],
        ["RunModelStep(2)"],
    ),
    (
        "a step's answer after a steer hands off to no one",
        {"handoffs": {"b": handoff_rules("b", ("lookup",))}},
        [PROMPT, steered],
        calls("transfer_to_b", "echo"),
        [
            "ModelStepCompleted",
            "UsageRecorded",
            "ToolCallFinished",
            "ToolCallFinished",
            "QueuedInputTaken",
            "InputAccepted",
            "ModelStepStarted",
        ],
        ["RunModelStep(2)"],
    ),
    (
        "one after another, a step starts its first call only",
        ONE_BY_ONE,
        [PROMPT],
        calls("echo", "echo", "echo"),
        ["ModelStepCompleted", "UsageRecorded", "ToolCallStarted"],
        ["RunToolCalls(c1)"],
    ),
    (
        "one after another, a call's output starts the next",
        ONE_BY_ONE,
        [PROMPT, calls("echo", "echo", "echo")],
        finished("c1"),
        ["ToolCallFinished", "ToolCallStarted"],
        ["RunToolCalls(c2)"],
    ),
    (
        "one after another, a steer skips the calls after the running one",
        ONE_BY_ONE,
        [PROMPT, calls("echo", "echo", "echo")],
        STEER,
        ["InputQueued", "ToolCallFinished", "ToolCallFinished"],
        [],
    ),
    (
        "the running call's output then makes the step that takes the steer",
        ONE_BY_ONE,
        [PROMPT, calls("echo", "echo", "echo"), steered],
        finished("c1"),
        ["ToolCallFinished", "QueuedInputTaken", "InputAccepted", "ModelStepStarted"],
        ["RunModelStep(2)"],
    ),
    (
        "one after another, a call waiting for approval holds up the next",
        ONE_BY_ONE,
        [PROMPT],
        calls("risky", "echo"),
        ["ModelStepCompleted", "UsageRecorded", "ApprovalRequested"],
        ["AskApprovals(c1)"],
    ),
    (
        "one after another, an allowed call starts in its turn",
        ONE_BY_ONE,
        [PROMPT, calls("risky", "echo")],
        decide("r1", "allow"),
        ["ApprovalDecided", "ToolCallStarted"],
        ["SettleApprovals(r1)", "RunToolCalls(c1)"],
    ),
    (
        "one after another, a denied call lets the next start",
        ONE_BY_ONE,
        [PROMPT, calls("risky", "echo")],
        decide("r1", "deny"),
        ["ApprovalDecided", "ToolCallFinished", "ToolCallStarted"],
        ["SettleApprovals(r1)", "RunToolCalls(c2)"],
    ),
    (
        "a steer withdraws a waiting request; the running call finishes",
        {},
        [PROMPT, calls("echo", "risky")],
        STEER,
        ["InputQueued", "ApprovalDecided", "ToolCallFinished"],
        ["SettleApprovals(r1)"],
    ),
    (
        "a steer withdraws the requests a turn waits on and makes its step",
        {},
        [PROMPT, calls("risky", "risky")],
        STEER,
        [
            "InputQueued",
            "ApprovalDecided",
            "ToolCallFinished",
            "ApprovalDecided",
            "ToolCallFinished",
            "QueuedInputTaken",
            "InputAccepted",
            "ModelStepStarted",
        ],
        ["SettleApprovals(r1,r2)", "RunModelStep(2)"],
    ),
    (
        "with middleware, a steer at approval has the next step prepared",
        {"middleware": True},
        [PROMPT, prepared(), calls("risky")],
        STEER,
        ["InputQueued", "ApprovalDecided", "ToolCallFinished"],
        ["SettleApprovals(r1)", "PrepareModelStep(2)"],
    ),
    (
        "one after another, a resumed turn starts the call whose turn came",
        ONE_BY_ONE,
        [PROMPT, calls("echo", "echo", "risky"), crashed_in_c1],
        Resumed(ask_approvals=True),
        ["ToolCallStarted"],
        ["BeginTurn(1)", "RunToolCalls(c2)", "AskApprovals(c3)"],
    ),
]
