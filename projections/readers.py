"""Read models: checkpoints, transcript pages, session summaries and replay.

Every read first brings the views up to the log's current end, so a read
made after the session reported an event sees at least that event.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any, Concatenate, ParamSpec, TypeVar, cast
from uuid import UUID

import msgspec
from eventsourcing.persistence import ConnectionPoolClosedError, StoredEvent

from turnlog.domain.errors import InvalidInputError
from turnlog.domain.events import TurnlogCreated, TurnlogEvent
from turnlog.domain.ids import check_session_id
from turnlog.domain.protocol import Event
from turnlog.domain.translation import replay
from turnlog.projections.checkpoints import (
    CheckpointProjection,
    checkpoint_events,
)
from turnlog.projections.executions import Execution, ExecutionProjection
from turnlog.projections.runner import ProjectionRunner
from turnlog.projections.sessions import SessionIndexProjection, SessionSummary
from turnlog.projections.transcript import CHUNK, OPEN, SOURCE, TranscriptProjection
from turnlog.store.application import LOG_MAPPER

_CHECKPOINT_EVENTS = checkpoint_events()
_FETCH = 500
"""Log positions fetched per query when reading a transcript."""
_execution_decoder = msgspec.json.Decoder(Execution)
_filed_decoder = msgspec.json.Decoder(list[int])

P = ParamSpec("P")
R = TypeVar("R")


def _always_open() -> None:
    """The guard of readers that belong to no runtime: nothing to check."""


class _Reader:
    """A read model of a runtime: refuses reads once the runtime is closed."""

    def __init__(
        self, runner: ProjectionRunner, check_open: Callable[[], None] = _always_open
    ) -> None:
        self._runner = runner
        self._check_open = check_open


S = TypeVar("S", bound=_Reader)


def _while_open(
    method: Callable[Concatenate[S, P], R],
) -> Callable[Concatenate[S, P], R]:
    """Runs ``method`` only while its runtime is open.

    The check comes first; a close that lands during the read surfaces as
    the pool's bare ConnectionPoolClosedError, which the guard then turns
    into the runtime's own error.
    """

    @functools.wraps(method)
    def guarded(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        self._check_open()
        try:
            return method(self, *args, **kwargs)
        except ConnectionPoolClosedError:
            self._check_open()
            raise

    return guarded


class TranscriptItem(msgspec.Struct, frozen=True):
    """One item of a session's transcript: a stored event and its place.

    ``position`` is the event's place in the whole log (shared by every
    session, with gaps); its place within its session is the event's
    ``session_seq``, the sequence that ``Event.sequence`` carries.
    """

    position: int
    topic: str
    originator_id: str
    originator_version: int
    state: bytes

    @property
    def name(self) -> str:
        """The event's name, e.g. ``ToolCallFinished``."""
        return self.topic.removeprefix("turnlog:")

    def event(self) -> TurnlogEvent | TurnlogCreated:
        """The domain event, decoded (and upcast) as the log would."""
        # A transcript indexes a session's own events, never a snapshot.
        event = LOG_MAPPER.to_domain_event(
            StoredEvent(
                originator_id=UUID(self.originator_id),
                originator_version=self.originator_version,
                topic=self.topic,
                state=self.state,
            )
        )
        return cast(TurnlogEvent | TurnlogCreated, event)


class TranscriptPage(msgspec.Struct, frozen=True):
    """Items before a position, oldest first, and whether older ones exist."""

    items: tuple[TranscriptItem, ...]
    has_more: bool

    @property
    def next_before(self) -> int | None:
        """The ``before_position`` for the next older page, if there is one."""
        return self.items[0].position if self.items and self.has_more else None


def _items(store: Any, positions: list[int]) -> list[TranscriptItem]:
    """The stored events at ``positions`` (the transcript's index), in order."""
    items = []
    for start in range(0, len(positions), _FETCH):
        chunk = positions[start : start + _FETCH]
        stored = store.stored_at(chunk)
        for position in chunk:
            originator, version, topic, state = stored[position]
            items.append(
                TranscriptItem(position, topic, str(originator), version, state)
            )
    return items


