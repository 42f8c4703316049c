"""Following a session from the log, in any process: ``Runtime.follow``.

``session.subscribe()`` is fed by the session's actor, so it sees only a
session running in this process. A follower reads the log instead, so it
follows a session wherever it runs (another process on the same
PostgreSQL, or one that takes the session over after a crash), and yields
the session's durable EventMsg stream: the Events ``rt.replay_events``
regenerates, text deltas left out, each once and in order.

It first reads the session's history (its Session and Turn aggregates,
through the translator, which needs every event from the start), noting
the log's end before it does; then it reads the log by position from that
end, keeping the entries of the session's aggregates. Everything up to
the noted end is in the history, everything after it is read live, and
an event found in both is told apart by its ``session_seq``. PostgreSQL
gives positions in commit order (every insert locks the events table), so
reading by position never skips an entry committed late.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

from turnlog.domain import session as s
from turnlog.domain import turn_events as t
from turnlog.domain.chain import event_seq
from turnlog.domain.errors import InvalidInputError, TurnlogError
from turnlog.domain.ids import check_session_id, session_uuid, turn_uuid
from turnlog.domain.protocol import Event, SessionClosedMsg
from turnlog.domain.translation import EventTranslator
from turnlog.store.history import SessionHistory
from turnlog.store.log import Store

READ_BATCH = 500
"""Log entries read per query while following."""


class FollowClosedError(TurnlogError):
    """The follower was closed while a reader waited on it."""


class SessionFollower:
    """A session's durable Events after ``after``, live, read from the log.

    Iterate it (it ends after the session's ``SessionClosedMsg``, or when
    closed), or call :meth:`get` with a timeout. Thread-safe for one
    reader; :meth:`close` may be called from any thread.

    Args:
        store: The log.
        session_id: The session to follow; it need not exist yet.
        after: Yield only Events whose ``sequence`` is above this (the
            ``sequence`` of the last Event a previous follower yielded, to
            resume where it stopped).
        check_open: Raises if the runtime was closed.
    """

    def __init__(
        self,
        store: Store,
        session_id: str,
        *,
        after: int = 0,
        check_open: Callable[[], None] | None = None,
    ) -> None:
        check_session_id(session_id)
        if isinstance(after, bool) or not isinstance(after, int) or after < 0:
            msg = f"after must be a session sequence (an int >= 0), not {after!r}"
            raise InvalidInputError(msg)
        self.session_id = session_id
        self._store = store
        self._after = after
        self._check_open = check_open
        self._closed = threading.Event()
        self._ready: deque[Event] = deque()
        self._translator = EventTranslator(session_id)
        self._last_seq = 0
        self._ended = False
        self._ids: set[uuid.UUID] = {session_uuid(session_id)}
        self._next_turn = 1
        self._watch = store.commits
        self._position = store.max_position()
        self._read_history()

    # -- reading -----------------------------------------------------------

    def _expect_turn(self, number: int) -> None:
        """Listens for turns up to ``number + 1``: turns start one at a time."""
        while self._next_turn <= number + 1:
            self._ids.add(turn_uuid(self.session_id, self._next_turn))
            self._next_turn += 1

    def _read_history(self) -> None:
        events = SessionHistory(self._store).events(self.session_id)
        self._expect_turn(
            max((e.number for e in events if isinstance(e, s.TurnStarted)), default=0)
        )
        events.sort(key=event_seq)
        for event in events:
            self._take(event)

    def _take(self, event: Any) -> None:
        seq = event_seq(event)
        if seq <= self._last_seq:
            return  # read in the history and again live
        self._last_seq = seq
        for out in self._translator.translate(event, seq):
            if out.sequence > self._after:
                self._ready.append(out)

    def _read_log(self) -> None:
        """Reads what the log holds past the last position read."""
        while True:
            batch = self._store.notifications(self._position + 1, READ_BATCH)
            for notification in batch:
                self._position = notification.id
                if notification.originator_id not in self._ids:
                    continue
                event = self._store.decode(notification)
                if isinstance(event, s.TurnStarted | t.TurnOpened):
                    self._expect_turn(event.number)
                self._take(event)
            if len(batch) < READ_BATCH:
                return

    # -- the reader's side -------------------------------------------------

    def get(self, timeout: float | None = None) -> Event:
        """The next Event; waits up to ``timeout`` seconds (None: forever).

        Raises:
            TimeoutError: nothing came within ``timeout``.
            FollowClosedError: the follower was closed (or the session
                ended and every Event of it was read).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if self._ready:
                event = self._ready.popleft()
                if isinstance(event.msg, SessionClosedMsg):
                    self._ended = True
                return event
            if self._closed.is_set() or self._ended:
                msg = f"the follower of session {self.session_id!r} was closed"
                raise FollowClosedError(msg)
            if self._check_open is not None:
                self._check_open()
            seen = self._watch.count()  # before reading: no wake-up slips by
            self._read_log()
            if self._ready:
                continue
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                msg = f"no new event of session {self.session_id!r} in {timeout} s"
                raise TimeoutError(msg)
            self._watch.wait(seen, left)

    def __iter__(self) -> Iterator[Event]:
        while True:
            try:
                yield self.get()
            except FollowClosedError:
                return

    def close(self) -> None:
        """Ends the follower; a reader waiting in :meth:`get` stops soon."""
        self._closed.set()
        self._watch.bump()

    def __enter__(self) -> SessionFollower:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
