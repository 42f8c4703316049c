"""The turn machine on checked final answers: deliver, send back, fail, stop.

Rows as in ``test_turn_machine``: a machine brought to a state by the
given facts, then one more fact, and the events and effects it gives.
What checking an answer found arrives with the step (``StepSucceeded.
answer``); the machine alone decides what it comes to.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from turn_machine_support import (
    PROMPT,
    Given,
    answer,
    calls,
    finished,
    harness_at,
    prepared,
)

from turnlog.domain.answers import AnswerRejected
from turnlog.domain.turn_facts import AnswerChecked, EndTurn, StepSucceeded

VALID = AnswerChecked(output={"city": "Oslo"})
INVALID = AnswerChecked(
    rejection="answer.city: Field required", rejected_by="output_type"
)


def checked(check: AnswerChecked, step: int = 1, text: str = "{}") -> StepSucceeded:
    return msgspec.structs.replace(answer(text, step), answer=check)


ROWS: list[tuple[str, dict[str, Any], Given, Any, list[str], list[str]]] = [
    (
        "a valid answer is recorded with the turn's completion",
        {},
        [PROMPT],
        checked(VALID),
        ["ModelStepCompleted", "UsageRecorded", "AnswerAccepted", "TurnCompleted"],
        ["EndTurn(completed, {}, None, settled)"],
    ),
    (
        "an answer only hooks checked records no AnswerAccepted",
        {},
        [PROMPT],
        checked(AnswerChecked()),
        ["ModelStepCompleted", "UsageRecorded", "TurnCompleted"],
        ["EndTurn(completed, {}, None, settled)"],
    ),
    (
        "an invalid answer goes back to the model at once",
        {},
        [PROMPT],
        checked(INVALID),
        ["ModelStepCompleted", "UsageRecorded", "AnswerRejected", "ModelStepStarted"],
        ["RunModelStep(2)"],
    ),
    (
        "an invalid answer goes back through the hooks with middleware",
        {"middleware": True},
        [PROMPT, prepared()],
        checked(INVALID),
        ["ModelStepCompleted", "UsageRecorded", "AnswerRejected"],
        ["PrepareModelStep(2)"],
    ),
    (
        "the last retry spent fails the turn naming the field",
        {"output_retries": 1},
        [PROMPT, checked(INVALID)],
        checked(INVALID, step=2),
        ["ModelStepCompleted", "UsageRecorded", "AnswerRejected", "TurnAborted"],
        ["EndTurn(failed, None, OutputValidationError: answer.city: Field required)"],
    ),
    (
        "no retries: the first invalid answer fails the turn",
        {"output_retries": 0},
        [PROMPT],
        checked(INVALID),
        ["ModelStepCompleted", "UsageRecorded", "AnswerRejected", "TurnAborted"],
        ["EndTurn(failed, None, OutputValidationError: answer.city: Field required)"],
    ),
    (
        "a hook that stops the turn: the answer is refused, the turn aborted",
        {},
        [PROMPT],
        checked(AnswerChecked(VALID.output, stop="off topic", rejected_by="guard")),
        ["ModelStepCompleted", "UsageRecorded", "AnswerRejected", "TurnAborted"],
        ["EndTurn(aborted, None, answer stopped: off topic)"],
    ),
    (
        "an answer that comes with tool calls is not an answer yet",
        {},
        [PROMPT],
        msgspec.structs.replace(calls("echo"), answer=INVALID),
        ["ModelStepCompleted", "UsageRecorded", "ToolCallStarted"],
        ["RunToolCalls(c1)"],
    ),
]


@pytest.mark.parametrize(
    ("options", "given", "fact", "events", "effects"),
    [row[1:] for row in ROWS],
    ids=[row[0] for row in ROWS],
)
def test_answer_transition(
    options: dict[str, Any],
    given: Given,
    fact: Any,
    events: list[str],
    effects: list[str],
) -> None:
    harness = harness_at(options, given)
    assert harness.take(fact) == (events, effects)


def test_a_delivered_answer_carries_its_json_to_the_turns_end() -> None:
    harness = harness_at({}, [PROMPT])
    (end,) = harness.machine.take(checked(VALID)).effects
    assert isinstance(end, EndTurn)
    assert end.output == {"city": "Oslo"}


def test_an_unchecked_answer_ends_the_turn_without_output() -> None:
    harness = harness_at({}, [PROMPT])
    (end,) = harness.machine.take(answer("plain text")).effects
    assert isinstance(end, EndTurn)
    assert end.output is msgspec.UNSET


def test_rejections_are_numbered_and_the_model_is_told_why() -> None:
    harness = harness_at({"output_retries": 2}, [PROMPT])
    harness.take(checked(INVALID))
    (first,) = [e for e in harness.events if isinstance(e, AnswerRejected)]
    assert (first.attempt, first.final, first.rejected_by) == (1, False, "output_type")
    feedback = harness.held.context[-1]
    assert feedback["role"] == "developer"
    assert feedback["turnlog_kind"] == "answer_rejected"
    assert "answer.city: Field required" in feedback["content"]
    harness.take(checked(INVALID, step=2))
    (second,) = [e for e in harness.events if isinstance(e, AnswerRejected)]
    assert (second.attempt, second.final) == (2, False)
    _, effects = harness.take(checked(INVALID, step=3))
    (third,) = [e for e in harness.events if isinstance(e, AnswerRejected)]
    assert (third.attempt, third.final) == (3, True)
    assert effects[0].startswith("EndTurn(failed")
    # the refusal that ended the turn asks the model for nothing more
    assert harness.held.context[-1] == {
        "type": "message",
        "role": "assistant",
        "content": "{}",
    }


def test_a_stale_checked_answer_is_ignored() -> None:
    harness = harness_at({}, [PROMPT, checked(VALID)])
    assert harness.take(checked(INVALID, step=1)) == ([], [])


def test_finished_tools_then_a_checked_answer() -> None:
    harness = harness_at({}, [PROMPT, calls("echo"), finished("c1")])
    events, effects = harness.take(checked(VALID, step=2))
    assert events[-2:] == ["AnswerAccepted", "TurnCompleted"]
    assert effects == ["EndTurn(completed, {}, None, settled)"]
