"""Forks and rewinds: facts that say where a session's history comes from.

A fork is a new session whose history, up to its fork point, is its
source's: the log holds it once, in the source, and the fork's first event
(:class:`SessionForked`) names the source session, the point (its session
seq and log position) and the source chain's digest there. The fork's own
events continue that chain, so verifying the fork verifies the source's
prefix too. Nothing of the source is copied but the few small fields of
its Session aggregate (shared state, usage, route...).

A rewind (:class:`SessionRewound`) is an event of the session itself that
sets the turns after a point aside. Nothing is deleted: the rewound turns
stay in the log, for audit and replay, and leave the model's context, the
transcript's current view and the checkpoint.

Fork and rewind points are quiet points: the session as it was just
before one of its turns started (``before_input=N``, the user input that
started it) or after its turn N and before the next (``after_turn=N``).
``after_turn=0`` is the point before the first input.

Turn numbers go on growing across a fork and a rewind: a fork's own turns
are numbered after its source's, and a rewound session's next turn after
its last (rewound) one, so a turn's aggregate id is never reused.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from turnlog.domain.errors import (
    InvalidInputError,
    SessionBusyError,
    SessionClosedError,
)
from turnlog.domain.events import TurnlogCreated, TurnlogEvent

TurnOwners = list[list[Any]]
"""[[session id, last turn number], ...]: whose aggregates a fork's first
turns are, the oldest source first (turns up to the first entry's number are
its session's, then up to the next entry's, ...)."""


class SessionForked(TurnlogCreated):
    """A session came into being as a fork of another at a quiet point.

    Its history up to here is the source's, read from the source; its own
    events carry on the source's hash chain from ``source_digest``.
    """

    session_id: str
    """The fork's id."""
    agent_name: str
    agent_digest: str
    shared_state: dict[str, Any]
    """The source's shared state at the fork point."""
    model_route: str
    source_session_id: str
    """The session forked from."""
    source_seq: int
    """The source's session seq of the last event the fork shares with it."""
    source_position: int
    """The log position of that event."""
    source_digest: str
    """The source chain's digest at that event (its ``chain``)."""
    turn_owners: TurnOwners
    """Whose turn aggregates the fork's first turns are (see :data:`TurnOwners`)."""
    turn_count: int
    """Turns of the source up to the fork point: the fork's next is one more."""
    usage_totals: dict[str, int]
    last_usage: dict[str, int] | None
    context_epoch: int
    context_start_turn: int
    context_start_position: int
    """Log position of the event the model context starts at (0: the start)."""
    compaction_count: int
    last_rewrite_reasons: list[str]
    handed_to: str
    allowed_tools: list[str]
    """Session allowances carried over (only with ``keep_allowances``)."""
    set_aside: list[list[int]]
    """Turn ranges [first, last] the source had rewound before the fork point."""
    set_aside_positions: list[list[int]]
    """Log position ranges [after, before] of those turns' events."""
    first_prompt: str = ""
    """The first input of the history the fork shares ("" if none), for listings."""

    def apply(self, aggregate: Any) -> None:
        aggregate.set_aside_positions = [
            list(span) for span in self.set_aside_positions
        ] or ()
        aggregate.session_id = self.session_id
        aggregate.agent_name = self.agent_name
        aggregate.agent_digest = self.agent_digest
        aggregate.shared_state = dict(self.shared_state)
        aggregate.model_route = self.model_route
        aggregate.turn_count = self.turn_count
        aggregate.turn_owners = [list(owner) for owner in self.turn_owners] or ()
        aggregate.usage_totals = dict(self.usage_totals)
        aggregate.last_usage = (
            None if self.last_usage is None else dict(self.last_usage)
        )
        aggregate.context_epoch = self.context_epoch
        aggregate.context_start_turn = self.context_start_turn
        aggregate.compaction_count = self.compaction_count
        aggregate.last_rewrite_reasons = list(self.last_rewrite_reasons) or ()
        aggregate.handed_to = self.handed_to
        aggregate.allowed_tools = frozenset(self.allowed_tools)
        aggregate.set_aside = [list(span) for span in self.set_aside] or ()


