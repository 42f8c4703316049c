"""Forking a session at a quiet point: what ``Runtime.fork_session`` records.

A fork is one event, :class:`~turnlog.domain.lineage.SessionForked`, saved
in one transaction: a crash leaves either no fork or a whole one. Its
history up to the fork point is read from its source, never copied.

What a fork carries from its source at the point: the messages and model
context (compactions included), the shared state, the model route and the
agent in charge, the usage so far, and the turns rewound before the point
(still set aside). What it does not: pending approvals and running turns
(a fork point is quiet), queued input, and session allowances unless
``keep_allowances=True``.
"""

from __future__ import annotations

from typing import Any

from turnlog.domain.errors import InvalidInputError, UsageError
from turnlog.domain.ids import check_session_id, new_submission_id
from turnlog.domain.lineage import check_point_args
from turnlog.domain.session import Session
from turnlog.store.fork_source import (
    ForkSource,
    fork_fields,
    quick_source,
    scanned_source,
)
from turnlog.store.lineage import HistoryPoint, scan
from turnlog.store.log import Store


def _position_of(at: object) -> int:
    """The log position a checkpoint (or an int) names."""
    position = getattr(at, "updated_position", at)
    if isinstance(position, bool) or not isinstance(position, int):
        msg = "at= must be a Checkpoint (rt.checkpoints) or a log position"
        raise InvalidInputError(msg)
    return position


def record_fork(
    store: Store,
    source_id: str,
    *,
    before_input: int | None = None,
    after_turn: int | None = None,
    at: object = None,
    session_id: str | None = None,
    agent_name: str | None = None,
    agent_digest: str | None = None,
    keep_allowances: bool = False,
) -> tuple[str, HistoryPoint]:
    """Saves the fork of ``source_id`` at the point named; (its id, the point).

    Raises InvalidInputError for a point that is not quiet or does not
    exist, UsageError if ``session_id`` is taken; nothing is recorded then.
    """
    check_session_id(source_id)
    check_point_args(before_input, after_turn, at)
    if not isinstance(keep_allowances, bool):
        msg = "keep_allowances must be a bool"
        raise InvalidInputError(msg)
    fork_id = (
        check_session_id(session_id)
        if session_id is not None
        else f"{source_id}-fork-{new_submission_id()[:8]}"
    )
    if store.get_session(fork_id) is not None:
        msg = f"session {fork_id!r} exists already: choose another id for the fork"
        raise UsageError(msg)
    source: ForkSource | None = None
    if before_input is None and at is None:
        source = quick_source(store, source_id, after_turn)
    if source is None:  # named by input or position: read the whole history
        marks = scan(store, source_id)
        if at is not None:
            point = marks.at_position(_position_of(at))
        else:
            point = marks.point(before_input=before_input, after_turn=after_turn)
        source = scanned_source(store, marks, point)
    fields: dict[str, Any] = fork_fields(store, source, keep_allowances=keep_allowances)
    if agent_name is not None and agent_digest is not None:
        fields["agent_name"], fields["agent_digest"] = agent_name, agent_digest
        fields["handed_to"] = ""
    store.save(Session.fork(fork_id, **fields))
    return fork_id, source.point
