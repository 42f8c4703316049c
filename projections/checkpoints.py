"""The checkpoint view: each session's current state as one document.

The document holds what is small (usage, route, pending approval, turn
bookkeeping); the context is not copied into it on every change but read
from the transcript from ``context_start`` on, so a checkpoint update costs
the same at turn 2,000 as at turn 2.
"""

from __future__ import annotations

from typing import Any

import msgspec
from eventsourcing.persistence import Notification

from turnlog.domain import session as s
from turnlog.domain import turn as t
from turnlog.projections.rows import Rows, session_of, typed


class CheckpointState(msgspec.Struct):
    """The stored part of a checkpoint."""

    session_id: str
    agent_name: str = ""
    model_route: str = ""
    shared_state: dict[str, Any] = msgspec.field(default_factory=dict)
    turn_count: int = 0
    running_turn: str | None = None
    pending_approval: dict[str, Any] | None = None
    compaction_count: int = 0
    context_epoch: int = 0
    context_start: int = 0
    last_context_rewrite: dict[str, Any] | None = None
    last_usage: dict[str, int] | None = None
    total_usage: dict[str, int] = msgspec.field(default_factory=dict)
    closed: bool = False
    updated_sequence: int = 0
    running_turn_start: int = 0


def _apply(state: CheckpointState, event: object, sequence: int) -> bool:
    """Folds ``event`` into ``state``; returns whether anything changed."""
    match event:
        case s.SessionCreated(agent_name=name, model_route=route, shared_state=shared):
            state.agent_name, state.model_route = name, route
            state.shared_state = dict(shared)
        case s.TurnStarted(turn_id=turn_id, number=number):
            state.turn_count, state.running_turn = number, turn_id
            state.running_turn_start = sequence
        case s.ContextRewritten(reasons=reasons):
            state.context_epoch += 1
            state.context_start = state.running_turn_start
            state.last_context_rewrite = {
                "reasons": list(reasons),
                "epoch": state.context_epoch,
                "sequence": sequence,
            }
            if "compaction" in reasons:
                state.compaction_count += 1
        case s.TurnCompleted() | s.TurnAborted():
            state.running_turn = None
            state.pending_approval = None
        case s.UsageRecorded(usage=usage, kind=kind):
            if usage is not None:
                if kind == "model":
                    state.last_usage = dict(usage)
                totals = dict(state.total_usage)
                for key, value in usage.items():
                    totals[key] = totals.get(key, 0) + value
                state.total_usage = totals
        case s.SharedStateUpdated(changes=changes):
            state.shared_state = {**state.shared_state, **changes}
        case s.ModelRouteChanged(route=route):
            state.model_route = route
        case s.SessionClosed():
            state.closed = True
        case t.ApprovalRequested(request_id=r, call_id=c, name=n, arguments=a):
            state.pending_approval = {
                "request_id": r,
                "call_id": c,
                "name": n,
                "arguments": a,
                "turn_id": str(getattr(event, "originator_id", "")),
            }
        case t.ApprovalDecided(request_id=r):
            if state.pending_approval and state.pending_approval["request_id"] == r:
                state.pending_approval = None
        case _:
            return False
    return True


class CheckpointProjection:
    """Keeps one checkpoint document per session."""

    name = "checkpoints"
    version = 2

    def fold(self, rows: Rows, notification: Notification, event: object) -> None:
        session_id = session_of(event)
        if session_id is None:
            return
        state, new = typed(
            rows.get(session_id, 0),
            CheckpointState,
            CheckpointState(session_id=session_id),
        )
        if _apply(state, event, notification.id) or new:
            state.updated_sequence = notification.id
            rows.put(session_id, 0, state)
