"""Compaction: a turn's model context replaced by a compactor's summary.

Hooks that prepare a model step may compact the context first (the
machine's ``CompactionBegan`` and ``StepPrepared`` facts). These events
record it on the Turn, one compaction at a time: ``CompactionStarted``,
then ``ContextCompacted`` (its ``items`` are the context from then on),
``CompactionFailed`` or ``CompactionCancelled`` (the context unchanged).
The Session records the new context epoch (``ContextRewritten``).
"""

from __future__ import annotations

from turnlog.domain.errors import InvariantViolation
from turnlog.domain.events import TurnlogEvent
from turnlog.domain.model import Item
from turnlog.domain.turn import Turn


class CompactionStarted(TurnlogEvent):
    """The context is being compacted (the notice is pending)."""

    compaction_id: str
    reason: str

    def apply(self, aggregate: Turn) -> None:
        aggregate.compaction_open = self.compaction_id


class ContextCompacted(TurnlogEvent):
    """The context was replaced by ``items`` (the compactor's output)."""

    compaction_id: str
    items: list[Item]
    usage: dict[str, int] | None

    def apply(self, aggregate: Turn) -> None:
        aggregate.compaction_open = None


class CompactionFailed(TurnlogEvent):
    """Compaction failed; the context is unchanged."""

    compaction_id: str
    message: str

    def apply(self, aggregate: Turn) -> None:
        aggregate.compaction_open = None


class CompactionCancelled(TurnlogEvent):
    """Compaction was cancelled (the turn was interrupted); nothing changed."""

    compaction_id: str

    def apply(self, aggregate: Turn) -> None:
        aggregate.compaction_open = None


def start_compaction(turn: Turn, compaction_id: str, reason: str) -> None:
    """Records that compaction began on ``turn`` (one at a time)."""
    if turn.compaction_open is not None:
        msg = f"compaction {turn.compaction_open!r} is still open"
        raise InvariantViolation(msg)
    turn.trigger_event(CompactionStarted, compaction_id=compaction_id, reason=reason)


def _check_open(turn: Turn, compaction_id: str) -> None:
    if turn.compaction_open != compaction_id:
        msg = f"compaction {compaction_id!r} is not open"
        raise InvariantViolation(msg)


def finish_compaction(
    turn: Turn, compaction_id: str, items: list[Item], usage: dict[str, int] | None
) -> None:
    """Records the compacted context that replaces the old one."""
    _check_open(turn, compaction_id)
    turn.trigger_event(
        ContextCompacted, compaction_id=compaction_id, items=items, usage=usage
    )


def fail_compaction(turn: Turn, compaction_id: str, message: str) -> None:
    """Records that compaction failed; the context stays as it was."""
    _check_open(turn, compaction_id)
    turn.trigger_event(CompactionFailed, compaction_id=compaction_id, message=message)


def cancel_compaction(turn: Turn, compaction_id: str) -> None:
    """Records that compaction was cancelled; the context stays as it was."""
    _check_open(turn, compaction_id)
    turn.trigger_event(CompactionCancelled, compaction_id=compaction_id)