class SessionRewound(TurnlogEvent):
    """The session went back to the quiet point after its turn ``to_turn``.

    Its turns after that point are set aside: they stay in the log, and no
    longer feed the model's context or the current transcript. The model
    context and the shared state are again what they were at that point;
    usage totals keep counting (those tokens were spent), and the model
    route, allowances and agent in charge stay as they are.
    """

    to_turn: int
    """The last turn kept (0: back to before the first input)."""
    rewound_turns: list[int]
    """The turns set aside by this rewind."""
    point_seq: int
    """The session seq of the last event kept (the rewind point)."""
    point_position: int
    """The log position of that event."""
    shared_state: dict[str, Any]
    """The shared state as it was at the rewind point."""
    context_start_turn: int
    """The turn the model context starts in at the rewind point."""
    context_start_position: int
    """Log position of the event the model context starts at (0: the start)."""
    last_position: int = 0
    """The log position of the session's last event before the rewind: the
    events after ``point_position`` up to it are set aside."""

    def apply(self, aggregate: Any) -> None:
        span = [self.point_position, self.last_position + 1]
        aggregate.set_aside_positions = [*aggregate.set_aside_positions, span]
        if self.to_turn < aggregate.turn_count:
            span = [self.to_turn + 1, aggregate.turn_count]
            aggregate.set_aside = [*aggregate.set_aside, span]
        aggregate.shared_state = dict(self.shared_state)
        aggregate.context_start_turn = self.context_start_turn


def set_aside_turns(spans: Sequence[Sequence[int]]) -> set[int]:
    """The turn numbers in ``spans`` ([first, last] ranges)."""
    return {n for first, last in spans for n in range(first, last + 1)}


def turn_owner(session_id: str, owners: Sequence[Sequence[Any]], number: int) -> str:
    """The session whose aggregate turn ``number`` of ``session_id`` is."""
    for owner, last in owners:
        if number <= last:
            return str(owner)
    return session_id


def rewind(session: Any, to_turn: int, **fields: Any) -> list[int]:
    """Sets the turns of ``session`` (a Session) after ``to_turn`` aside.

    ``fields`` are the rest of :class:`SessionRewound`'s, read from the
    log. Refused while a turn runs (interrupt it first), for a closed
    session, and when there is nothing after ``to_turn`` to set aside.
    Returns the turns set aside.
    """
    if session.closed:
        msg = f"session {session.session_id!r} is closed"
        raise SessionClosedError(msg)
    if session.active_turn is not None:
        msg = (
            f"session {session.session_id!r} is running turn {session.active_turn}; "
            "interrupt it before rewinding"
        )
        raise SessionBusyError(msg)
    gone = set_aside_turns(session.set_aside)
    rewound = [n for n in range(to_turn + 1, session.turn_count + 1) if n not in gone]
    if not rewound:
        msg = (
            f"nothing to rewind: session {session.session_id!r} "
            f"has no turn after {to_turn}"
        )
        raise InvalidInputError(msg)
    session.trigger_event(
        SessionRewound, to_turn=to_turn, rewound_turns=rewound, **fields
    )
    return rewound


def check_point_args(
    before_input: int | None, after_turn: int | None, at: object = None
) -> None:
    """At most one point is named, each a non-negative int (or a checkpoint)."""
    named = [arg for arg in (before_input, after_turn, at) if arg is not None]
    if len(named) > 1:
        msg = "name one point: before_input=, after_turn= or at="
        raise InvalidInputError(msg)
    for name, value in (("before_input", before_input), ("after_turn", after_turn)):
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or value < 0
        ):
            msg = f"{name} must be a non-negative int"
            raise InvalidInputError(msg)
    if before_input == 0:
        msg = "inputs are counted from 1: before_input=1 is before the first"
        raise InvalidInputError(msg)