def kept_positions(positions: list[int], spans: list[list[int]]) -> list[int]:
    """``positions`` without those a rewind set aside (strictly inside a span)."""
    if not spans:
        return positions
    return [p for p in positions if not any(a < p < b for a, b in spans)]


def replay_events(transcript: Iterable[TranscriptItem], session_id: str) -> list[Event]:
    """The durable EventMsg stream regenerated from transcript items."""
    return replay(session_id, (item.event() for item in transcript))


class Transcripts(_Reader):
    """``rt.transcript``: pages of each session's positioned items."""

    @_while_open
    def page(
        self,
        session_id: str,
        before_position: int | None = None,
        max_batches: int = 100,
    ) -> TranscriptPage:
        """Up to ``max_batches`` items before ``before_position``, oldest first."""
        check_session_id(session_id)
        if not isinstance(max_batches, int) or max_batches < 1:
            msg = "max_batches must be a positive int"
            raise InvalidInputError(msg)
        self._runner.catch_up()
        positions = self._newest(session_id, before_position, max_batches + 1)
        has_more = len(positions) > max_batches
        positions = sorted(positions[:max_batches])
        return TranscriptPage(tuple(_items(self._runner.store, positions)), has_more)

    @_while_open
    def all(self, session_id: str, from_position: int = 0) -> list[TranscriptItem]:
        """Every item of a session from ``from_position`` on, oldest first.

        A fork's begin with its source's, up to the fork point; a rewound
        session's include the turns set aside (see :meth:`current`).
        """
        check_session_id(session_id)
        self._runner.catch_up()
        return _items(self._runner.store, self._positions(session_id, from_position))

    @_while_open
    def current(self, session_id: str, from_position: int = 0) -> list[TranscriptItem]:
        """As :meth:`all`, without the events of turns a rewind set aside."""
        check_session_id(session_id)
        self._runner.catch_up()
        doc = self._runner.tables.get(CheckpointProjection.name, session_id, 0)
        spans = [] if doc is None else doc.get("set_aside_positions", [])
        return self.kept(session_id, from_position, spans)

    def kept(
        self, session_id: str, from_position: int, spans: list[list[int]]
    ) -> list[TranscriptItem]:
        """The items from ``from_position`` on, but those inside ``spans``."""
        positions = self._positions(session_id, from_position)
        return _items(self._runner.store, kept_positions(positions, spans))

    def _positions(self, session_id: str, from_position: int) -> list[int]:
        """The positions of :meth:`all`, read from the view."""
        tables, view = self._runner.tables, TranscriptProjection.name
        # The open chunk first, and only filed chunks older than it: a chunk
        # a writer files between the two reads is then read once, as open.
        doc = self._open(session_id)
        newest = [] if doc is None else list(doc["positions"])
        bound = newest[0] if newest else None
        # The filed chunk holding ``from_position`` starts at or before it.
        upto = from_position + 1 if bound is None else min(from_position + 1, bound)
        first = tables.range(
            view, session_id, from_position=1, before=upto, limit=1, newest_first=True
        )
        filed = first + tables.range(
            view, session_id, from_position=from_position + 1, before=bound
        )
        positions = [
            position
            for _, raw in filed
            for position in _filed_decoder.decode(raw)
            if position >= from_position
        ]
        positions.extend(p for p in newest if p >= from_position)
        source = None if doc is None else doc.get(SOURCE)
        if source is not None:  # a fork: its source's items come first
            shared = self._positions(source[0], from_position)
            positions = [p for p in shared if p <= source[1]] + positions
        return positions

    def _open(self, session_id: str) -> dict[str, Any] | None:
        """The session's open chunk (its newest positions, a fork's source)."""
        doc: dict[str, Any] | None = self._runner.tables.get(
            TranscriptProjection.name, session_id, OPEN
        )
        return doc

    def _newest(self, session_id: str, before: int | None, count: int) -> list[int]:
        """Up to ``count`` of the session's positions before ``before``, newest
        first."""
        tables, view = self._runner.tables, TranscriptProjection.name
        doc = self._open(session_id)
        newest = [] if doc is None else list(doc["positions"])
        positions = [p for p in reversed(newest) if before is None or p < before]
        if newest and (before is None or before > newest[0]):
            before = newest[0]  # every filed chunk is older than the open one
        while len(positions) < count:
            wanted = (count - len(positions)) // CHUNK + 2
            chunks = tables.range(
                view,
                session_id,
                from_position=1,
                before=before,
                limit=wanted,
                newest_first=True,
            )
            for start, raw in chunks:
                listed = _filed_decoder.decode(raw)
                positions.extend(
                    p for p in reversed(listed) if before is None or p < before
                )
                before = start
            if len(chunks) < wanted:
                break
        source = None if doc is None else doc.get(SOURCE)
        if source is not None and len(positions) < count:
            shared_before = (
                source[1] + 1 if before is None else min(before, source[1] + 1)
            )
            positions.extend(
                self._newest(source[0], shared_before, count - len(positions))
            )
        return positions[:count]

    @_while_open
    def sessions(self) -> list[str]:
        """Every session id with a transcript."""
        self._runner.catch_up()
        return self._runner.tables.parts(TranscriptProjection.name)


