"""The sessions index: one small document per session, for listings.

Id, when it was created, its last activity, how many turns, its state (see
:class:`SessionState`), a preview of its first prompt, the tokens it has
used, and the head of its hash chain: the seq and chain of its newest
event, which ``turnlog audit --verify`` holds the log to, so that events
removed from the end of a session (which leave an intact, shorter chain)
are noticed.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from enum import StrEnum
from typing import Any

import msgspec

from turnlog.domain import session as s
from turnlog.domain import turn_events as t
from turnlog.domain.chain import CHAIN_FIELD, event_seq
from turnlog.domain.handoff import AgentHandedOff
from turnlog.domain.lineage import SessionForked
from turnlog.projections.rows import Entries, Rows, add_usage, typed

PROMPT_PREVIEW_LIMIT = 80
"""Characters of a session's first prompt its summary keeps."""


class SessionState(StrEnum):
    """Where a session stands, from its newest lifecycle events.

    A turn cut off by a crash stays ``running`` until the session is opened
    again (which records how it ended).
    """

    IDLE = "idle"
    """No turn has run yet, or the last one completed."""
    RUNNING = "running"
    """A turn is running."""
    WAITING_FOR_APPROVAL = "waiting_for_approval"
    """A turn is running and waits for someone to decide on a tool call."""
    FAILED = "failed"
    """The last turn failed (a provider error, a crash): nothing runs."""
    ABORTED = "aborted"
    """The last turn was stopped on request (an interrupt, a hook, input
    that was refused): nothing runs."""
    CLOSED = "closed"
    """The session was closed for good."""


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
    last_position: int = 0
    """The log position of the session's newest event."""
    turns: int = 0
    state: SessionState = SessionState.IDLE
    first_prompt: str = ""
    """The start of the first prompt, on one line (at most
    :data:`PROMPT_PREVIEW_LIMIT` characters; "" before any)."""
    pending_approvals: list[str] = msgspec.field(default_factory=list)
    """Ids of the running turn's approval requests still undecided."""
    usage: dict[str, int] = msgspec.field(default_factory=dict)
    head_seq: int = 0
    """The seq of the newest event folded (0: none carried a chain)."""
    head_sha256: str = ""
    """That event's ``chain``."""
    agent_in_charge: str = ""
    """The agent a handoff put in charge ("" while none did: ``agent_name``)."""
    forked_from: str = ""
    """The session this one was forked from ("" if none)."""
    head_held_at: int = 0
    """The log position where the session's seq did not follow on (0: never).

    From there on the head is kept where it was, not moved: a session
    whose last events were removed and that then went on from the shorter
    chain (its seq stepping back) would otherwise be given a new head that
    its log matches.
    """


def _created(summary: SessionSummary, event: s.SessionCreated) -> None:
    summary.agent_name, summary.created_at = event.agent_name, event.timestamp


def _forked(summary: SessionSummary, event: SessionForked) -> None:
    summary.agent_name, summary.created_at = event.agent_name, event.timestamp
    summary.turns, summary.usage = event.turn_count, dict(event.usage_totals)
    summary.agent_in_charge = event.handed_to
    summary.forked_from = event.source_session_id
    summary.first_prompt = _preview(event.first_prompt) if event.first_prompt else ""


def _turn_started(summary: SessionSummary, event: s.TurnStarted) -> None:
    summary.turns, summary.state = event.number, SessionState.RUNNING
    summary.pending_approvals = []


def _turn_ended(summary: SessionSummary, state: SessionState) -> None:
    summary.pending_approvals = []
    if summary.state is not SessionState.CLOSED:
        summary.state = state


def _turn_completed(summary: SessionSummary, _event: object) -> None:
    _turn_ended(summary, SessionState.IDLE)


def _turn_aborted(summary: SessionSummary, event: s.TurnAborted) -> None:
    _turn_ended(summary, SessionState.FAILED if event.failed else SessionState.ABORTED)


def _closed(summary: SessionSummary, _event: object) -> None:
    summary.state, summary.pending_approvals = SessionState.CLOSED, []


def _input_accepted(summary: SessionSummary, event: t.InputAccepted) -> None:
    if not summary.first_prompt:
        summary.first_prompt = _preview(event.text)


def _preview(text: str) -> str:
    flat = " ".join(text.split())
    if len(flat) <= PROMPT_PREVIEW_LIMIT:
        return flat
    return flat[: PROMPT_PREVIEW_LIMIT - 3] + "..."


def _approval_requested(summary: SessionSummary, event: t.ApprovalRequested) -> None:
    summary.pending_approvals.append(event.request_id)
    if summary.state is SessionState.RUNNING:
        summary.state = SessionState.WAITING_FOR_APPROVAL


def _approval_decided(
    summary: SessionSummary, event: t.ApprovalDecided | t.ApprovalFailed
) -> None:
    pending = summary.pending_approvals
    if event.request_id in pending:
        pending.remove(event.request_id)
    if not pending and summary.state is SessionState.WAITING_FOR_APPROVAL:
        summary.state = SessionState.RUNNING


def _usage(summary: SessionSummary, event: s.UsageRecorded) -> None:
    add_usage(summary.usage, event.usage)


def _handed_off(summary: SessionSummary, event: AgentHandedOff) -> None:
    summary.agent_in_charge = event.to_agent


_APPLY: dict[type, Callable[[SessionSummary, Any], None]] = {
    s.SessionCreated: _created,
    SessionForked: _forked,
    s.TurnStarted: _turn_started,
    s.TurnCompleted: _turn_completed,
    s.TurnAborted: _turn_aborted,
    s.SessionClosed: _closed,
    s.UsageRecorded: _usage,
    AgentHandedOff: _handed_off,
    t.InputAccepted: _input_accepted,
    t.ApprovalRequested: _approval_requested,
    t.ApprovalDecided: _approval_decided,
    t.ApprovalFailed: _approval_decided,  # no longer pending, as after a decision
}
"""What the events that change more than the last activity do."""


class SessionIndexProjection:
    """Keeps the sessions index."""

    name = "sessions"
    version = 4
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
        summary.last_position = last_position
        rows.put(session_id, 0, summary)
