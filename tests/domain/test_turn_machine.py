"""The turn machine, pure: (state, fact) -> (events, effects); no actor, thread, store.

Each row of ``ROWS`` starts a machine, plays the facts that bring it to a
state, then checks the events one more fact triggers (in the order they
would be saved) and the effects it asks for. Every transition a machine
takes must be a row of the table at the top of ``turn_machine``; the last
test checks that the rows here took every one of them.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from turn_machine_steer_rows import STEER_ROWS
from turn_machine_support import (
    PROMPT,
    Given,
    Harness,
    answer,
    calls,
    compaction,
    decide,
    finished,
    harness_at,
    matches,
    prepared,
    queued,
    table,
)

from turnlog.domain.errors import UsageError
from turnlog.domain.protocol import Interrupt
from turnlog.domain.turn_facts import (
    ApprovalProviderFailed,
    CompactionBegan,
    Decide,
    InputReviewed,
    Resumed,
    StepFailed,
    TurnActorFailed,
    TurnFailed,
)

# (id, harness options, given, fact, events, effects)
ROWS: list[tuple[str, dict[str, Any], Given, Any, list[str], list[str]]] = [
    (
        "input starts the first step at once without middleware",
        {},
        [],
        PROMPT,
        ["TurnStarted", "TurnOpened", "InputAccepted", "ModelStepStarted"],
        ["BeginTurn(1)", "RunModelStep(1)"],
    ),
    (
        "input has its first step prepared with middleware",
        {"middleware": True},
        [],
        PROMPT,
        ["TurnStarted", "TurnOpened", "InputAccepted"],
        ["BeginTurn(1)", "PrepareModelStep(1)"],
    ),
    (
        "input is reviewed before it is recorded",
        {"reviews": True},
        [],
        PROMPT,
        ["TurnStarted", "TurnOpened"],
        ["BeginTurn(1)", "ReviewPrompt(hi)"],
    ),
    (
        "queued input its hooks stopped ends its turn at once",
        {"reviews": True},
        [],
        msgspec.structs.replace(
            PROMPT, reviewed=((("user_prompt_hook", "noted"),), "enough")
        ),
        [
            "TurnStarted",
            "TurnOpened",
            "InputAccepted",
            "HookContextAdded",
            "WarningRaised",
            "TurnCompleted",
        ],
        ["BeginTurn(1)", "EndTurn(completed, None, None)"],
    ),
    (
        "reviewed input is recorded and its step prepared",
        {"reviews": True},
        [PROMPT],
        InputReviewed(1, None, (("user_prompt_hook", "noted"),), None, None),
        ["InputAccepted", "HookContextAdded"],
        ["PrepareModelStep(1)"],
    ),
    (
        "rejected input leaves only its rejection",
        {"reviews": True},
        [PROMPT],
        InputReviewed(1, "not allowed", (), None, None),
        ["InputRejected", "TurnAborted"],
        ["EndTurn(aborted, None, not allowed)"],
    ),
    (
        "a failed review fails the turn",
        {"reviews": True},
        [PROMPT],
        InputReviewed(1, None, (), None, "hook broke"),
        ["TurnAborted"],
        ["EndTurn(failed, None, turn failed: hook broke)"],
    ),
    (
        "a review that stops completes the turn with the input recorded",
        {"reviews": True},
        [PROMPT],
        InputReviewed(1, None, (), "stop here", None),
        ["InputAccepted", "WarningRaised", "TurnCompleted"],
        ["EndTurn(completed, None, None)"],
    ),
    (
        "compaction began while preparing",
        {"middleware": True},
        [PROMPT],
        CompactionBegan(1, "k1", "context too long"),
        ["CompactionStarted"],
        [],
    ),
    (
        "a prepared step records the compaction and starts",
        {"middleware": True},
        [PROMPT, CompactionBegan(1, "k1", "context too long")],
        prepared((("session_start_hook", "hello"),), compaction()),
        [
            "HookContextAdded",
            "ContextCompacted",
            "ContextRewritten",
            "UsageRecorded",
            "ModelStepStarted",
        ],
        ["RunModelStep(1)"],
    ),
    (
        "a prepared step takes the queued steers in",
        {"middleware": True},
        [PROMPT, queued],
        prepared(),
        ["QueuedInputTaken", "InputAccepted", "ModelStepStarted"],
        ["RunModelStep(1)"],
    ),
    (
        "a prepared step records the instructions a function gave it",
        {"middleware": True},
        [PROMPT],
        msgspec.structs.replace(prepared(), instructions="Be kind."),
        ["ModelStepStarted", "InstructionsEvaluated"],
        ["RunModelStep(1)"],
    ),
    (
        "a failed preparation fails its compaction and the turn",
        {"middleware": True},
        [PROMPT, CompactionBegan(1, "k1", "context too long")],
        prepared(compaction=compaction(), error="compactor broke"),
        ["UsageRecorded", "CompactionFailed", "TurnAborted"],
        ["EndTurn(failed, None, turn failed: compactor broke)"],
    ),
    (
        "a preparation that stops completes the turn",
        {"middleware": True},
        [PROMPT],
        prepared(stop="stop here"),
        ["WarningRaised", "TurnCompleted"],
        ["EndTurn(completed, None, None)"],
    ),
    (
        "an answer completes the turn, with nothing left in flight",
        {},
        [PROMPT],
        answer("done"),
        ["ModelStepCompleted", "UsageRecorded", "TurnCompleted"],
        ["EndTurn(completed, done, None, settled)"],
    ),
    (
        "a call is recorded as started and run",
        {},
        [PROMPT],
        calls("echo"),
        ["ModelStepCompleted", "UsageRecorded", "ToolCallStarted"],
        ["RunToolCalls(c1)"],
    ),
    (
        "a call that needs approval waits beside one that runs",
        {},
        [PROMPT],
        calls("echo", "risky"),
        ["ModelStepCompleted", "UsageRecorded", "ToolCallStarted", "ApprovalRequested"],
        ["RunToolCalls(c1)", "AskApprovals(c2)"],
    ),
    (
        "a call of an unknown tool is answered and the next step starts",
        {},
        [PROMPT],
        calls("nope"),
        ["ModelStepCompleted", "UsageRecorded", "ToolCallFinished", "ModelStepStarted"],
        ["RunModelStep(2)"],
    ),
    (
        "a call of an unknown tool has the next step prepared",
        {"middleware": True},
        [PROMPT, prepared()],
        calls("nope"),
        ["ModelStepCompleted", "UsageRecorded", "ToolCallFinished"],
        ["PrepareModelStep(2)"],
    ),
    (
        "a call of an unknown tool at the step limit fails the turn",
        {"max_steps": 1},
        [PROMPT],
        calls("nope"),
        ["ModelStepCompleted", "UsageRecorded", "ToolCallFinished", "TurnAborted"],
        ["EndTurn(failed, None, step limit reached)"],
    ),
    (
        "a pre_tool hook that stops answers every call and ends the turn",
        {"middleware": True},
        [PROMPT, prepared()],
        calls("echo", "risky", stop="no tools today"),
        [
            "HookContextAdded",
            "ModelStepCompleted",
            "UsageRecorded",
            "ToolCallFinished",
            "ToolCallFinished",
            "WarningRaised",
            "TurnCompleted",
        ],
        ["EndTurn(completed, None, None, settled)"],
    ),
    (
        "a failed model step fails the turn",
        {},
        [PROMPT],
        StepFailed(1, 1, "ProviderError", "down"),
        ["ModelStepFailed", "TurnAborted"],
        ["EndTurn(failed, None, model step failed: ProviderError: down)"],
    ),
    (
        "a tool's output with another call still running",
        {},
        [PROMPT, calls("echo", "echo")],
        finished("c1"),
        ["ToolCallFinished"],
        [],
    ),
    (
        "the last tool output starts the next step",
        {},
        [PROMPT, calls("echo")],
        finished("c1"),
        ["ToolCallFinished", "ModelStepStarted"],
        ["RunModelStep(2)"],
    ),
    (
        "the last tool output, with post_tool context, has the next step prepared",
        {"middleware": True},
        [PROMPT, prepared(), calls("echo")],
        finished("c1", post_context="looked fine"),
        ["ToolCallFinished", "HookContextAdded"],
        ["PrepareModelStep(2)"],
    ),
    (
        "a failed post_tool hook cancels the other calls and fails the turn",
        {"middleware": True},
        [PROMPT, prepared(), calls("echo", "echo")],
        finished("c1", hook_error="post broke"),
        ["ToolCallFinished", "ToolCallFinished", "TurnAborted"],
        ["EndTurn(failed, None, turn failed: post broke)"],
    ),
    (
        "the step limit fails the turn once the last call is answered",
        {"max_steps": 1},
        [PROMPT, calls("echo")],
        finished("c1"),
        ["ToolCallFinished", "TurnAborted"],
        ["EndTurn(failed, None, step limit reached)"],
    ),
    (
        "a tool's output while another call waits for approval",
        {},
        [PROMPT, calls("echo", "risky")],
        finished("c1"),
        ["ToolCallFinished"],
        [],
    ),
    (
        "an allowed call starts",
        {},
        [PROMPT, calls("risky")],
        decide("r1", "allow"),
        ["ApprovalDecided", "ToolCallStarted"],
        ["SettleApprovals(r1)", "RunToolCalls(c1)"],
    ),
    (
        "an allowed call starts while another waits",
        {},
        [PROMPT, calls("risky", "risky")],
        decide("r1", "allow"),
        ["ApprovalDecided", "ToolCallStarted"],
        ["SettleApprovals(r1)", "RunToolCalls(c1)"],
    ),
    (
        "allowing a tool for the session allows its other waiting calls",
        {},
        [PROMPT, calls("risky", "risky")],
        decide("r1", "allow_session"),
        [  # every call decided first, then started as it is handed over
            "ApprovalDecided",
            "ToolAllowedForSession",
            "ApprovalDecided",
            "ToolCallStarted",
            "ToolCallStarted",
        ],
        ["SettleApprovals(r1,r2)", "RunToolCalls(c1,c2)"],
    ),
    (
        "a denied last call starts the next step",
        {},
        [PROMPT, calls("risky")],
        decide("r1", "deny"),
        ["ApprovalDecided", "ToolCallFinished", "ModelStepStarted"],
        ["SettleApprovals(r1)", "RunModelStep(2)"],
    ),
    (
        "a denied last call has the next step prepared",
        {"middleware": True},
        [PROMPT, prepared(), calls("risky")],
        decide("r1", "deny"),
        ["ApprovalDecided", "ToolCallFinished"],
        ["SettleApprovals(r1)", "PrepareModelStep(2)"],
    ),
    (
        "a timed-out request is answered while another waits",
        {},
        [PROMPT, calls("risky", "risky")],
        Decide("r1", "timeout", "timeout"),
        ["ApprovalDecided", "ToolCallFinished"],
        ["SettleApprovals(r1)"],
    ),
    (
        "an abort at approval cancels the running call and aborts the turn",
        {},
        [PROMPT, calls("echo", "risky")],
        decide("r1", "abort"),
        ["ApprovalDecided", "ToolCallFinished", "ToolCallFinished", "TurnAborted"],
        ["SettleApprovals(r1)", "EndTurn(aborted, None, aborted at approval)"],
    ),
    (
        "a failing approval provider fails the turn: its call does not run",
        {},
        [PROMPT, calls("echo", "risky")],
        ApprovalProviderFailed("r1", "RuntimeError: down"),
        ["ApprovalFailed", "ToolCallFinished", "ToolCallFinished", "TurnAborted"],
        [
            "SettleApprovals(r1)",
            "EndTurn(failed, None, approval provider failed: RuntimeError: down)",
        ],
    ),
    (
        "an interrupt fails the running step and drops queued input",
        {},
        [PROMPT, lambda h: h.queue("sub-2", "follow_up", "later")],
        Interrupt(clear_queue=True),
        ["ModelStepFailed", "TurnAborted", "QueuedInputDropped"],
        ["EndTurn(aborted, None, interrupted)"],
    ),
    (
        "an interrupt cancels the compaction under way",
        {"middleware": True},
        [PROMPT, CompactionBegan(1, "k1", "context too long")],
        Interrupt(),
        ["CompactionCancelled", "TurnAborted"],
        ["EndTurn(aborted, None, interrupted)"],
    ),
    (
        "an interrupt during review",
        {"reviews": True},
        [PROMPT],
        Interrupt(),
        ["TurnAborted"],
        ["EndTurn(aborted, None, interrupted)"],
    ),
    (
        "a dead TurnActor fails the turn, cancelling its calls",
        {},
        [PROMPT, calls("echo")],
        TurnActorFailed(1, "it died"),
        ["ToolCallFinished", "TurnAborted"],
        ["EndTurn(failed, None, turn failed: it died)"],
    ),
    (
        "a failure to record fails the turn, settling its approvals",
        {},
        [PROMPT, calls("risky")],
        TurnFailed("turn failed: StoreError: disk full"),
        ["ApprovalDecided", "ToolCallFinished", "TurnAborted"],
        ["EndTurn(failed, None, turn failed: StoreError: disk full)"],
    ),
    (
        "a turn resumed by a new actor runs its open calls and asks again",
        {},
        [PROMPT, calls("echo", "risky")],
        Resumed(ask_approvals=True),
        [],
        ["BeginTurn(1)", "RunToolCalls(c1)", "AskApprovals(c2)"],
    ),
    (
        "a turn resumed after passivating leaves its requests with the broker",
        {},
        [PROMPT, calls("echo", "risky")],
        Resumed(ask_approvals=False),
        [],
        ["BeginTurn(1)", "RunToolCalls(c1)"],
    ),
    *STEER_ROWS,
]


def run_row(
    options: dict[str, Any], given: Given, fact: Any
) -> tuple[tuple[list[str], list[str]], set[tuple[str, str, str]]]:
    """The row's (events, effects), and every transition its machines took."""
    harness = harness_at(options, given)
    taken = set(harness.machine.taken)
    if isinstance(fact, Resumed):  # as a new SessionActor's machine would
        harness = Harness(**options, held=harness.held)
    result = harness.take(fact)
    return result, taken | harness.machine.taken


