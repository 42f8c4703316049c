"""The sessions index: one small document per session, for listings.

Id, when it was created, its last activity, how many turns, whether it
runs, is idle or is closed, and the tokens it has used.
"""

from __future__ import annotations

from datetime import datetime

import msgspec
from eventsourcing.persistence import Notification

from turnlog.domain import session as s
from turnlog.projections.rows import Rows, session_of, typed


class SessionSummary(msgspec.Struct):
    """A line of the sessions index."""

    session_id: str
    agent_name: str = ""
    # datetimes, not ISO strings: formatted once at commit, not per event
    created_at: datetime | None = None
    last_activity: datetime | None = None
    last_sequence: int = 0
    turns: int = 0
    status: str = "idle"
    usage: dict[str, int] = msgspec.field(default_factory=dict)


class SessionIndexProjection:
    """Keeps the sessions index."""

    name = "sessions"
    version = 2

    def fold(self, rows: Rows, notification: Notification, event: object) -> None:
        session_id = session_of(event)
        if session_id is None:
            return
        summary, _ = typed(
            rows.get(session_id, 0), SessionSummary, SessionSummary(session_id)
        )
        when = event.timestamp  # type: ignore[attr-defined]
        match event:
            case s.SessionCreated(agent_name=agent_name):
                summary.agent_name, summary.created_at = agent_name, when
            case s.TurnStarted(number=number):
                summary.turns, summary.status = number, "running"
            case s.TurnCompleted() | s.TurnAborted():
                summary.status = "idle"
            case s.SessionClosed():
                summary.status = "closed"
            case s.UsageRecorded(usage=usage) if usage:
                totals = dict(summary.usage)
                for key, value in usage.items():
                    totals[key] = totals.get(key, 0) + value
                summary.usage = totals
        summary.last_activity = when
        summary.last_sequence = notification.id
        rows.put(session_id, 0, summary)
