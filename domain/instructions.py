"""The instructions a model step was sent, where a function gave them.

An agent's instructions may be a function of the run (see
``turnlog.Agent``); it is evaluated before each model step and what it
gave is recorded on the turn, next to the step's start, so an audit shows
what the model saw. Static instructions are not recorded per step: they
are the agent's, named by its digest.
"""

from __future__ import annotations

from typing import Any

from turnlog.domain.errors import InvariantViolation
from turnlog.domain.events import TurnlogEvent


class InstructionsEvaluated(TurnlogEvent):
    """The agent's instructions function gave ``instructions`` for ``step``."""

    step: int
    """The model step they were sent with."""
    instructions: str
    """The text sent as the step's system instructions."""


def record_instructions(turn: Any, step: int, instructions: str | None) -> None:
    """Records on ``turn`` (a Turn) the instructions of its running ``step``.

    None (static instructions, the agent's) records nothing.
    """
    if instructions is None:
        return
    if not turn.step_open or step != turn.steps:
        msg = f"model step {step} is not running"
        raise InvariantViolation(msg)
    turn.trigger_event(InstructionsEvaluated, step=step, instructions=instructions)
