"""Session snapshots: taken on save every SNAPSHOT_INTERVAL events, so that
opening a long session reads its latest snapshot and the events after it."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from eventsourcing.persistence import EventStore, PersistenceError

from turnlog.domain.session import Session
from turnlog.domain.session_snapshot import SessionSnapshot

logger = logging.getLogger(__name__)

SNAPSHOT_INTERVAL = 100
"""A Session is snapshotted every this many of its events."""


def snapshot_sessions(
    snapshots: EventStore[Any], aggregates: Sequence[Any], events: Sequence[Any]
) -> None:
    """Snapshots each Session of a save whose new versions cross a multiple
    of SNAPSHOT_INTERVAL (best effort).

    Taken from the aggregate in memory, which is what was just saved; a
    lost snapshot only makes the next load read more events.
    """
    for aggregate in aggregates:
        # isinstance would run the aggregates' ABC metaclass's Python
        # __instancecheck__ for each aggregate of every save.
        if Session not in type(aggregate).__mro__:
            continue
        version = aggregate._version  # eventsourcing's ``version``, without its call
        if version % SNAPSHOT_INTERVAL >= len(events):
            continue  # no multiple of the interval among its new versions
        saved = sum(1 for event in events if event.originator_id == aggregate.id)
        if version // SNAPSHOT_INTERVAL > (version - saved) // SNAPSHOT_INTERVAL:
            try:
                snapshots.put([SessionSnapshot.take(aggregate)])
            except PersistenceError:
                logger.warning("could not snapshot %s", aggregate.session_id)
