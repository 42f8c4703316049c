"""Runs, as the interactive session reports them.

A run starts when an idle session takes input and ends when the session is
idle again: a prompt and the follow-ups queued behind it form one run.
These events wrap the protocol's ``Event`` stream for subscribers of the
interactive surface; they are derived, not stored.
"""

from __future__ import annotations

from typing import Any, Literal, TypeVar

import msgspec

from turnlog.domain.errors import OutputValidationError
from turnlog.domain.protocol import Event

_REJECTED = "OutputValidationError: "
"""How a run's error starts when its answer was refused for good."""

T = TypeVar("T")

RunStatus = Literal["completed", "failed", "aborted"]


class RunResult(msgspec.Struct, frozen=True):
    """How a run ended.

    Where a typed answer lives: the log records it as JSON (the Turn's
    ``AnswerAccepted``); the session's actor puts that JSON here as
    ``output_json`` and, with the agent's ``output_type``, the object
    built from it as ``typed_output``. ``output`` is the one to read: the
    typed object, or the text for an agent without an output type. A
    session reopened elsewhere rebuilds the same object from the log
    (``AgentSession.last_output()``).
    """

    session_id: str
    submission_id: str
    status: RunStatus
    final_output: str | None
    turn_ids: tuple[str, ...]
    shared_state: dict[str, Any]
    usage: dict[str, int]
    error: str | None = None
    output_json: object = msgspec.UNSET
    """The last turn's answer as recorded (the validated JSON data), for an
    agent with an ``output_type``; UNSET for any other."""
    typed_output: object = msgspec.UNSET
    """That answer as the agent's ``output_type`` (built from
    ``output_json``); in memory only, never serialized (see ``as_json``)."""

    @property
    def completed(self) -> bool:
        """Whether the run's last turn completed normally."""
        return self.status == "completed"

    @property
    def output(self) -> object:
        """The answer: an object of the agent's ``output_type`` (validated),
        or the text (``final_output``) for an agent without one.

        Raises:
            OutputValidationError: the run failed because no answer of the
                model validated (retries included); it names the field.
        """
        if self.error is not None and self.error.startswith(_REJECTED):
            raise OutputValidationError(self.error.removeprefix(_REJECTED))
        if self.typed_output is msgspec.UNSET:
            return self.final_output
        return self.typed_output

    def output_as(self, kind: type[T]) -> T:
        """``output``, checked to be a ``kind`` (the agent's output_type, when
        it is a class): the typed answer, typed for the type checker too.

        Raises:
            OutputValidationError: as ``output`` does.
            TypeError: the answer is not a ``kind``.
        """
        answer = self.output
        if not isinstance(answer, kind):
            msg = f"the answer is a {type(answer).__name__}, not a {kind.__name__}"
            raise TypeError(msg)
        return answer

    def as_json(self) -> dict[str, Any]:
        """The result as JSON data; ``output`` is the recorded answer, when
        the agent has an output type."""
        plain = msgspec.structs.replace(
            self, output_json=msgspec.UNSET, typed_output=msgspec.UNSET
        )
        fields: dict[str, Any] = msgspec.to_builtins(plain)
        if self.output_json is not msgspec.UNSET:
            fields["output"] = self.output_json
        return fields


class QueuedInput(msgspec.Struct, frozen=True):
    """Input waiting for its turn (queued behind a run, or for the next one)."""

    submission_id: str
    kind: str
    text: str


class RunStarted(msgspec.Struct, frozen=True, tag="run_started"):
    """An idle session took input and started running."""

    session_id: str
    submission_id: str


class RunEvent(msgspec.Struct, frozen=True, tag="run_event"):
    """One protocol event of the running session."""

    session_id: str
    event: Event


class RunFinished(msgspec.Struct, frozen=True, tag="run_finished"):
    """The session is idle again."""

    session_id: str
    status: RunStatus
    result: RunResult


class EventsMissed(msgspec.Struct, frozen=True, tag="events_missed"):
    """The subscriber fell behind and ``count`` events were dropped for it."""

    session_id: str
    count: int


SessionEvent = RunStarted | RunEvent | RunFinished | EventsMissed
