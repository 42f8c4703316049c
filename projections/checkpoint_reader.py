"""``rt.checkpoints``: each session's state now, or as it was at a moment.

The current checkpoint is the checkpoint view's document with the model
context and the conversation read from the transcript (without turns a
rewind set aside); a checkpoint as it was is folded from the log by the
same fold, in memory.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from turnlog.domain import session as s
from turnlog.domain.context import (
    Message,
    fold_context,
    fold_conversation,
    holds_whole_conversation,
    messages_of,
)
from turnlog.domain.errors import InvalidInputError
from turnlog.domain.ids import check_session_id
from turnlog.domain.model import Item
from turnlog.projections.checkpoints import (
    CheckpointProjection,
    CheckpointState,
    checkpoint_events,
)
from turnlog.projections.readers import (
    TranscriptItem,
    Transcripts,
    _always_open,
    _Reader,
    _while_open,
    kept_positions,
)
from turnlog.projections.runner import ProjectionRunner

_CHECKPOINT_EVENTS = checkpoint_events()


class Checkpoint(msgspec.Struct, frozen=True):
    """A session's current state, from the checkpoint and transcript views."""

    session_id: str
    agent_name: str
    model_route: str
    shared_state: dict[str, Any]
    turn_count: int
    running_turn: str | None
    pending_approval: dict[str, Any] | None
    compaction_count: int
    context_epoch: int
    last_context_rewrite: dict[str, Any] | None
    last_usage: dict[str, int] | None
    total_usage: dict[str, int]
    closed: bool
    updated_position: int
    """The log position of the newest event folded into the checkpoint."""
    context: tuple[Item, ...]
    """The model context: what the session's next model step is sent
    (after a compaction, the compacted context and what came since)."""
    agent_in_charge: str = ""
    """The agent in charge: the one a handoff put in charge, else ``agent_name``."""
    output: object = msgspec.UNSET
    """The last answer accepted in the session, as recorded (validated
    JSON), for an agent with an ``output_type``; UNSET for any other.
    ``AgentSession.last_output()`` gives it as the typed object."""
    forked_from: dict[str, Any] | None = None
    """A fork's source: its ``session_id``, the ``position`` and ``seq`` of the
    last event shared, and the source chain's ``digest`` there."""
    rewound_turns: tuple[int, ...] = ()
    """Turns a rewind set aside: in the log, not in the context."""
    conversation: tuple[Message, ...] = ()
    """The conversation's user and assistant messages as it happened,
    across compactions (turns a rewind set aside left out)."""

    def messages(self) -> list[Message]:
        """The conversation's user and assistant messages, as it happened."""
        return list(self.conversation)


def _checkpoint(state: CheckpointState, items: list[TranscriptItem]) -> Checkpoint:
    """The Checkpoint of a stored state, its context and conversation
    folded from ``items`` (the kept items from the conversation's start)."""
    events = [(item.position, item.event()) for item in items]
    in_context = [e for at, e in events if at >= state.context_start]
    rebuilt = fold_context(in_context)
    if len(in_context) == len(events) and holds_whole_conversation(rebuilt):
        conversation = messages_of(rebuilt)  # the common case: no second fold
    else:
        conversation = fold_conversation(event for _, event in events)
    fields = msgspec.structs.asdict(state)
    del fields["context_start"]
    del fields["running_turn_start"]
    del fields["set_aside_positions"]
    fields["rewound_turns"] = tuple(state.rewound_turns)
    fields["agent_in_charge"] = state.agent_in_charge or state.agent_name
    return Checkpoint(
        **fields, context=tuple(rebuilt), conversation=tuple(conversation)
    )


class Checkpoints(_Reader):
    """``rt.checkpoints``: each session's current state."""

    def __init__(
        self,
        runner: ProjectionRunner,
        transcripts: Transcripts,
        check_open: Callable[[], None] = _always_open,
    ) -> None:
        super().__init__(runner, check_open)
        self._transcripts = transcripts

    @_while_open
    def load(self, session_id: str, *, context: bool = True) -> Checkpoint | None:
        """The session's checkpoint, or None if the log has no such session.

        ``context=False`` skips rebuilding the model context (it reads the
        transcript since the last compaction), for callers that want only
        the small fields: turns, status, usage, pending approval (and
        the conversation: ``messages()`` is then empty). A compacted
        session's conversation is read from its start.
        """
        check_session_id(session_id)
        self._runner.catch_up()
        doc = self._runner.tables.get(CheckpointProjection.name, session_id, 0)
        if doc is None:
            return None
        state = msgspec.convert(doc, CheckpointState)
        # From the start: the conversation reaches back past a compaction
        # (for a session never compacted the context starts there anyway).
        items = (
            self._transcripts.kept(session_id, 0, state.set_aside_positions)
            if context
            else []
        )
        return _checkpoint(state, items)

    @_while_open
    def at(
        self, session_id: str, *, turn: int | None = None, position: int | None = None
    ) -> Checkpoint | None:
        """The checkpoint as it was when turn ``turn`` ended, or at log
        ``position``: folded from the log, not stored per turn. None if the
        session had no event by then.

        Its ``updated_position`` names that moment: a checkpoint of a quiet
        moment may be passed to ``rt.fork_session(at=...)``.
        """
        check_session_id(session_id)
        if (turn is None) == (position is None):
            msg = "name one moment: turn= or position="
            raise InvalidInputError(msg)
        moment = turn if turn is not None else position
        if isinstance(moment, bool) or not isinstance(moment, int) or moment < 0:
            msg = "turn and position must be non-negative ints"
            raise InvalidInputError(msg)
        self._runner.catch_up()
        items = self._transcripts.all(session_id)
        events = [(item.position, item.event()) for item in items]
        if turn is not None:
            ends = [
                at
                for at, event in events
                if isinstance(event, (s.TurnCompleted, s.TurnAborted))
                and event.number == turn
            ]
            if not ends:
                msg = f"turn {turn} of {session_id!r} has not ended"
                raise InvalidInputError(msg)
            position = ends[-1]
        entries = [(at, event) for at, event in events if at <= (position or 0)]
        entries = [(at, e) for at, e in entries if type(e) in _CHECKPOINT_EVENTS]
        if not entries:
            return None
        rows = _MemoryRows()
        CheckpointProjection().fold(rows, session_id, entries)
        state = msgspec.convert(rows.docs[(session_id, 0)], CheckpointState)
        kept = {item.position for item in items if item.position <= entries[-1][0]}
        kept_items = [
            item
            for item in items
            if item.position
            in set(kept_positions(sorted(kept), state.set_aside_positions))
        ]
        return _checkpoint(state, kept_items)


class _MemoryRows:
    """Rows of a fold kept in memory (a checkpoint as it was)."""

    def __init__(self) -> None:
        self.docs: dict[tuple[str, int], Any] = {}

    def get(self, part: str, position: int) -> Any:
        return self.docs.get((part, position))

    def put(self, part: str, position: int, doc: Any) -> None:
        self.docs[(part, position)] = doc
