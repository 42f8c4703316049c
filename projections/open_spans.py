"""The spans of one trace that have begun and not yet ended.

What :class:`~turnlog.projections.spans.SpanFold` keeps between events,
by key: a span opens (under a parent's key, if it has one), gathers
events and attributes, and ends as a :class:`SpanRecord`. Ending a span
first ends every child still open, as unfinished. Which event opens or
ends which span is the fold's.
"""

from __future__ import annotations

from typing import Any

import msgspec

from turnlog.projections.span_records import (
    Attribute,
    SpanEvent,
    SpanRecord,
    span_id_of,
)

UNFINISHED = "unfinished"
"""Status message of a span the log never ended."""

SESSION_KEY = "session"
"""The key of the session's own span among the open ones."""


class OpenSpan(msgspec.Struct, gc=False):
    """A span begun and not yet ended."""

    span_id: str
    parent_id: str | None
    name: str
    kind: str
    start_ns: int
    attributes: dict[str, Attribute]
    events: list[SpanEvent] = msgspec.field(default_factory=list)
    children: list[str] = msgspec.field(default_factory=list)
    """Keys of spans that end, at the latest, with this one."""


class OpenSpans:
    """The open spans of one session's trace, by key."""

    def __init__(self, session_id: str, trace_id: str) -> None:
        self.session_id = session_id
        self.trace_id = trace_id
        """The trace the spans end in (a child session joins its root's)."""
        self._open: dict[str, OpenSpan] = {}

    def __contains__(self, key: str) -> bool:
        return key in self._open

    def get(self, key: str) -> OpenSpan | None:
        """The open span ``key``, if it is open."""
        return self._open.get(key)

    def begin(
        self,
        key: str,
        event: Any,
        at: int,
        name: str,
        attributes: dict[str, Attribute],
        *,
        kind: str = "internal",
        parent: str | None = None,
    ) -> OpenSpan:
        """Opens span ``key``, identified by ``event`` (the one that opens it)."""
        parent_span = self._open.get(parent) if parent is not None else None
        span = OpenSpan(
            span_id=span_id_of(event.originator_id, event.originator_version),
            parent_id=parent_span.span_id if parent_span is not None else None,
            name=name,
            kind=kind,
            start_ns=at,
            attributes={"gen_ai.conversation.id": self.session_id, **attributes},
        )
        if parent_span is not None:
            parent_span.children.append(key)
        self._open[key] = span
        return span

    def end(
        self,
        key: str,
        at: int,
        *,
        error: str | None = None,
        unfinished: bool = False,
        attributes: dict[str, Attribute] | None = None,
    ) -> list[SpanRecord]:
        """Ends span ``key`` (and first any child still open) at ``at``."""
        span = self._open.pop(key, None)
        if span is None:
            return []
        ended: list[SpanRecord] = []
        for child in span.children:
            if child in self._open:
                ended += self.end(child, at, unfinished=True)
        attrs = dict(span.attributes)
        attrs.update(attributes or {})
        status, message = ("error", error) if error is not None else ("unset", "")
        if unfinished:
            attrs["turnlog.unfinished"] = True
            status, message = "error", UNFINISHED
        ended.append(
            SpanRecord(
                trace_id=self.trace_id,
                span_id=span.span_id,
                parent_id=span.parent_id,
                name=span.name,
                kind=span.kind,
                start_ns=span.start_ns,
                end_ns=at,
                attributes=attrs,
                status=status,
                status_message=message,
                events=tuple(span.events),
            )
        )
        return ended

    def end_all(self, at: int) -> list[SpanRecord]:
        """Ends every open span at ``at``: work cut off as unfinished, the
        session's own span as still open (an open session is not cut off)."""
        ended = []
        for key in list(self._open):
            if key in self._open and key != SESSION_KEY:
                ended += self.end(key, at, unfinished=True)
        return ended + self.end(
            SESSION_KEY, at, attributes={"turnlog.session.closed": False}
        )