class ExecutionPage(msgspec.Struct, frozen=True):
    """Execution records before a position, oldest first."""

    executions: list[Execution]
    has_more: bool


class Executions(_Reader):
    """``rt.executions``: one record per turn."""

    @_while_open
    def page(
        self, session_id: str, before_position: int | None = None, limit: int = 10
    ) -> ExecutionPage:
        """Up to ``limit`` turns started before ``before_position``, oldest first."""
        check_session_id(session_id)
        if not isinstance(limit, int) or limit < 1:
            msg = "limit must be a positive int"
            raise InvalidInputError(msg)
        self._runner.catch_up()
        rows = self._newest(session_id, before_position, limit + 1)
        has_more = len(rows) > limit
        records = [_execution_decoder.decode(raw) for _, raw in rows[:limit]]
        records.reverse()
        return ExecutionPage(records, has_more)

    def _newest(
        self, session_id: str, before: int | None, count: int
    ) -> list[tuple[int, bytes]]:
        """Up to ``count`` records before ``before``, newest first; a fork's
        go on with its source's turns up to the fork point."""
        tables = self._runner.tables
        rows = tables.range(
            ExecutionProjection.name,
            session_id,
            from_position=1,
            before=before,
            limit=count,
            newest_first=True,
        )
        if len(rows) < count:
            doc = tables.get(TranscriptProjection.name, session_id, OPEN)
            source = None if doc is None else doc.get(SOURCE)
            if source is not None:
                bound = source[1] + 1 if before is None else min(before, source[1] + 1)
                rows.extend(self._newest(source[0], bound, count - len(rows)))
        return rows


class Summaries(_Reader):
    """``rt.summaries``: one line per session, for listings (the sessions view).

    Each :class:`SessionSummary` holds the session's state (running,
    waiting for approval, failed, aborted, idle or closed), a preview of
    its first prompt, its turns, its usage and its last activity.
    """

    @_while_open
    def load(self, session_id: str) -> SessionSummary | None:
        """The session's summary, or None if the log has no such session."""
        check_session_id(session_id)
        self._runner.catch_up()
        doc = self._runner.tables.get(SessionIndexProjection.name, session_id, 0)
        return None if doc is None else msgspec.convert(doc, SessionSummary)

    @_while_open
    def all(self) -> list[SessionSummary]:
        """Every session's summary, the most recently active last."""
        self._runner.catch_up()
        tables, view = self._runner.tables, SessionIndexProjection.name
        summaries = []
        for part in tables.parts(view):
            doc = tables.get(view, part, 0)
            if doc is not None:
                summaries.append(msgspec.convert(doc, SessionSummary))
        summaries.sort(key=lambda summary: summary.last_position)
        return summaries


def replay_session(transcripts: Transcripts, session_id: str) -> list[Event]:
    """``rt.replay_events``: a session's durable EventMsg stream from the log."""
    check_session_id(session_id)
    return replay_events(transcripts.all(session_id), session_id)