@pytest.mark.parametrize(
    ("options", "given", "fact", "events", "effects"),
    [row[1:] for row in ROWS],
    ids=[row[0] for row in ROWS],
)
def test_transition(
    options: dict[str, Any],
    given: Given,
    fact: Any,
    events: list[str],
    effects: list[str],
) -> None:
    assert run_row(options, given, fact)[0] == (events, effects)


def test_every_transition_in_the_table_is_taken_by_a_row() -> None:
    # As sdk-core's transition_coverage.rs: a row of the table no test
    # takes is a behaviour no test pins down.
    taken: set[tuple[str, str, str]] = set()
    for _name, options, given, fact, _events, _effects in ROWS:
        taken |= run_row(options, given, fact)[1]
    missing = [row for row in table() if not any(matches(row, t) for t in taken)]
    assert missing == []


def test_the_instructions_a_function_gave_go_with_the_step_they_were_for() -> None:
    harness = harness_at({"middleware": True}, [PROMPT])
    fact = msgspec.structs.replace(prepared(), instructions="Be kind.")
    transition = harness.machine.take(fact)
    [effect] = transition.effects
    assert (effect.step, effect.instructions) == (1, "Be kind.")  # type: ignore[union-attr]
    evaluated = harness.held.turn.collect_events()[-1]  # type: ignore[union-attr]
    assert (evaluated.step, evaluated.instructions) == (1, "Be kind.")


def test_a_provider_failure_after_a_decision_changes_nothing() -> None:
    harness = harness_at({}, [PROMPT, calls("risky"), decide("r1", "deny")])
    turn = harness.held.turn
    assert turn is not None
    before = len(turn.pending_events)
    with pytest.raises(UsageError, match="not pending"):
        harness.machine.take(ApprovalProviderFailed("r1", "RuntimeError: late"))
    assert len(turn.pending_events) == before  # the deny stands, nothing added
