"""The executions view: one record per turn, for dashboards and audits.

Each record says how the turn ended (completed, failed, aborted, or still
running), how many model calls and tool calls it made, and the tokens it
spent. Records are keyed by the log position of their ``TurnStarted``;
only one turn of a session runs at a time, so a small pointer document
(position 0) says which record the turn's own events belong to.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any
from uuid import UUID

import msgspec

from turnlog.domain import answers as a
from turnlog.domain import session as s
from turnlog.domain import turn_events as t
from turnlog.domain.ids import turn_uuid
from turnlog.projections.rows import Entries, Rows, add_usage


class Execution(msgspec.Struct, gc=False):
    """How one turn went.

    Plain data (``gc=False``: never part of a reference cycle), so the
    cycle collector skips the thousands a rebuild keeps cached.
    """

    turn_id: str
    number: int
    submission_id: str
    position: int
    """The log position of the turn's ``TurnStarted``."""
    outcome: str = "running"
    reason: str | None = None
    model_calls: int = 0
    tool_calls: int = 0
    usage: dict[str, int] = msgspec.field(default_factory=dict)
    # datetimes, not ISO strings: formatted once at commit, not per event
    started_at: datetime | None = None
    ended_at: datetime | None = None
    output: object = msgspec.UNSET
    """The turn's accepted answer (validated JSON), for an agent with an
    output type; UNSET (not stored) otherwise."""


def _model_call(record: Execution, _event: object) -> None:
    record.model_calls += 1


def _tool_call(record: Execution, _event: object) -> None:
    record.tool_calls += 1


def _usage(record: Execution, event: s.UsageRecorded) -> None:
    add_usage(record.usage, event.usage)


def _answer(record: Execution, event: a.AnswerAccepted) -> None:
    record.output = event.output


def _completed(record: Execution, event: s.TurnCompleted) -> None:
    record.outcome = "completed"
    record.ended_at = event.timestamp


def _aborted(record: Execution, event: s.TurnAborted) -> None:
    record.outcome = "failed" if event.failed else "aborted"
    record.reason = event.reason
    record.ended_at = event.timestamp


_APPLY: dict[type, Callable[[Execution, Any], None]] = {
    t.ModelStepStarted: _model_call,
    t.ToolCallStarted: _tool_call,
    s.UsageRecorded: _usage,
    s.TurnCompleted: _completed,
    s.TurnAborted: _aborted,
    a.AnswerAccepted: _answer,
}
"""What each event that changes a running turn's record does to it."""

_TURN_EVENTS = frozenset({t.ModelStepStarted, t.ToolCallStarted, a.AnswerAccepted})
"""The handled events a Turn aggregate records (the others are the
Session's, and name their turn by ``turn_id``)."""


class ExecutionProjection:
    """Keeps one execution record per turn."""

    name = "executions"
    version = 3  # 3: position (was sequence), a log position
    handles: frozenset[type] | None = frozenset({s.TurnStarted, *_APPLY})

    def fold(self, rows: Rows, session_id: str, entries: Entries) -> None:
        pointer: dict[str, Any] | None = rows.get(session_id, 0)
        record: Execution | None = None  # the running turn's, once read
        running: UUID | None = None  # and that turn's aggregate id
        changed = False
        for position, event in entries:
            kind = type(event)
            if kind is s.TurnStarted:
                if changed and pointer is not None and record is not None:
                    rows.put(session_id, pointer["at"], record)
                record = Execution(
                    turn_id=event.turn_id,
                    number=event.number,
                    submission_id=event.submission_id,
                    position=position,
                    started_at=event.timestamp,
                )
                pointer = {"turn_id": event.turn_id, "at": position}
                rows.put(session_id, 0, pointer)
                running, changed = turn_uuid(session_id, event.number), True
                continue
            if pointer is None:
                continue  # no turn has started yet
            if record is None:
                doc = rows.get(session_id, pointer["at"])
                if doc is None:
                    continue
                record = (
                    doc if type(doc) is Execution else msgspec.convert(doc, Execution)
                )
                running = turn_uuid(session_id, record.number)
            if kind in _TURN_EVENTS:
                # Events of a Turn aggregate: the turn is their originator.
                ours = event.originator_id == running
            else:
                ours = event.turn_id == pointer["turn_id"]
            if not ours:
                continue  # about an earlier turn
            if kind is s.UsageRecorded and not event.usage:
                continue  # unknown usage leaves the record as it was
            _APPLY[kind](record, event)
            changed = True
        if changed and pointer is not None and record is not None:
            rows.put(session_id, pointer["at"], record)
