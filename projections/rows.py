"""What a projection folds into: documents addressed by (part, position).

A view is a set of documents keyed by a partition (a session id) and a
position within it. Folds read and write through :class:`Rows`; the runner
that owns the SQL table and the tracking position decides when the rows
and the position are written, always together in one transaction.
"""

from __future__ import annotations

from typing import Any, Protocol, TypeVar

import msgspec


class Rows(Protocol):
    """The documents of one view, as a fold sees them."""

    def get(self, part: str, position: int) -> Any:
        """The document at (part, position), or None.

        As stored (a dict or a list), or the very object last put there (folds may put
        a msgspec Struct and mutate it in place: it is encoded at commit).
        """
        ...

    def put(self, part: str, position: int, doc: Any) -> None:
        """Sets the document at (part, position) (a dict or a Struct)."""
        ...


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

    def fold(self, rows: Rows, session_id: str, position: int, event: object) -> None:
        """Applies the event at log ``position`` of ``session_id`` to the view.

        The runner decodes each entry once and finds its session once for
        every view; entries of no session never reach a fold.
        """
        ...


def session_of(event: object) -> str | None:
    """The session an event belongs to (every view is partitioned by it)."""
    session_id = getattr(event, "session_id", None)
    return session_id if isinstance(session_id, str) else None


T = TypeVar("T", bound=msgspec.Struct)


def typed(doc: Any, kind: type[T], fresh: T) -> tuple[T, bool]:
    """``doc`` as a ``kind`` Struct (``fresh`` when there is none yet).

    Returns it and whether it is new. A runner hands back the very Struct a
    fold put, so it is converted from its stored dict at most once a batch.
    """
    if isinstance(doc, kind):
        return doc, False
    if doc is None:
        return fresh, True
    return msgspec.convert(doc, kind), False
