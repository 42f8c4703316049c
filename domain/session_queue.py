"""Events of a Session's queue: input that waits for its turn.

Input queued behind the running turn (a follow-up, a steer, input sent
while a turn runs) is recorded as it is queued, so it survives a crash;
its turn's ``InputAccepted`` records it again when the turn takes it.
``aggregate`` is a Session (typed ``Any``, as domain.lineage does, to keep
the import one way).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import field
from typing import Any

from turnlog.domain.events import TurnlogEvent


class InputQueued(TurnlogEvent):
    """Input was accepted to run after the current turn (a follow-up).

    Stored so that queued input survives a crash; its turn's
    ``InputAccepted`` records it again when the turn takes it. Its text is
    as the user_prompt hooks left it (``rewritten_by``, ``original_text``:
    as on InputAccepted).
    """

    submission_id: str
    kind: str
    text: str
    attachments: list[dict[str, Any]]
    input_id: str = ""
    """The caller's id for the input ("" if it gave none, and in histories
    recorded before input ids): a retry with it is answered, not queued."""
    input_digest: str = ""
    """Digest of the input as the caller asked for it (domain.input_ids)."""
    rewritten_by: Sequence[str] = field(default=(), kw_only=True)
    original_text: str | None = field(default=None, kw_only=True)

    def apply(self, aggregate: Any) -> None:
        queued: dict[str, Any] = {
            "submission_id": self.submission_id,
            "kind": self.kind,
            "text": self.text,
            "attachments": list(self.attachments),
            "input_id": self.input_id,
        }
        if self.rewritten_by:
            queued["rewritten_by"] = list(self.rewritten_by)
            queued["original_text"] = self.original_text
        aggregate.queued = [*aggregate.queued, queued]
        aggregate.note_input_id(self.input_id, self.input_digest, self.submission_id)


class QueuedInputTaken(TurnlogEvent):
    """A queued steer entered the running turn (its ``InputAccepted``)."""

    submission_id: str
    turn_id: str

    def apply(self, aggregate: Any) -> None:
        aggregate.queued = [
            q for q in aggregate.queued if q["submission_id"] != self.submission_id
        ] or ()


class QueuedInputDropped(TurnlogEvent):
    """Queued input was dropped before it ran (``interrupt(clear_queue=True)``)."""

    submission_ids: list[str]
    reason: str

    def apply(self, aggregate: Any) -> None:
        dropped = set(self.submission_ids)
        aggregate.queued = [
            q for q in aggregate.queued if q["submission_id"] not in dropped
        ] or ()
