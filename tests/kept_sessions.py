"""What the tests of sessions nobody holds share: how many sessions this
process keeps, and a bounded wait for the runtime to let them go."""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable

from turnlog.actors.activation import Activation


def eventually(predicate: Callable[[], bool], timeout: float = 20.0) -> bool:
    """Whether ``predicate`` holds within ``timeout`` (looked at every 20 ms)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        threading.Event().wait(0.02)
    return True


def activations() -> int:
    """Sessions the runtimes of this process keep in memory."""
    gc.collect()
    return sum(1 for obj in gc.get_objects() if isinstance(obj, Activation))
