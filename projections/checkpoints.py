"""The checkpoint view: each session's current state as one document.

The document holds what is small (usage, route, pending approval, turn
bookkeeping); the context and the conversation are not copied into it on
every change but read from the transcript when it is loaded (the context
from ``context_start`` on), so a checkpoint update costs the same at turn
2,000 as at turn 2.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from turnlog.domain import answers as a
from turnlog.domain import session as s
from turnlog.domain import turn_events as t
from turnlog.domain.handoff import AgentHandedOff
from turnlog.domain.lineage import SessionForked, SessionRewound
from turnlog.projections.rows import Entries, Rows, add_usage, typed


class CheckpointState(msgspec.Struct, gc=False):
    """The stored part of a checkpoint.

    Plain data (``gc=False``: never part of a reference cycle), so the
    cycle collector skips the thousands a rebuild keeps cached.
    """

    session_id: str
    agent_name: str = ""
    model_route: str = ""
    agent_in_charge: str = ""
    """The agent a handoff put in charge ("" while none did)."""
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
    updated_position: int = 0
    running_turn_start: int = 0
    output: object = msgspec.UNSET
    """The last answer accepted in the session (validated JSON), for an
    agent with an output type; UNSET (not stored) otherwise."""
    forked_from: dict[str, Any] | None = None
    """A fork's source: its ``session_id``, ``position``, ``seq`` and ``digest``."""
    set_aside_positions: list[list[int]] = msgspec.field(default_factory=list)
    """[kept, rewind] log positions: the events between were rewound."""
    rewound_turns: list[int] = msgspec.field(default_factory=list)


def _created(state: CheckpointState, event: s.SessionCreated, _: int) -> None:
    state.agent_name, state.model_route = event.agent_name, event.model_route
    state.shared_state = dict(event.shared_state)


def _turn_started(state: CheckpointState, event: s.TurnStarted, position: int) -> None:
    state.turn_count, state.running_turn = event.number, event.turn_id
    state.running_turn_start = position


def _context_rewritten(
    state: CheckpointState, event: s.ContextRewritten, position: int
) -> None:
    state.context_epoch += 1
    state.context_start = state.running_turn_start
    state.last_context_rewrite = {
        "reasons": list(event.reasons),
        "epoch": state.context_epoch,
        "position": position,
    }
    if "compaction" in event.reasons:
        state.compaction_count += 1


def _turn_ended(state: CheckpointState, _event: object, _: int) -> None:
    state.running_turn = None
    state.pending_approval = None


def _answer(state: CheckpointState, event: a.AnswerAccepted, _: int) -> None:
    state.output = event.output


def _usage(state: CheckpointState, event: s.UsageRecorded, _: int) -> None:
    if event.kind == "model":
        # The last call's usage, as UsageRecordedMsg.last reports it: a call that
        # reported none leaves None, not an older call's figures.
        state.last_usage = None if event.usage is None else dict(event.usage)
    if event.usage is not None:
        add_usage(state.total_usage, event.usage)


def _shared_state(state: CheckpointState, event: s.SharedStateUpdated, _: int) -> None:
    state.shared_state = {**state.shared_state, **event.changes}


def _route(state: CheckpointState, event: s.ModelRouteChanged, _: int) -> None:
    state.model_route = event.route


def _handed_off(state: CheckpointState, event: AgentHandedOff, _: int) -> None:
    state.agent_in_charge, state.model_route = event.to_agent, event.model_route


def _forked(state: CheckpointState, event: SessionForked, _: int) -> None:
    state.agent_name, state.model_route = event.agent_name, event.model_route
    state.agent_in_charge = event.handed_to
    state.shared_state = dict(event.shared_state)
    state.turn_count = event.turn_count
    state.compaction_count = event.compaction_count
    state.context_epoch = event.context_epoch
    state.context_start = event.context_start_position
    if event.context_epoch:
        state.last_context_rewrite = {
            "reasons": list(event.last_rewrite_reasons),
            "epoch": event.context_epoch,
            "position": event.context_start_position,
        }
    state.last_usage = None if event.last_usage is None else dict(event.last_usage)
    state.total_usage = dict(event.usage_totals)
    state.forked_from = {
        "session_id": event.source_session_id,
        "position": event.source_position,
        "seq": event.source_seq,
        "digest": event.source_digest,
    }
    state.set_aside_positions = [list(span) for span in event.set_aside_positions]
    state.rewound_turns = sorted(
        n for first, last in event.set_aside for n in range(first, last + 1)
    )


def _rewound(state: CheckpointState, event: SessionRewound, _: int) -> None:
    state.shared_state = dict(event.shared_state)
    state.context_start = event.context_start_position
    state.set_aside_positions.append([event.point_position, event.last_position + 1])
    state.rewound_turns = sorted({*state.rewound_turns, *event.rewound_turns})


def _closed(state: CheckpointState, _event: s.SessionClosed, _: int) -> None:
    state.closed = True


def _approval_requested(
    state: CheckpointState, event: t.ApprovalRequested, _: int
) -> None:
    state.pending_approval = {
        "request_id": event.request_id,
        "call_id": event.call_id,
        "name": event.name,
        "arguments": event.arguments,
        "turn_id": str(event.originator_id),
    }


def _approval_decided(
    state: CheckpointState, event: t.ApprovalDecided | t.ApprovalFailed, _: int
) -> None:
    pending = state.pending_approval
    if pending and pending["request_id"] == event.request_id:
        state.pending_approval = None


_APPLY: dict[type, Callable[[CheckpointState, Any, int], None]] = {
    s.SessionCreated: _created,
    SessionForked: _forked,
    SessionRewound: _rewound,
    s.TurnStarted: _turn_started,
    s.ContextRewritten: _context_rewritten,
    s.TurnCompleted: _turn_ended,
    s.TurnAborted: _turn_ended,
    s.UsageRecorded: _usage,
    s.SharedStateUpdated: _shared_state,
    s.ModelRouteChanged: _route,
    AgentHandedOff: _handed_off,
    s.SessionClosed: _closed,
    t.ApprovalRequested: _approval_requested,
    t.ApprovalDecided: _approval_decided,
    t.ApprovalFailed: _approval_decided,  # no longer pending, as after a decision
    a.AnswerAccepted: _answer,
}
"""What each event that changes a checkpoint does to it (by exact class:
one lookup, where a ``match`` tried every arm in turn for most events)."""


class CheckpointProjection:
    """Keeps one checkpoint document per session."""

    name = "checkpoints"
    version = 4  # 4: updated_position (was updated_sequence), a log position
    handles: frozenset[type] | None = frozenset(_APPLY)

    def fold(self, rows: Rows, session_id: str, entries: Entries) -> None:
        state = typed(
            rows.get(session_id, 0),
            CheckpointState,
            lambda: CheckpointState(session_id=session_id),
        )
        for position, event in entries:
            _APPLY[type(event)](state, event, position)
        state.updated_position = entries[-1][0]
        rows.put(session_id, 0, state)


def checkpoint_events() -> frozenset[type]:
    """The event classes a checkpoint folds."""
    return frozenset(_APPLY)
