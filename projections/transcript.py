"""The transcript view: each session's events, positioned for paging.

The view is an index, not a copy: it files the log position of every
event under its session. A page reads the positions from the view and the
events themselves from the log, so a transcript item is the stored event
verbatim (turned back into a domain event by the log's own mapper,
upcasters included) and replays into the exact EventMsg stream the
session produced live. Copying each event's state into the view made a
rebuild write the whole log a second time.

Positions are filed in chunks: each session's open chunk, the one growing,
is the document at position 0 (``{"positions": [...]}``); when it holds
``CHUNK`` positions it is filed as a plain list at its first position and
a new one opens. A rebuild so writes a row per ``CHUNK``
events instead of one per event. Chunks are cut by count alone, so the
view is the same whatever batches the log was folded in.
"""

from __future__ import annotations

from typing import Any

from turnlog.domain.lineage import SessionForked
from turnlog.projections.rows import Entries, Rows

CHUNK = 64
"""Positions a transcript chunk lists before the next one opens."""

OPEN = 0
"""Position of each session's open chunk; filed chunks sit at their first."""
SOURCE = "source"
"""The open chunk's key naming a fork's source: [session id, last position
shared]. The fork's items before its own are the source's up to there
(read, not filed again: turnlog.domain.lineage)."""


class TranscriptProjection:
    """Files every event's log position under its session."""

    name = "transcript"
    version = 4
    handles: frozenset[type] | None = None  # every event is listed

    def fold(self, rows: Rows, session_id: str, entries: Entries) -> None:
        open_chunk: dict[str, Any] | None = rows.get(session_id, OPEN)
        source = None if open_chunk is None else open_chunk.get(SOURCE)
        for position, event in entries:
            if isinstance(event, SessionForked):
                source = [event.source_session_id, event.source_position]
            if open_chunk is None:
                open_chunk = {"positions": [position]}
            elif len(open_chunk["positions"]) >= CHUNK:
                filed = open_chunk["positions"]
                rows.put(session_id, filed[0], filed)
                open_chunk = {"positions": [position]}
            else:
                open_chunk["positions"].append(position)
        assert open_chunk is not None  # a fold has entries
        if source is not None:
            open_chunk[SOURCE] = source
        rows.put(session_id, OPEN, open_chunk)
