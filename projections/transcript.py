"""The transcript view: each session's events, positioned for paging.

Rows are the stored events themselves (topic, aggregate, version and the
stored JSON state, verbatim), filed under their session and keyed by log
position. A transcript page can therefore be turned back into domain
events with the log's own mapper, upcasters included, and replayed into
the exact EventMsg stream the session produced live.
"""

from __future__ import annotations

from typing import Any

import msgspec
from eventsourcing.persistence import Notification

from turnlog.projections.rows import Rows


class TranscriptRow(msgspec.Struct, frozen=True):
    """One positioned transcript item: a stored event of the session."""

    sequence: int
    topic: str
    originator_id: str
    originator_version: int
    state: msgspec.Raw


class TranscriptProjection:
    """Files every event under its session."""

    name = "transcript"
    version = 1

    def fold(self, rows: Rows, notification: Notification, event: object) -> None:
        session_id: Any = getattr(event, "session_id", None)
        if not isinstance(session_id, str):
            return
        rows.put(
            session_id,
            notification.id,
            {
                "sequence": notification.id,
                "topic": notification.topic,
                "originator_id": str(notification.originator_id),
                "originator_version": notification.originator_version,
                "state": msgspec.Raw(notification.state),
            },
        )
