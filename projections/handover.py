"""The recordings this process's saves hand the view runner, to fold as they are.

A save holds the very domain events it wrote and their log positions
(eventsourcing ``Recording``s, passed to every Store listener). Reading
them back from the log and decoding them again is a third of the view
runner's work; this keeps them for it instead.

They are folded only where they are the whole log: a run of positions
that begins right after the runner's and has no hole. Anything else (a
commit of another process, or of this one whose listener has not run yet,
a position a rolled-back transaction left unused, a runner that fell
behind and had its recordings dropped) is a gap, and the runner reads
from the log from its position, as it does with nothing handed over. So
nothing is folded twice (positions at or below the runner's are dropped)
or skipped (a run never passes a position it was not handed).

The events are shared, not copied: domain events are frozen, and the
aggregates copy what they keep of an event's lists and dicts as they apply
it, so what a fold is handed is what the log holds. A test compares every
recording with its stored bytes once sessions have gone on.
"""

from __future__ import annotations

import itertools
import threading
import uuid
from collections.abc import Sequence

from eventsourcing.persistence import Recording

HANDOVER_LIMIT = 4096
"""Recordings kept for the runner at most (a few megabytes). Past it the
oldest are dropped and read from the log when their turn comes: a runner
that stopped following (a standby process, or one whose store fails)
holds no more. A following one takes them every gathering interval
(0.2 s), in which one busy process saves a thousand or two."""


class Handover:
    """Recordings given by saves, taken by the runner in log order.

    Thread-safe: saves give from their own threads, the runner takes on
    the follower's thread or a reader's.

    Args:
        limit: Recordings kept at most (the oldest given are dropped).
    """

    def __init__(self, limit: int = HANDOVER_LIMIT) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._held: dict[int, Recording[uuid.UUID]] = {}
        self._folded = 0
        """The runner's position: recordings at or below it are not kept."""

    def __len__(self) -> int:
        return len(self._held)

    def give(self, recordings: Sequence[Recording[uuid.UUID]]) -> None:
        """Keeps ``recordings`` (of one save) until the runner takes them."""
        with self._lock:
            held, folded = self._held, self._folded
            for recording in recordings:
                position = recording.notification.id
                if position > folded:
                    held[position] = recording
            excess = len(held) - self.limit
            if excess > 0:
                # The dict keeps the order recordings were given in, which
                # is about their log order: drop the oldest.
                for position in list(itertools.islice(held, excess)):
                    del held[position]

    def take(self, start: int, limit: int) -> list[Recording[uuid.UUID]]:
        """The recordings at ``start``, ``start + 1``, ... up to the first
        position not held, at most ``limit``; empty if ``start`` is not held.

        The runner has folded up to ``start - 1``: older recordings are
        dropped.
        """
        with self._lock:
            self._drop_through(start - 1)
            held = self._held
            run: list[Recording[uuid.UUID]] = []
            position = start
            while len(run) < limit:
                recording = held.pop(position, None)
                if recording is None:
                    break
                run.append(recording)
                position += 1
            return run

    def folded(self, position: int) -> None:
        """The runner folded up to ``position``: drops what it will not take."""
        with self._lock:
            self._drop_through(position)

    def _drop_through(self, position: int) -> None:
        if position <= self._folded:
            return
        self._folded = position
        held = self._held
        if held:
            for stale in [p for p in held if p <= position]:
                del held[stale]
