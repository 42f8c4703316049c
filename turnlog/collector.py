"""The garbage collector set for a process whose sessions wait on models.

Every collection of CPython's cyclic garbage collector stops every thread:
while it runs, no request is served and no turn moves. Two settings keep
the service's collections few and short; each is measured in
bench/RESULTS.md.

- **Start-up objects frozen.** By the time the service starts serving,
  the interpreter holds tens of thousands of objects that live as long as
  the process: modules, classes, functions, pydantic's schemas, the event
  classes. Every full collection walked them all again (about 60,000,
  70 ms on a slow 2-core machine: ``bench/startup_objects.py``).
  ``gc.freeze`` moves them to a generation no collection visits.
- **A wide young generation.** Python starts a young collection every 700
  tracked objects allocated and not yet freed. A turn waiting a second on
  its model holds its coroutines, futures and requests for that second,
  so at that pace every collection finds them alive and passes them on,
  into the oldest generation at last, where what arrived since the last
  full collection soon passes a quarter of what lives there, and a full
  collection walks every live session again. With sessions arriving at
  200 a second that was a full collection every three seconds, each
  longer than the last as the live sessions grew (``bench/latency.py
  --mode arrivals --seconds 40 --gc-pauses``). A threshold of
  ``SERVICE_YOUNG_GENERATION`` lets most of a turn's objects be freed by
  their reference counts before any collection sees them: far fewer
  collections, and almost no full ones.

``turnlog serve`` owns its process and calls :func:`prepare_collector`
right before it serves. The embedded runtime never does: a library must
not change its host process's collector behind its back. A service that
embeds it can call it once it has started (the README says when).
"""

from __future__ import annotations

import gc

SERVICE_YOUNG_GENERATION = 20_000
"""The collector's first threshold in ``turnlog serve`` (Python's is 700)."""


def freeze_startup_objects() -> int:
    """Collects what start-up left as garbage, then freezes the rest.

    Returns how many objects are frozen. Call it once everything the
    process will need has been imported and set up, right before it
    starts serving.
    """
    gc.collect()  # garbage frozen would never be freed
    gc.freeze()
    return gc.get_freeze_count()


def widen_young_generation(objects: int = SERVICE_YOUNG_GENERATION) -> int:
    """Raises the collector's first threshold to ``objects``; returns the
    threshold in force.

    A threshold already higher is kept, and so is 0 (automatic collection
    off, someone's deliberate choice); the older generations' thresholds
    are left as they are.
    """
    first, *older = gc.get_threshold()
    if first == 0 or first >= objects:
        return first
    gc.set_threshold(objects, *older)
    return objects


def prepare_collector(young_generation: int = SERVICE_YOUNG_GENERATION) -> int:
    """Both settings, as ``turnlog serve`` makes them right before it serves;
    returns how many objects were frozen.

    ``young_generation`` 0 leaves the first threshold as it is (Python's
    own, or what the process set). Call it once, when everything the
    process needs is imported and set up. What exists then is left out of
    every later collection: still freed when nothing refers to it, but
    never found as part of a garbage cycle.
    """
    frozen = freeze_startup_objects()
    if young_generation:
        widen_young_generation(young_generation)
    return frozen


__all__ = [
    "SERVICE_YOUNG_GENERATION",
    "freeze_startup_objects",
    "prepare_collector",
    "widen_young_generation",
]
