"""The transcript view: each session's events, positioned for paging.

The view is an index, not a copy: one tiny row per event, filed under its
session and keyed by log position. A page reads the positions from the
view and the events themselves from the log, so a transcript item is the
stored event verbatim (turned back into a domain event by the log's own
mapper, upcasters included) and replays into the exact EventMsg stream
the session produced live. Copying each event's state into the view made
a rebuild write the whole log a second time.
"""

from __future__ import annotations

from typing import Any

from eventsourcing.persistence import Notification

from turnlog.projections.rows import Rows, session_of

_INDEXED: dict[str, Any] = {}
"""Every transcript row's document: the position is the whole index."""


class TranscriptProjection:
    """Files every event's log position under its session."""

    name = "transcript"
    version = 2

    def fold(self, rows: Rows, notification: Notification, event: object) -> None:
        session_id = session_of(event)
        if session_id is not None:
            rows.put(session_id, notification.id, _INDEXED)
