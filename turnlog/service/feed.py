"""A session's durable event stream, read from the log by position.

Every durable EventMsg of a session comes from one stored domain event at
one log position; a domain event may yield several messages (a model step
with an answer yields ``agent_message`` and ``model_step_completed``). An
entry's key is therefore ``(position, index)``, and its SSE id is the log
position alone for the first message of a position (the usual case) and
``POSITION:INDEX`` for the others. Log positions, not the session's own
``Event.sequence``, because a position names one stored event in the
whole log, the same in every process on the same database, and is what
reading "after" means in SQL.

One :class:`SessionFeed` per session with open streams reads new entries
from the log (woken by a :class:`~turnlog.service.log_tail.CommitSignal`)
into a bounded buffer, and every stream of that session takes what is
after its own cursor. The feed never waits for a stream: a stream that
falls behind the buffer reads what it missed from the log itself, so a
slow client costs its own reads, never the session's progress or another
client's. Streamed text deltas are not in the log: a feed passes them on
as they come, and they are never replayed.
"""

from __future__ import annotations

import asyncio
import bisect
import collections
import logging
import re
from typing import NamedTuple

from turnlog.domain.chain import event_seq
from turnlog.domain.protocol import Event
from turnlog.domain.translation import EventTranslator
from turnlog.projections.readers import Transcripts
from turnlog.service.log_tail import CommitSignal

logger = logging.getLogger(__name__)

Key = tuple[int, int]
"""(log position, index of the message among those of that position)."""

BUFFER = 2048
"""Entries a feed keeps for its streams; older ones are read from the log."""

DELTA_BUFFER = 1024
"""Deltas waiting for one slow stream; past it, the oldest are dropped."""

_EVENT_ID = re.compile(r"([0-9]{1,19})(?::([0-9]{1,9}))?")
_MAX_POSITION = 2**63 - 1


class StreamEntry(NamedTuple):
    """One durable message of a session, with its place in the log."""

    position: int
    nth: int
    """Which message of those from the stored event at ``position`` (0 on)."""
    event: Event

    @property
    def key(self) -> Key:
        """Where the entry is: (log position, index)."""
        return (self.position, self.nth)

    @property
    def event_id(self) -> str:
        """The SSE id: ``POSITION``, or ``POSITION:INDEX`` past the first."""
        return str(self.position) if self.nth == 0 else f"{self.position}:{self.nth}"


def parse_event_id(text: str) -> Key:
    """The key an SSE id names; raises ValueError for anything else."""
    # ASCII digits only (str.isdigit also takes "²"), and a position that
    # fits the log's 64-bit integers.
    found = _EVENT_ID.fullmatch(text.strip())
    if found is None or int(found.group(1)) > _MAX_POSITION:
        msg = f"not an event id of this stream: {text!r}"
        raise ValueError(msg)
    position, index = found.groups()
    return (int(position), int(index) if index is not None else 0)


def read_entries(
    transcripts: Transcripts,
    session_id: str,
    translator: EventTranslator,
    from_position: int = 1,
) -> list[StreamEntry]:
    """The session's entries from ``from_position`` on, read from the log.

    ``translator`` must have seen every earlier event of the session (a
    new one for ``from_position`` 1).
    """
    entries = []
    for item in transcripts.all(session_id, from_position):
        event = item.event()
        for index, message in enumerate(translator.translate(event, event_seq(event))):
            entries.append(StreamEntry(item.position, index, message))
    return entries


class Listener:
    """One open stream's mailbox at a feed: a wake-up and its deltas."""

    def __init__(self) -> None:
        self.wake = asyncio.Event()
        self.deltas: collections.deque[Event] = collections.deque(maxlen=DELTA_BUFFER)


