"""An actor's "stopped" flag that is one object until someone waits on it.

pykka gives every actor a ``threading.Event`` for ``actor_stopped``: an
Event, its Condition, a lock, the Condition's deque of waiters and two
bound methods of the lock, six objects the cyclic collector walks for as
long as the actor lives. Nearly nobody waits on a session's actor to stop
(a test, a close that waits for passivation); every message asks whether
it has. So the flag is a plain attribute, and the Event is made only for
the first waiter (issue 24: a full collection's pause grows with the
objects each live session keeps).
"""

from __future__ import annotations

import threading

_LOCK = threading.Lock()
"""Orders setting the flag against a waiter making its Event: shared by
every flag, since it is held only for those two rare moments."""


class StopFlag:
    """What pykka reads of ``actor_stopped``: ``is_set``, ``set`` and ``wait``."""

    __slots__ = ("_event", "stopped")

    def __init__(self) -> None:
        self.stopped = False
        """Whether the actor has stopped: what ``is_set`` says, read
        without a call (the pool reads it before every message)."""
        self._event: threading.Event | None = None

    def is_set(self) -> bool:
        """Whether the actor has stopped."""
        return self.stopped

    def set(self) -> None:
        """Marks the actor stopped; wakes whoever waits."""
        with _LOCK:
            self.stopped = True
            event = self._event
        if event is not None:
            event.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Waits until the actor has stopped, or ``timeout`` seconds;
        returns whether it has."""
        if self.stopped:
            return True
        with _LOCK:
            if self.stopped:
                return True
            if self._event is None:
                self._event = threading.Event()
            event = self._event
        return event.wait(timeout)
