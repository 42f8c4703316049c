"""How every stream of the service frames Server-Sent Events.

Lines end with ``\\n``, and an event ends with a blank line, so events
are separated by ``\\n\\n``, as the AG-UI SDK's own encoder
(``ag_ui.encoder.EventEncoder``) writes them. The SSE standard also
allows ``\\r\\n``, sse-starlette's default, but clients that split the
stream on ``\\n\\n`` alone (``@ag-ui/client``'s ``HttpAgent`` 1.0) never
find an event in it. Every field line of an event, the keep-alive
comments included, is written here, with this one line end.
"""

from __future__ import annotations

from collections.abc import AsyncIterable

from sse_starlette.event import ServerSentEvent
from sse_starlette.sse import EventSourceResponse

LINE_END = "\n"
"""What ends each line of a stream (a blank line ends an event)."""

STREAM_HEADERS = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
"""Headers of every stream: nothing in between may cache or buffer it."""


def sse_event(data: str, *, event_id: str | None = None) -> ServerSentEvent:
    """An event of ``data`` (and its ``id:``), framed with :data:`LINE_END`."""
    return ServerSentEvent(data, id=event_id, sep=LINE_END)


def sse_response(
    events: AsyncIterable[ServerSentEvent | bytes], *, heartbeat: float
) -> EventSourceResponse:
    """A ``text/event-stream`` response of ``events``.

    Args:
        events: the events, as :func:`sse_event` makes them, or bytes
            already framed with :data:`LINE_END` (as the AG-UI encoder
            writes them).
        heartbeat: seconds between keep-alive comments (0: none).
    """
    return EventSourceResponse(
        events, ping=heartbeat, sep=LINE_END, headers=STREAM_HEADERS
    )


__all__ = ["LINE_END", "STREAM_HEADERS", "sse_event", "sse_response"]
