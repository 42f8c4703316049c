"""``GET /sessions/{id}/events``: the session's event stream over SSE.

Every durable event carries ``id:`` (its log position; see
:mod:`turnlog.service.feed`). A client that reconnects with
``Last-Event-ID`` (or ``?last_event_id=`` where it cannot set headers)
gets every durable event after that id, read from the log, then the live
tail, with no gap and no duplicate: the stream keeps one cursor and sends
only what lies after it, in log order, whether it comes from the feed's
buffer or from the log. That holds across processes on one PostgreSQL,
since the id is a place in the shared log. Streamed text deltas
(``agent_message_delta``) carry no id: they are sent live to streams
open when they happen, and never again. A comment line goes out every
``heartbeat`` seconds so that proxies keep an idle stream open. A stream
ends after the session's ``session_closed`` event. Each event's data is
the ``Event`` as JSON, its whole envelope included (``event_id``,
``timestamp``, ``trace_id``, ``schema_version``: see
:class:`turnlog.domain.protocol.Event`). Lines end with ``\n``
(:mod:`turnlog.service.sse_framing`), as on every stream of the service.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from sse_starlette.event import ServerSentEvent
from sse_starlette.sse import EventSourceResponse
from starlette.requests import Request
from starlette.routing import Route

from turnlog.domain.protocol import SessionClosedMsg, encode_json
from turnlog.service.context import ServiceContext
from turnlog.service.feed import Key, entries_after, parse_event_id
from turnlog.service.parsing import path_session_id
from turnlog.service.problems import Problem
from turnlog.service.sse_framing import sse_event, sse_response


class EventStream:
    """The SSE face of a :class:`ServiceContext`."""

    def __init__(self, context: ServiceContext) -> None:
        self.context = context

    def routes(self) -> list[Route]:
        """The stream's route."""
        return [Route("/sessions/{session_id}/events", self.stream, methods=["GET"])]

    async def stream(self, request: Request) -> EventSourceResponse:
        tenant = self.context.tenant(request)
        session_id = path_session_id(request.path_params["session_id"])
        owned = await self.context.owned_async(tenant, session_id)
        given = request.headers.get("last-event-id")
        field = "Last-Event-ID"
        if given is None:
            given, field = request.query_params.get("last_event_id"), "last_event_id"
        cursor: Key = (0, 0)
        if given is not None and given.strip():
            try:
                cursor = parse_event_id(given)
            except ValueError as error:
                raise Problem(422, str(error), field=field) from None
        return sse_response(
            self._events(owned.session_id, cursor), heartbeat=self.context.heartbeat
        )

    async def _events(
        self, session_id: str, cursor: Key
    ) -> AsyncIterator[ServerSentEvent]:
        feeds = self.context.feeds
        transcripts = self.context.runtime.transcript
        # The delta pump runs before the first event goes out: a client that
        # has read anything from the stream gets every later delta.
        self.context.pumps.follow(session_id)
        try:
            await asyncio.to_thread(self.context.pumps.start, session_id)
            feed, listener = feeds.open(session_id)
            try:
                while True:
                    listener.wake.clear()
                    while listener.deltas:
                        delta = listener.deltas.popleft()
                        yield sse_event(encode_json(delta).decode())
                    entries = await entries_after(feed, transcripts, cursor)
                    for entry in entries:
                        cursor = entry.key
                        yield sse_event(
                            encode_json(entry.event).decode(), event_id=entry.event_id
                        )
                        if isinstance(entry.event.msg, SessionClosedMsg):
                            return
                    if entries or cursor < feed.floor or listener.deltas:
                        continue
                    await listener.wake.wait()
            finally:
                feeds.close(feed, listener)
        finally:
            self.context.pumps.unfollow(session_id)


__all__ = ["EventStream"]
