"""``turnlog serve`` keeps its start-up objects out of the collector's way.

By the time the service starts serving, the interpreter holds tens of
thousands of objects the cyclic garbage collector tracks and will never
free: modules, classes, functions, pydantic's schemas, the event classes.
Every full collection walks them all again (about 60,000, 70 ms on a
slow 2-core machine: ``bench/startup_objects.py``), and while it does,
no request is served and no turn moves: a pause in every request's
latency. ``gc.freeze`` moves them to a generation no collection visits,
so a full collection walks only what serving has made since.

Only where turnlog owns the process: a library must not change its host
process's collector, so the embedded runtime leaves this to the
application (the README says how).
"""

from __future__ import annotations

import gc


def freeze_startup_objects() -> int:
    """Collects what start-up left as garbage, then freezes the rest.

    Returns how many objects are frozen. Call it once everything the
    process will need has been imported and set up, right before it
    starts serving.
    """
    gc.collect()  # garbage frozen would never be freed
    gc.freeze()
    return gc.get_freeze_count()


__all__ = ["freeze_startup_objects"]
