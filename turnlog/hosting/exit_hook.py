"""Runtimes a program left open are closed when the interpreter exits.

A runtime left open must not keep its process alive, even when the program
dies of an uncaught exception. So every thread turnlog starts is a daemon,
and a runtime still open at exit is closed by an ``atexit`` hook. The two
work together: Python joins non-daemon threads before it runs ``atexit``
hooks, so with non-daemon actors the hook would never run; and daemon
threads alone would be frozen mid-work at exit, where the hook lets a save
in progress finish, stops the actors in order and releases the session
leases. Should the hook not get to run (``os._exit``, a kill), a
transaction cut short is rolled back whole and the lease is recognised as
gone, as after a crash. Sync tools and approval providers run on
``concurrent.futures`` pools, which Python lets finish before the hook.
"""

from __future__ import annotations

import atexit
import logging
import threading
import weakref
from typing import Protocol

logger = logging.getLogger(__name__)


class Closable(Protocol):
    """What the hook closes: a runtime (anything with ``close``)."""

    def close(self) -> None: ...


_open: weakref.WeakSet[Closable] = weakref.WeakSet()
"""Runtimes not closed yet; weak, so the exit hook keeps none of them alive."""
_open_lock = threading.Lock()


def close_at_exit(runtime: Closable) -> None:
    """Has ``runtime`` closed at exit unless :func:`closed` is called first."""
    with _open_lock:
        _open.add(runtime)


def closed(runtime: Closable) -> None:
    """Forgets ``runtime``: it was closed by its program."""
    with _open_lock:
        _open.discard(runtime)


@atexit.register
def _close_open_runtimes() -> None:
    """Closes, at interpreter exit, every runtime its program left open."""
    with _open_lock:
        left_open = list(_open)
    for runtime in left_open:
        try:
            runtime.close()
        except Exception:  # one runtime that fails to close must not stop the rest
            logger.warning("could not close %r at exit", runtime, exc_info=True)


__all__ = ["Closable", "close_at_exit", "closed"]