class SessionFeed:
    """Reads one session's new entries from the log for all its streams."""

    def __init__(
        self,
        session_id: str,
        transcripts: Transcripts,
        signal: CommitSignal,
        buffer: int = BUFFER,
    ) -> None:
        self.session_id = session_id
        self._transcripts = transcripts
        self._signal = signal
        self._buffer = buffer
        self.entries: list[StreamEntry] = []
        self.keys: list[Key] = []
        self.floor: Key = (0, 0)
        """Every entry after this key is in ``entries`` (once ``ready``)."""
        self.ready = asyncio.Event()
        self.listeners: set[Listener] = set()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Starts reading (in the running loop)."""
        self._signal.watch(self.session_id)
        self._task = asyncio.get_running_loop().create_task(self._follow())

    def stop(self) -> None:
        """Stops reading."""
        if self._task is not None:
            self._task.cancel()

    async def _follow(self) -> None:
        translator = EventTranslator(self.session_id)
        last = 0
        while True:
            try:
                new = await asyncio.to_thread(
                    read_entries,
                    self._transcripts,
                    self.session_id,
                    translator,
                    last + 1,
                )
            except Exception:  # a closed runtime, a lost database: try again
                logger.warning(
                    "stream of %s cannot read the log", self.session_id, exc_info=True
                )
                new = []
            if new:
                self._append(new)
                last = new[-1].position
            if new or not self.ready.is_set():
                self.ready.set()
                self._wake_all()
            await self._signal.wait(self.session_id)

    def _append(self, new: list[StreamEntry]) -> None:
        self.entries.extend(new)
        self.keys.extend(entry.key for entry in new)
        if len(self.entries) > 2 * self._buffer:  # trim now and then, not per entry
            cut = len(self.entries) - self._buffer
            self.floor = self.keys[cut - 1]
            del self.entries[:cut]
            del self.keys[:cut]

    def after(self, cursor: Key) -> list[StreamEntry]:
        """The buffered entries after ``cursor`` (which must be >= floor)."""
        return self.entries[bisect.bisect_right(self.keys, cursor) :]

    def publish_delta(self, event: Event) -> None:
        """Passes a streamed delta to every open stream of the session."""
        for listener in self.listeners:
            listener.deltas.append(event)
            listener.wake.set()

    def _wake_all(self) -> None:
        for listener in self.listeners:
            listener.wake.set()


class Feeds:
    """The feeds of sessions with open streams, one per session."""

    def __init__(
        self, transcripts: Transcripts, signal: CommitSignal, buffer: int = BUFFER
    ) -> None:
        self._transcripts = transcripts
        self.signal = signal
        self.buffer = buffer
        """Entries each feed keeps (a stream further behind reads the log)."""
        self._feeds: dict[str, SessionFeed] = {}

    def open(self, session_id: str) -> tuple[SessionFeed, Listener]:
        """The session's feed (started if needed) and a new listener on it."""
        feed = self._feeds.get(session_id)
        if feed is None:
            feed = SessionFeed(session_id, self._transcripts, self.signal, self.buffer)
            self._feeds[session_id] = feed
            feed.start()
        listener = Listener()
        feed.listeners.add(listener)
        return feed, listener

    def close(self, feed: SessionFeed, listener: Listener) -> None:
        """Removes a listener; a feed nobody listens to stops."""
        feed.listeners.discard(listener)
        if not feed.listeners and self._feeds.get(feed.session_id) is feed:
            del self._feeds[feed.session_id]
            feed.stop()
            # Else the signal keeps a wake-up for every session ever
            # streamed, and every commit looks at all of them.
            self.signal.forget(feed.session_id)

    def open_count(self) -> int:
        """How many sessions have a feed (an open stream) now."""
        return len(self._feeds)

    def publish_delta(self, event: Event) -> None:
        """Passes a delta to the streams of its session, if any are open."""
        feed = self._feeds.get(event.session_id)
        if feed is not None:
            feed.publish_delta(event)

    def stop_all(self) -> None:
        """Stops every feed."""
        for feed in self._feeds.values():
            feed.stop()
        self._feeds.clear()


async def entries_after(
    feed: SessionFeed,
    transcripts: Transcripts,
    cursor: Key,
) -> list[StreamEntry]:
    """What a stream at ``cursor`` sends next: from the buffer, else the log.

    Returns an empty list when nothing is after ``cursor`` yet.
    """
    await feed.ready.wait()
    if cursor >= feed.floor:
        return feed.after(cursor)
    # Fallen behind the buffer: read the gap from the log, up to the floor
    # as it is once the read is done (what lies beyond is in the buffer).
    entries = await asyncio.to_thread(
        read_entries, transcripts, feed.session_id, EventTranslator(feed.session_id)
    )
    floor = feed.floor
    return [entry for entry in entries if cursor < entry.key <= floor]


__all__ = [
    "BUFFER",
    "Feeds",
    "Key",
    "Listener",
    "SessionFeed",
    "StreamEntry",
    "entries_after",
    "parse_event_id",
    "read_entries",
]
