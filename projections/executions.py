"""The executions view: one record per turn, for dashboards and audits.

Each record says how the turn ended (completed, failed, aborted, or still
running), how many model calls and tool calls it made, and the tokens it
spent. Records are keyed by the log position of their ``TurnStarted``;
only one turn of a session runs at a time, so a small pointer document
(position 0) says which record the turn's own events belong to.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import msgspec
from eventsourcing.persistence import Notification

from turnlog.domain import session as s
from turnlog.domain import turn as t
from turnlog.projections.rows import Rows, session_of


class Execution(msgspec.Struct):
    """How one turn went."""

    turn_id: str
    number: int
    submission_id: str
    sequence: int
    outcome: str = "running"
    reason: str | None = None
    model_calls: int = 0
    tool_calls: int = 0
    usage: dict[str, int] = msgspec.field(default_factory=dict)
    # datetimes, not ISO strings: formatted once at commit, not per event
    started_at: datetime | None = None
    ended_at: datetime | None = None


class ExecutionProjection:
    """Keeps one execution record per turn."""

    name = "executions"
    version = 2

    def fold(self, rows: Rows, notification: Notification, event: object) -> None:
        session_id = session_of(event)
        if session_id is None:
            return
        if isinstance(event, s.TurnStarted):
            record = Execution(
                turn_id=event.turn_id,
                number=event.number,
                submission_id=event.submission_id,
                sequence=notification.id,
                started_at=event.timestamp,
            )
            rows.put(session_id, notification.id, record)
            rows.put(session_id, 0, {"turn_id": event.turn_id, "at": notification.id})
            return
        pointer = rows.get(session_id, 0)
        if pointer is None:
            return
        turn_id = getattr(event, "turn_id", None) or str(
            getattr(event, "originator_id", "")
        )
        if turn_id != pointer["turn_id"]:
            return  # not about the running turn (session-wide events)
        doc = rows.get(session_id, pointer["at"])
        if doc is None:
            return
        record = doc if isinstance(doc, Execution) else msgspec.convert(doc, Execution)
        if _apply(record, event):
            rows.put(session_id, pointer["at"], record)


def _apply(record: Execution, event: Any) -> bool:
    match event:
        case t.ModelStepStarted():
            record.model_calls += 1
        case t.ToolCallStarted():
            record.tool_calls += 1
        case s.UsageRecorded(usage=usage) if usage:
            totals = dict(record.usage)
            for key, value in usage.items():
                totals[key] = totals.get(key, 0) + value
            record.usage = totals
        case s.TurnCompleted():
            record.outcome = "completed"
            record.ended_at = event.timestamp
        case s.TurnAborted(reason=reason, failed=failed):
            record.outcome = "failed" if failed else "aborted"
            record.reason = reason
            record.ended_at = event.timestamp
        case _:
            return False
    return True
