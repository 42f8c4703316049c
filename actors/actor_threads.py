"""The threads of per-session actors: one excepthook for all of them.

``threading.Thread()`` makes each thread its own ``invoke_excepthook``
closure (a function, its five cells and their tuple), kept for the
thread's life. The hook only reads ``threading.excepthook`` when an
exception escapes the thread's target, which a pykka actor loop never
lets happen; one such closure serves every session's thread as well, and
a thousand open sessions then keep a thousand fewer sets of those objects
for the garbage collector to walk (issue 24).
"""

from __future__ import annotations

import itertools
import threading
from typing import Any

import pykka

_make_hook = getattr(threading, "_make_invoke_excepthook", None)
_SHARED_HOOK: Any = _make_hook() if _make_hook is not None else None
"""CPython's per-thread hook, made once (None where threading has none)."""

_numbers = itertools.count(1)


def start_actor_thread(actor: pykka.ThreadingActor) -> None:
    """Starts ``actor``'s loop on a thread of its own, as pykka would
    (``ThreadingActor._start_actor_loop``), with the shared excepthook."""
    thread = threading.Thread(
        target=actor._actor_loop,
        name=f"{type(actor).__name__}-{next(_numbers)}",
        daemon=actor.use_daemon_thread,
    )
    if _SHARED_HOOK is not None and hasattr(thread, "_invoke_excepthook"):
        thread._invoke_excepthook = _SHARED_HOOK
    thread.start()
