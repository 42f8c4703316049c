"""Runs, as the interactive session reports them.

A run starts when an idle session takes input and ends when the session is
idle again: a prompt and the follow-ups queued behind it form one run.
These events wrap the protocol's ``Event`` stream for subscribers of the
interactive surface; they are derived, not stored.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from turnlog.domain.protocol import Event

RunStatus = Literal["completed", "failed", "aborted"]


class RunResult(msgspec.Struct, frozen=True):
    """How a run ended."""

    session_id: str
    submission_id: str
    status: RunStatus
    final_output: str | None
    turn_ids: tuple[str, ...]
    shared_state: dict[str, Any]
    usage: dict[str, int]
    error: str | None = None

    @property
    def completed(self) -> bool:
        """Whether the run's last turn completed normally."""
        return self.status == "completed"


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
