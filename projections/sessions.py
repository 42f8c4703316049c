"""The sessions index: one small document per session, for listings.

Id, when it was created, its last activity, how many turns, whether it
runs, is idle or is closed, the tokens it has used, and the head of its
hash chain: the seq and chain of its newest event, which ``turnlog audit
--verify`` holds the log to, so that events removed from the end of a
session (which leave an intact, shorter chain) are noticed.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import msgspec

from turnlog.domain import session as s
from turnlog.domain.chain import CHAIN_FIELD, event_seq
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
    head_seq: int = 0
    """The seq of the newest event folded (0: none carried a chain)."""
    head_sha256: str = ""
    """That event's ``chain``."""
    head_held_at: int = 0
    """The log position where the session's seq did not follow on (0: never).

    From there on the head is kept where it was, not moved: a session
    whose last events were removed and that then went on from the shorter
    chain (its seq stepping back) would otherwise be given a new head that
    its log matches.
    """


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
    version = 3
    handles: frozenset[type] | None = None  # every event is activity

    def fold(self, rows: Rows, session_id: str, entries: Entries) -> None:
        summary = typed(
            rows.get(session_id, 0), SessionSummary, lambda: SessionSummary(session_id)
        )
        for position, event in entries:
            apply = _APPLY.get(type(event))
            if apply is not None:
                apply(summary, event)
            seq = event_seq(event)
            if not seq or summary.head_held_at:
                continue
            if summary.head_seq and seq != summary.head_seq + 1:
                summary.head_held_at = position
            else:
                summary.head_seq = seq
                summary.head_sha256 = getattr(event, CHAIN_FIELD, "")
        last_position, last_event = entries[-1]
        summary.last_activity = last_event.timestamp
        summary.last_sequence = last_position
        rows.put(session_id, 0, summary)
