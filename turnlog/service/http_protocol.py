"""The HTTP connection of ``turnlog serve``: limits before the app.

uvicorn's httptools protocol, which ``turnlog serve`` runs on, bounds
nothing until a request reaches the app: headers of any size and number
are read, and a connection that never finishes its headers is kept
open for good (its keep-alive timer starts only after a response).
:class:`LimitedHttpProtocol` adds, per connection, what
:class:`~turnlog.service.limits.ConnectionLimits` states:

- the request line and headers together may have ``max_header_bytes``
  (counted as bytes arrive, so a header that never ends is refused as
  soon as it passes the limit: 414 for the request line, 431 for the
  rest) and ``max_headers`` fields (431);
- the headers must be complete ``header_timeout`` seconds after the
  connection opened or the request's first byte came (408 and closed
  if part of a request came, closed silently if nothing did);
- past ``max_connections`` (uvicorn's ``limit_concurrency``) a request
  gets a 503 problem, where uvicorn would answer in plain text.

Requests the parser cannot read (a method it does not know, a NUL in a
header, spaces in the path) get the 400 uvicorn gives them, written here
as ``application/problem+json`` like every other refusal; it can only
say that the request is not valid HTTP, since the parser stops at the
first bad byte. Which methods reach the app at all is llhttp's list
(GET, POST, PUT, DELETE, PATCH, OPTIONS, HEAD and the WebDAV ones...);
the app answers those it has no route for with a 405 problem. uvicorn
logs "Invalid HTTP request received." for every refusal that stops the
parser (414, 431 and 503 here too); the answer says which it was.

This leans on uvicorn's protocol class (its parser callbacks and
``send_400_response``), which uvicorn lets a server replace
(``Config(http=...)``); ``tests/service/test_http_limits.py`` pins the
behaviour against a real ``turnlog serve``, so an upgrade that changes
those names fails it.
"""

from __future__ import annotations

import asyncio
from http import HTTPStatus
from typing import Any, ClassVar

from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from turnlog.service.limits import ConnectionLimits
from turnlog.service.problems import PROBLEM_JSON, Problem


class _Refused(Exception):
    """Raised in a parser callback to stop reading a request (see _refuse)."""


class LimitedHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with :class:`ConnectionLimits`.

    A server uses a subclass made by :func:`protocol_with` (the limits are
    a class attribute: uvicorn makes the protocol of each connection).
    """

    limits: ClassVar[ConnectionLimits] = ConnectionLimits()

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self._refusal: Problem | None = None
        self._head_deadline: asyncio.TimerHandle | None = None
        self._in_head = True  # reading a request line and headers
        self._head_started = False  # some byte of this request came
        self._head_bytes = 0
        self._header_count = 0

    # -- the header deadline --

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_head_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_head_deadline()
        super().connection_lost(exc)

    def _arm_head_deadline(self) -> None:
        if self._head_deadline is None:
            self._head_deadline = self.loop.call_later(
                self.limits.header_timeout, self._head_timed_out
            )

    def _disarm_head_deadline(self) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def _head_timed_out(self) -> None:
        self._head_deadline = None
        if self.transport.is_closing():
            return
        idle = self.cycle is None or self.cycle.response_complete
        if self._head_started and idle:
            self._write_problem(
                Problem(
                    408,
                    f"the request's headers did not arrive within "
                    f"{self.limits.header_timeout:g} s",
                )
            )
        self.transport.close()

    # -- counting the head --

    def data_received(self, data: bytes) -> None:
        if self._in_head:
            self._head_bytes += len(data)
        super().data_received(data)
        if (
            self._in_head
            and self._head_bytes > self.limits.max_header_bytes
            and not self.transport.is_closing()
        ):
            self._refusal = self._head_too_large()
            self.send_400_response("")

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._head_started = True
        self._header_count = 0
        self._arm_head_deadline()

    def on_url(self, url: bytes) -> None:
        super().on_url(url)
        limit = self.limits.max_header_bytes
        if len(self.url) > limit:
            self._refuse(Problem(414, f"the URL may have at most {limit} bytes"))

    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_count += 1
        if self._header_count > self.limits.max_headers:
            self._refuse(
                Problem(
                    431, f"a request may have at most {self.limits.max_headers} headers"
                )
            )
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._disarm_head_deadline()
        self._in_head = False
        self._head_started = False
        self._head_bytes = 0
        # A head that came whole in one read was not seen growing.
        size = len(self.url) + sum(
            len(name) + len(value) for name, value in self.headers
        )
        if size > self.limits.max_header_bytes:
            self._refuse(self._head_too_large())
        if self._over_capacity():  # uvicorn's own answer would be text/plain
            self._refuse(
                Problem(
                    503,
                    f"the server serves at most {self.limits.max_connections} "
                    "connections at once; try again shortly",
                )
            )
        super().on_headers_complete()

    def _over_capacity(self) -> bool:
        """uvicorn's test for its ``limit_concurrency`` (connections or tasks)."""
        limit = self.limit_concurrency
        return limit is not None and (
            len(self.connections) >= limit or len(self.tasks) >= limit
        )

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._in_head = True  # the next bytes are the next request's

    def _head_too_large(self) -> Problem:
        limit = self.limits.max_header_bytes
        return Problem(
            431, f"the request line and headers may have at most {limit} bytes"
        )

    def _refuse(self, problem: Problem) -> None:
        """Stops the parser; uvicorn then calls ``send_400_response``."""
        self._refusal = problem
        raise _Refused(problem.detail)

    # -- refusals as problem+json --

    def send_400_response(self, msg: str) -> None:
        """Answers a request refused before the app, and closes.

        uvicorn calls this for a request its parser cannot read (``msg``
        says only that); a limit of this class set the refusal first.
        """
        problem = self._refusal or Problem(
            400,
            "the request is not valid HTTP/1.1 (its method, request line or "
            "a header could not be read)",
        )
        self._refusal = None
        self._disarm_head_deadline()
        self._write_problem(problem)
        self.transport.close()

    def _write_problem(self, problem: Problem) -> None:
        body = problem.body()
        head = [f"HTTP/1.1 {problem.status} {_reason(problem.status)}\r\n".encode()]
        for name, value in self.server_state.default_headers:
            head.extend([name, b": ", value, b"\r\n"])
        head.extend(
            [
                f"content-type: {PROBLEM_JSON}\r\n".encode(),
                f"content-length: {len(body)}\r\n".encode(),
                b"connection: close\r\n\r\n",
                body,
            ]
        )
        self.transport.write(b"".join(head))


def _reason(status: int) -> str:
    return HTTPStatus(status).phrase


def protocol_with(limits: ConnectionLimits) -> type[LimitedHttpProtocol]:
    """A protocol class holding connections to ``limits``."""

    class Limited(LimitedHttpProtocol):
        pass

    Limited.limits = limits
    return Limited


__all__ = ["LimitedHttpProtocol", "protocol_with"]
