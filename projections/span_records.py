"""The plain data of a trace: span records, their ids and times.

What :mod:`turnlog.projections.spans` folds a session's events into, kept
apart from the fold so exporters can use it without the domain events.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from uuid import UUID

import msgspec

Attribute = str | bool | int | float | list[str]
"""An attribute value: what OpenTelemetry allows, as far as turnlog needs."""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


class SpanEvent(msgspec.Struct, frozen=True, gc=False):
    """A timed annotation on a span (an exception, a warning)."""

    name: str
    time_ns: int
    attributes: dict[str, Attribute] = msgspec.field(default_factory=dict)


class SpanRecord(msgspec.Struct, frozen=True, gc=False):
    """One span, as plain data; ids are lowercase hex, as OTLP/JSON has them."""

    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    kind: str
    """``internal`` or ``client`` (a model call leaves the process)."""
    start_ns: int
    end_ns: int
    attributes: dict[str, Attribute]
    status: str = "unset"
    """``unset`` or ``error`` (turnlog never claims ``ok`` for anyone)."""
    status_message: str = ""
    events: tuple[SpanEvent, ...] = ()


def span_id_of(originator_id: UUID, originator_version: int) -> str:
    """The id of the span an event opens: 8 bytes of a hash of its identity."""
    key = f"turnlog-span:{originator_id}:{originator_version}".encode()
    return hashlib.sha256(key).digest()[:8].hex()


def child_call_span_id(child_session: str) -> str:
    """The id of the tool call span that runs ``child_session`` (an agent
    used as a tool): derived from the child's id, so the child's own fold
    names its parent span without reading the parent's log."""
    key = f"turnlog-child-call:{child_session}".encode()
    return hashlib.sha256(key).digest()[:8].hex()


def time_ns(moment: datetime) -> int:
    """Nanoseconds since the epoch, exactly (events keep microseconds)."""
    return (moment - _EPOCH) // _MICROSECOND * 1000
