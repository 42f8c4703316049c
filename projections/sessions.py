"""The sessions index: one small document per session, for listings.

Id, when it was created, its last activity, how many turns, whether it
runs, is idle or is closed, and the tokens it has used.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import msgspec

from turnlog.domain import session as s
from turnlog.projections.rows import Entries, Rows, add_usage, typed


class SessionSummary(msgspec.Struct, gc=False):
    """A line of the sessions index.

    Plain data (``gc=False``: never part of a reference cycle), so the
    cycle collector skips the thousands a rebuild keeps cached.
    """

    session_id: str
    agent_name: str = ""
    # datetimes, not ISO strings: formatted once at commit, not per event
    created_at: datetime | None = None
    last_activity: datetime | None = None
    last_sequence: int = 0
    turns: int = 0
    status: str = "idle"
    usage: dict[str, int] = msgspec.field(default_factory=dict)


def _created(summary: SessionSummary, event: s.SessionCreated) -> None:
    summary.agent_name, summary.created_at = event.agent_name, event.timestamp


def _turn_started(summary: SessionSummary, event: s.TurnStarted) -> None:
    summary.turns, summary.status = event.number, "running"


def _turn_ended(summary: SessionSummary, _event: object) -> None:
    summary.status = "idle"


def _closed(summary: SessionSummary, _event: object) -> None:
    summary.status = "closed"


def _usage(summary: SessionSummary, event: s.UsageRecorded) -> None:
    add_usage(summary.usage, event.usage)


_APPLY: dict[type, Callable[[SessionSummary, Any], None]] = {
    s.SessionCreated: _created,
    s.TurnStarted: _turn_started,
    s.TurnCompleted: _turn_ended,
    s.TurnAborted: _turn_ended,
    s.SessionClosed: _closed,
    s.UsageRecorded: _usage,
}
"""What the events that change more than the last activity do."""


class SessionIndexProjection:
    """Keeps the sessions index."""

    name = "sessions"
    version = 2
    handles: frozenset[type] | None = None  # every event is activity

    def fold(self, rows: Rows, session_id: str, entries: Entries) -> None:
        summary = typed(
            rows.get(session_id, 0), SessionSummary, lambda: SessionSummary(session_id)
        )
        for _, event in entries:
            apply = _APPLY.get(type(event))
            if apply is not None:
                apply(summary, event)
        last_position, last_event = entries[-1]
        summary.last_activity = last_event.timestamp
        summary.last_sequence = last_position
        rows.put(session_id, 0, summary)
