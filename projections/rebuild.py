"""Rebuilding views offline from the log, blue/green and resumable.

A view is rebuilt under a second name (``checkpoints.next``) while the old
one keeps serving; each batch of events is one transaction holding the
rows and the tracking position, so a rebuild killed half-way resumes from
its last batch when run again. When the new view has reached the end of
the log it replaces the old one in one transaction. Followers of the old
view (a live runtime) notice on their next commit that the tracking row
is another generation's, even at the same position, and re-read the view
instead of writing over it from what they had cached.

With ``verify`` the rebuilt view is compared with the live one (brought to
the same log position) and the differences are reported; nothing is
swapped.
"""

from __future__ import annotations

import contextlib
import copy
import gc
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import msgspec

from turnlog.domain.errors import UsageError
from turnlog.projections.anchors import SESSIONS_VIEW, check_no_head_lost
from turnlog.projections.checkpoints import CheckpointProjection
from turnlog.projections.executions import ExecutionProjection
from turnlog.projections.rows import Projection
from turnlog.projections.runner import ProjectionRunner
from turnlog.projections.sessions import SessionIndexProjection
from turnlog.projections.tables import ViewTables
from turnlog.projections.transcript import TranscriptProjection
from turnlog.store.log import Store

NEXT_SUFFIX = ".next"
"""Name suffix of a view being rebuilt beside the one serving."""

REBUILD_BATCH = 5000
"""Log entries a rebuild folds per transaction: offline, nothing waits on
its commits, and a killed rebuild resumes from its last one."""

_decoder = msgspec.json.Decoder()


def default_projections() -> list[Projection]:
    """Every view a runtime keeps, in the order it folds them."""
    return [
        CheckpointProjection(),
        TranscriptProjection(),
        ExecutionProjection(),
        SessionIndexProjection(),
    ]


class Progress(msgspec.Struct, frozen=True):
    """Where a rebuild is: events folded of the total, rate and time left."""

    view: str
    done: int
    total: int
    rate: float
    eta_seconds: float | None


class ViewDifference(msgspec.Struct, frozen=True):
    """A document that differs between the rebuilt and the live view."""

    part: str
    position: int
    live: Any
    rebuilt: Any


class ViewReport(msgspec.Struct, frozen=True):
    """What rebuilding one view did."""

    view: str
    events: int
    seconds: float
    swapped: bool
    differences: list[ViewDifference]


def select_projections(names: Sequence[str] | None) -> list[Projection]:
    """The projections named (all when ``names`` is empty)."""
    known = {p.name: p for p in default_projections()}
    if not names:
        return list(known.values())
    unknown = [name for name in names if name not in known]
    if unknown:
        msg = (
            f"no view named {', '.join(map(repr, unknown))}; "
            f"views: {', '.join(sorted(known))}"
        )
        raise UsageError(msg)
    return [known[name] for name in names]


def _renamed(projection: Projection, name: str) -> Projection:
    twin = copy.copy(projection)
    twin.name = name
    return twin


def rebuild(
    store: Store,
    names: Sequence[str] | None = None,
    *,
    verify: bool = False,
    progress: Callable[[Progress], None] | None = None,
    batch: int = REBUILD_BATCH,
) -> list[ViewReport]:
    """Rebuilds the named views (all by default) from the log, in one pass.

    Every view is folded from the same read of the log (reading and
    decoding is most of a rebuild's cost); each view keeps its own
    tracking, so a resumed rebuild skips what each already holds.
    """
    projections = select_projections(names)
    started = time.perf_counter()
    greens = [_renamed(p, p.name + NEXT_SUFFIX) for p in projections]
    runner = ProjectionRunner(store, greens)
    runner.batch_size = batch
    total = store.max_position()
    first = {g.name: runner.position(g.name) for g in greens}
    done = min(first.values())
    label = ", ".join(p.name for p in projections)
    while done < total:
        with _cyclic_gc_paused():
            done = runner.catch_up(until=min(done + batch, total))
        if progress is not None:
            elapsed = time.perf_counter() - started
            rate = (done - min(first.values())) / elapsed if elapsed > 0 else 0.0
            eta = (total - done) / rate if rate > 0 else None
            progress(Progress(label, done, total, rate, eta))
    seconds = time.perf_counter() - started
    if not verify and any(p.name == SESSIONS_VIEW for p in projections):
        # Before any view is swapped: all of them, or none.
        check_no_head_lost(runner.tables, SESSIONS_VIEW, SESSIONS_VIEW + NEXT_SUFFIX)
    reports = []
    for projection, green in zip(projections, greens, strict=True):
        events = runner.position(green.name) - first[green.name]
        if verify:
            ProjectionRunner(store, [projection]).catch_up(until=total)
            differences = _differences(runner.tables, projection.name, green.name)
            runner.tables.drop(green.name)
            reports.append(
                ViewReport(projection.name, events, seconds, False, differences)
            )
        else:
            runner.tables.swap(green.name, projection.name)
            reports.append(ViewReport(projection.name, events, seconds, True, []))
    return reports


@contextlib.contextmanager
def _cyclic_gc_paused() -> Iterator[None]:
    """Holds off Python's cycle collector while a batch is folded.

    A batch keeps thousands of decoded events and documents alive at once,
    so the collector, triggered by allocation counts, walked them again and
    again: about a seventh of a rebuild's time. Folds create no cycles
    (reference counting frees everything they drop), and the collector runs
    as usual between batches.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _documents(tables: ViewTables, view: str) -> dict[tuple[str, int], Any]:
    documents = {}
    for part in tables.parts(view):
        for position, raw in tables.range(view, part):
            documents[(part, position)] = _decoder.decode(raw)
    return documents


def _differences(tables: ViewTables, live: str, rebuilt: str) -> list[ViewDifference]:
    old, new = _documents(tables, live), _documents(tables, rebuilt)
    keys = sorted(set(old) | set(new))
    return [
        ViewDifference(key[0], key[1], old.get(key), new.get(key))
        for key in keys
        if old.get(key) != new.get(key)
    ]
