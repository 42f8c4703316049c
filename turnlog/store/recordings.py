"""A save's Recordings: its events at their log positions, for the listeners."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from eventsourcing.persistence import Notification, Recording, StoredEvent


def recordings_of(
    events: Sequence[Any], stored: Sequence[StoredEvent], positions: Sequence[int]
) -> list[Recording[uuid.UUID]]:
    """What the Store's listeners get for a save: each event with its stored
    row as the Notification at its position.

    eventsourcing's Recording and Notification are frozen dataclasses; each
    is made here as its ``__init__`` would make it, without that Python call
    (two an event, a sixth of a save's Python calls).
    """
    recordings: list[Recording[uuid.UUID]] = []
    for event, row, position in zip(events, stored, positions, strict=True):
        notification = object.__new__(Notification)
        notification.__dict__.update(vars(row), id=position)
        recording = object.__new__(Recording)
        fields = recording.__dict__
        fields["domain_event"] = event
        fields["notification"] = notification
        recordings.append(recording)
    return recordings
