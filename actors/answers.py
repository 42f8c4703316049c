"""Checking a final answer: the output type, then the final_answer hooks.

Runs where the model step's answer arrives (a TurnActor coroutine on the
I/O loop), for an agent with an ``output_type`` or a ``final_answer``
hook; what it finds travels to the session in the step's fact
(``StepSucceeded.answer``) and the turn machine decides: deliver, send
back, or end the turn (domain.answers).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from turnlog.actors.contracts import AnswerFormat
from turnlog.actors.hooks import implements, run_hook
from turnlog.domain.errors import OutputValidationError
from turnlog.domain.hooks import AnswerInfo
from turnlog.domain.turn_facts import AnswerChecked

OUTPUT_TYPE = "output_type"
"""Who refused an answer that was not JSON or did not validate."""


class AnswerCheck:
    """How one agent's final answers are checked (made once per turn)."""

    def __init__(self, answer_format: AnswerFormat | None, layers: Sequence[Any]):
        self._format = answer_format
        self._layers = tuple(
            layer for layer in layers if implements(layer, "final_answer")
        )
        self.needed = answer_format is not None or bool(self._layers)
        """Whether the agent's answers are checked at all (if not, a step's
        answer costs nothing more than it did before)."""

    async def check(
        self, session_id: str, turn_id: str, step: int, text: str | None
    ) -> AnswerChecked:
        """What the output type and the hooks make of the answer ``text``."""
        typed: Any = None
        data: Any = msgspec.UNSET
        if self._format is not None:
            if text is None:
                reason = "answer: the model gave no final answer"
                return AnswerChecked(rejection=reason, rejected_by=OUTPUT_TYPE)
            try:
                typed, data = self._format.check(text)
            except OutputValidationError as invalid:
                return AnswerChecked(rejection=str(invalid), rejected_by=OUTPUT_TYPE)
        info = AnswerInfo(session_id, turn_id, step, text or "", typed)
        for layer in self._layers:
            result = await run_hook(layer, "final_answer", info)
            if result is None:
                continue
            name = str(getattr(layer, "name", type(layer).__name__))
            if result.stop is not None:
                return AnswerChecked(data, stop=result.stop, rejected_by=name)
            if result.reject is not None:
                return AnswerChecked(data, rejection=result.reject, rejected_by=name)
        return AnswerChecked(data)
