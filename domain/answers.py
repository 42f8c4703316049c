"""What a turn records about its final answer: accepted, or rejected.

An agent with an ``output_type`` or a ``final_answer`` hook has its final
answer checked before the turn completes. The check runs where the model
step's answer arrives (the TurnActor); what it found is a fact the turn
machine takes (:class:`~turnlog.domain.turn_facts.AnswerChecked`), and
the machine records one of these events on the Turn:

- ``AnswerRejected``: the answer was not JSON, did not validate, or a hook
  refused it. The reason goes back to the model (it is folded into the
  context as a developer message) while retries last; once they are
  spent, or when a hook stopped the turn, the turn ends without a result.
- ``AnswerAccepted``: the answer validated against the output type; its
  ``output`` is the validated JSON, the answer as recorded and replayed.

An agent with neither records neither: its turns are what they were.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from msgspec import UNSET

from turnlog.domain.events import TurnlogEvent
from turnlog.domain.turn import Turn

if TYPE_CHECKING:
    from turnlog.domain.turn_facts import AnswerChecked

ANSWER_FEEDBACK = (
    "Your final answer was rejected: {reason}\n"
    "Answer again, correcting it (attempt {next_attempt})."
)
"""The developer message that sends a rejected answer back to the model."""


class AnswerRejected(TurnlogEvent):
    """The final answer of model step ``step`` was refused (never delivered)."""

    step: int
    attempt: int
    """1 for the turn's first rejected answer, 2 for the next, ..."""
    rejected_by: str
    """``output_type`` (not JSON, or it failed validation) or the name of
    the middleware whose ``final_answer`` hook refused it."""
    reason: str
    """The validation error (naming the field) or the hook's reason."""
    final: bool = False
    """True when the turn ends here (retries spent, or a hook stopped it)."""

    def apply(self, aggregate: Turn) -> None:
        aggregate.answer_rejections = self.attempt


class AnswerAccepted(TurnlogEvent):
    """The final answer of model step ``step`` validated against the output type."""

    step: int
    output: Any
    """The validated answer as JSON data: what replay, the checkpoint and
    the service return, and what the typed object is rebuilt from."""


def reject_answer(
    turn: Turn, step: int, rejected_by: str, reason: str, *, final: bool
) -> int:
    """Records that the answer of ``step`` was refused; returns the attempt."""
    attempt = turn.answer_rejections + 1
    turn.trigger_event(
        AnswerRejected,
        step=step,
        attempt=attempt,
        rejected_by=rejected_by,
        reason=reason,
        final=final,
    )
    return attempt


def accept_answer(turn: Turn, step: int, output: Any) -> None:
    """Records the validated answer (JSON data) of ``step``."""
    turn.trigger_event(AnswerAccepted, step=step, output=output)


def answer_feedback(event: AnswerRejected) -> str:
    """The text that tells the model why its answer went back."""
    return ANSWER_FEEDBACK.format(reason=event.reason, next_attempt=event.attempt + 1)


Settled = Literal["deliver", "retry", "fail", "stop"]
"""What a checked answer comes to (see :func:`settle_answer`)."""


def settle_answer(turn: Turn, step: int, check: AnswerChecked, retries: int) -> Settled:
    """Records what a checked final answer comes to, and says which it is.

    Returns ``deliver`` (the turn completes with it), ``retry`` (it goes
    back to the model: the next step is due), ``fail`` (retries are spent:
    the turn fails with an OutputValidationError) or ``stop`` (a hook
    stopped the turn).
    """
    if check.stop is not None:
        reject_answer(turn, step, check.rejected_by, check.stop, final=True)
        return "stop"
    if check.rejection is not None:
        final = turn.answer_rejections >= retries
        reject_answer(turn, step, check.rejected_by, check.rejection, final=final)
        return "fail" if final else "retry"
    if check.output is not UNSET:
        accept_answer(turn, step, check.output)
    return "deliver"
