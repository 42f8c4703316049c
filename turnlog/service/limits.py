"""A limit on the size of request bodies, before any handler reads them.

A declared ``Content-Length`` over the limit is refused at once; a body
sent in chunks is counted as it arrives and refused once it passes the
limit, so neither way can make the server buffer more than the limit.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

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
                not value.isdigit() or int(value) > self.max_body
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


__all__ = ["MAX_BODY", "BodyLimit"]
