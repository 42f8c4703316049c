"""The session actors a runtime runs now, and a wait for fewer of them.

A session nobody calls passivates once idle: its actor stops. A service
that drains before a deploy, or a test that counts memory, needs to know
when that has happened; this is the event it waits on
(``Runtime.wait_live_sessions``) instead of polling ``live_sessions``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from turnlog.actors.activation import Activation


class LiveSessions:
    """Counts the live activations ``activations`` lists; woken by ``changed``.

    ``activations`` takes the runtime's lock; ``changed`` is called with no
    activation's lock held (Activation.passivate calls it after releasing
    its own), so the lock order is always this condition, then the runtime's.
    """

    def __init__(self, activations: Callable[[], list[Activation]]) -> None:
        self._activations = activations
        self._changed = threading.Condition()

    def changed(self) -> None:
        """A session passivated, or the runtime closed: waiters look again."""
        with self._changed:
            self._changed.notify_all()

    def count(self) -> int:
        """How many session actors run now."""
        return sum(1 for activation in self._activations() if activation.live())

    def wait(self, at_most: int, timeout: float | None) -> bool:
        """Waits until at most ``at_most`` session actors run, and those
        that passivated have stopped; False on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._changed:
            if not self._changed.wait_for(lambda: self.count() <= at_most, timeout):
                return False
        for activation in self._activations():
            if activation.live():
                continue
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            # True at once once its actor is gone; an ended session (closed,
            # failed) has nothing left to wait for either.
            if not activation.wait_passivated(left) and not activation.ended():
                return False
        return True
