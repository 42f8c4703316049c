"""Limits on what a client may send: the body here, the connection below.

A declared ``Content-Length`` over the body limit is refused at once; a
body sent in chunks is counted as it arrives and refused once it passes
the limit, so neither way can make the server buffer more than the limit.
(How deep its JSON may nest is :data:`turnlog.service.parsing.MAX_JSON_DEPTH`.)

:class:`ConnectionLimits` are what ``turnlog serve`` holds each HTTP
connection to before the app sees a request (see
:mod:`turnlog.service.http_protocol`): the size and count of the
request's headers, how long they may take to arrive, how long an idle
keep-alive connection stays open, and how many connections are served
at once.
"""

from __future__ import annotations

import dataclasses

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from turnlog.domain.errors import InvalidInputError
from turnlog.service.problems import Problem

MAX_BODY = 1024 * 1024
"""Bytes a request body may have by default (1 MiB)."""


class BodyTooLarge(Problem):
    """A chunked body went past the limit while it was read (a 413)."""


class BodyLimit:
    """ASGI middleware: a 413 problem for bodies over ``max_body`` bytes."""

    def __init__(self, app: ASGIApp, max_body: int = MAX_BODY) -> None:
        self.app = app
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        too_large = Problem(413, f"the body may have at most {self.max_body} bytes")
        for name, value in scope.get("headers", []):
            if name == b"content-length" and (
                not value.isdigit() or len(value) > 19 or int(value) > self.max_body
            ):
                await too_large.response()(scope, receive, send)
                return
        received = 0
        started = False

        async def counted() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body:
                    raise BodyTooLarge(413, too_large.detail)
            return message

        async def tracked(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, tracked)
        except BodyTooLarge:
            if not started:
                await too_large.response()(scope, receive, send)


@dataclasses.dataclass(frozen=True)
class ConnectionLimits:
    """What ``turnlog serve`` holds each HTTP connection to.

    Refusals are ``application/problem+json``, written by the connection
    itself since no app has seen the request yet.

    Args:
        max_header_bytes: bytes the request line and headers may have
            together (414 for a request line over it, else 431).
        max_headers: header fields a request may have (431 past it).
        header_timeout: seconds from a connection's opening, or from the
            first byte of a request on a kept-alive one, until the
            request's headers must be complete; then the connection is
            closed (with a 408 if part of a request came). Slow-loris
            clients, which open connections and send a byte now and then,
            hold nothing for longer. Streams and slow handlers are not
            limited by it: it ends once the headers are in.
        keep_alive_timeout: whole seconds an idle connection stays open
            after a response, waiting for the next request.
        max_connections: connections (and requests in flight) served at
            once; past it, a request gets a 503.
    """

    max_header_bytes: int = 16 * 1024
    max_headers: int = 100
    header_timeout: float = 10.0
    keep_alive_timeout: int = 5
    max_connections: int = 1000

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            if not getattr(self, field.name) > 0:
                msg = f"{field.name} must be above 0, not {getattr(self, field.name)}"
                raise InvalidInputError(msg)


__all__ = ["MAX_BODY", "BodyLimit", "ConnectionLimits"]
