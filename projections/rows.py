"""What a projection folds into: documents addressed by (part, position).

A view is a set of documents keyed by a partition (a session id) and a
position within it. Folds read and write through :class:`Rows`; the runner
that owns the SQL table and the tracking position decides when the rows
and the position are written, always together in one transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

import msgspec


class Rows(Protocol):
    """The documents of one view, as a fold sees them."""

    def get(self, part: str, position: int) -> Any:
        """The document at (part, position), or None.

        As stored (a dict or a list), or the very object last put there
        (folds may put a msgspec Struct and mutate it in place: it is
        encoded at commit).
        """
        ...

    def put(self, part: str, position: int, doc: Any) -> None:
        """Sets the document at (part, position) (JSON-like, or a Struct)."""
        ...


Entries = Sequence[tuple[int, Any]]
"""(log position, decoded event) pairs of one session, in log order."""


class Projection(Protocol):
    """A pure fold of log entries into a view partitioned by session.

    ``version`` names the fold's logic: changing the fold means a new
    version, and a view built by another version is rebuilt from the log.
    """

    name: str
    version: int
    handles: frozenset[type] | None
    """The event classes the fold reads (None: every event); entries of
    other classes never reach it."""

    def fold(self, rows: Rows, session_id: str, entries: Entries) -> None:
        """Applies a run of one session's entries (never empty) to the view.

        The runner decodes each log entry once for every view and hands
        each view a batch's entries session by session: a fold reads and
        writes its session's documents once a run, not once an event.
        Sessions are independent, so this equals folding the log entry by
        entry, which the runner does to name the entry a fold fails on.
        """
        ...


def session_of(event: object) -> str | None:
    """The session an event belongs to (every view is partitioned by it)."""
    session_id = getattr(event, "session_id", None)
    return session_id if isinstance(session_id, str) else None


def add_usage(totals: dict[str, int], usage: Mapping[str, int] | None) -> None:
    """Adds a call's token counts to running totals, in place.

    Every view keeps its totals in a dict of its own document, so adding in
    place is safe and spares a copy per model call.
    """
    for key, value in (usage or {}).items():
        totals[key] = totals.get(key, 0) + value


T = TypeVar("T", bound=msgspec.Struct)


def typed(doc: Any, kind: type[T], fresh: Callable[[], T]) -> T:
    """``doc`` as a ``kind`` Struct (``fresh()`` when there is none yet).

    A runner hands back the very Struct a fold put, so it is converted from
    its stored dict at most once a batch.
    """
    if type(doc) is kind:
        return doc
    if doc is None:
        return fresh()
    return msgspec.convert(doc, kind)
