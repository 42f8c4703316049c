"""A fake OpenAI-style HTTP server on 127.0.0.1, scriptable per test.

It speaks the two APIs as their public documentation describes them:

- Responses (``POST /v1/responses``, ``stream: true``): SSE events with
  ``event:`` and ``data:`` lines (``response.created`` ...
  ``response.output_text.delta`` ... ``response.completed``), no
  ``[DONE]``; ``POST /v1/responses/compact`` answers one JSON object.
- Chat Completions (``POST /v1/chat/completions``): ``data:`` lines of
  ``chat.completion.chunk`` objects, tool-call deltas by index, a usage
  chunk with empty ``choices`` when ``stream_options.include_usage`` is
  set, and ``data: [DONE]``.
- Errors: ``{"error": {"message", "type", "param", "code"}}``.
- Anthropic Messages (``POST /v1/messages``): see ``fake_anthropic.py``.

Bodies are sent with chunked transfer encoding over HTTP/1.1 keep-alive
(one chunk per event), so a client can reuse its connection, and a cut
stream is a connection closed before the final chunk. Each request takes
the next scripted action (``script(...)``), else ``default``; every
request is recorded (path, headers, JSON body, arrival time, client port).

Run as a script (``python fake_openai.py --chunks 200``) it serves a
200-delta answer to every request and prints its port: the benchmark's
server, in a process of its own.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import socket
import sys
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from fake_anthropic import (
    MESSAGES_PATH,
    anthropic_fail_body,
    anthropic_stream_error,
    render_anthropic_events,
    render_anthropic_whole,
)
from fake_openai_wire import (
    DEFAULT_USAGE,
    Action,
    Call,
    Compacted,
    Fail,
    Hang,
    Reply,
    Trickle,
    Usage,
    in_stream_error,
    model_of,
    render_events,
    render_whole,
    wants_usage,
)

__all__ = [
    "DEFAULT_USAGE",
    "Action",
    "Call",
    "Compacted",
    "Fail",
    "FakeOpenAI",
    "Hang",
    "Recorded",
    "Reply",
    "Trickle",
    "Usage",
]


@dataclass
class Recorded:
    """One request as the server saw it."""

    path: str
    headers: dict[str, str]
    body: Any
    at: float
    client_port: int


@dataclass
class FakeOpenAI:
    """The server; ``start()`` it, ``script()`` actions, ``stop()`` it."""

    default: Action | None = None
    requests: list[Recorded] = field(default_factory=list)
    client_gone: threading.Event = field(default_factory=threading.Event)
    stopping: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self._actions: deque[Action] = deque()
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._handlers: set[threading.Thread] = set()
        """The threads serving a connection, which ``stop`` waits for."""
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        self._server.fake = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.02},  # a quick stop() at teardown
            name="fake-openai",
            daemon=True,
        )

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def root_url(self) -> str:
        """The root without ``/v1``, as Anthropic's base URL is given."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> FakeOpenAI:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stops serving, closes every connection still open and waits for
        the threads that served them (none outlives its test)."""
        self.stopping.set()
        self._server.shutdown()
        self._server.server_close()
        with self._lock:
            sockets = list(self._sockets)
            handlers = list(self._handlers)
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        self._thread.join(timeout=10)
        for handler in handlers:
            handler.join(timeout=10)
        if still := [handler.name for handler in handlers if handler.is_alive()]:
            msg = f"the fake OpenAI server's handlers did not end: {still}"
            raise RuntimeError(msg)

    def script(self, *actions: Action) -> None:
        with self._lock:
            self._actions.extend(actions)

    def paths(self) -> list[str]:
        return [request.path for request in self.requests]

    def _next(self) -> Action | None:
        with self._lock:
            return self._actions.popleft() if self._actions else self.default

    def _record(self, request: Recorded) -> None:
        with self._lock:
            self.requests.append(request)

    def _track(self, sock: socket.socket, open_: bool) -> None:
        """Notes a connection opened or closed, and the thread serving it."""
        with self._lock:
            if open_:
                self._sockets.add(sock)
                self._handlers.add(threading.current_thread())
            else:
                # The thread is kept: it runs on a moment after this.
                self._sockets.discard(sock)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive and chunked bodies
    disable_nagle_algorithm = True  # each event leaves at once, as a real server's
    timeout = 30  # an idle keep-alive connection ends on its own

    def setup(self) -> None:
        super().setup()
        self.fake._track(self.connection, True)

    def handle(self) -> None:
        try:
            super().handle()
        except ConnectionResetError:
            # A client that gives up on a stream (malformed, or failed inside)
            # closes the kept-alive connection with the rest of it unread,
            # which resets it: the wait for its next request ends so. That is
            # the client going away, as at a real server, and no error; left
            # to socketserver, it was printed to stderr, often after the test.
            self.close_connection = True

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.fake._track(self.connection, False)

    @property
    def fake(self) -> FakeOpenAI:
        return self.server.fake  # type: ignore[attr-defined,no-any-return]

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the tests read the recorded requests instead."""

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        try:
            body: Any = json.loads(raw)
        except ValueError:
            body = raw.decode("utf-8", "replace")
        headers = {key.lower(): value for key, value in self.headers.items()}
        self.fake._record(
            Recorded(self.path, headers, body, time.monotonic(), self.client_address[1])
        )
        try:
            self._answer(self.fake._next(), body)
        except OSError:  # the client went away mid-answer (a cut, a cancel)
            self.fake.client_gone.set()
            self.close_connection = True

    def _answer(self, action: Action | None, body: Any) -> None:
        dialect = {
            "/v1/responses": "responses",
            "/v1/chat/completions": "chat",
            "/v1/responses/compact": "compact",
            MESSAGES_PATH: "anthropic",
        }.get(self.path)
        self.dialect = dialect
        if dialect is None:
            self._fail(Fail(404, f"no route {self.path}"))
        elif action is None:
            self._fail(
                Fail(500, "the fake server's script is exhausted", type="server_error")
            )
        elif isinstance(action, Fail):
            self._fail(action)
        elif isinstance(action, Hang):
            self.fake.stopping.wait()
            self.close_connection = True
        elif isinstance(action, Trickle):
            self._trickle(action, dialect, body)
        elif isinstance(action, Compacted):
            payload = {
                "id": f"cmp_{uuid.uuid4().hex}",
                "object": "response.compaction",
                "created_at": int(time.time()),
                "output": list(action.output),
                "usage": action.usage.responses() if action.usage else None,
            }
            self._json(200, payload)
        elif not action.stream:
            whole = (
                render_anthropic_whole(action, model_of(body))
                if dialect == "anthropic"
                else render_whole(action, dialect, model_of(body))
            )
            self._json(200, whole)
        else:
            self._stream(action, _render(action, dialect, body))

    # -- writing ---------------------------------------------------------------

    def _json(
        self, status: int, payload: Any, headers: tuple[tuple[str, str], ...] = ()
    ) -> None:
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("x-request-id", f"req_{uuid.uuid4().hex[:16]}")
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _fail(self, fail: Fail) -> None:
        body = fail.body
        if getattr(self, "dialect", None) == "anthropic":
            body = anthropic_fail_body(fail)
        elif body is None:
            error = {
                "message": fail.message,
                "type": fail.type,
                "param": None,
                "code": fail.code,
            }
            body = json.dumps({"error": error}).encode()
        self._json(fail.status, body, fail.headers)

    def _begin_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("x-request-id", f"req_{uuid.uuid4().hex[:16]}")
        self.end_headers()

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%X\r\n%s\r\n" % (len(data), data))

    def _cut(self) -> None:
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def _stream(self, reply: Reply, events: tuple[bytes, ...]) -> None:
        self._begin_stream()
        for number, event in enumerate(events):
            if number == reply.cut_after:
                self._cut()
                return
            if number == reply.malformed_after:
                self._chunk(
                    b'data: {"type": "response.output_text.delta", "delta": "bro\n\n'
                )
            if number == reply.error_after:
                self._chunk(
                    anthropic_stream_error(reply.error_message)
                    if self.dialect == "anthropic"
                    else in_stream_error(events, number, reply.error_message)
                )
                break
            self._chunk(event)
        self._chunk(b"")  # the last chunk: the body is complete

    def _trickle(self, trickle: Trickle, dialect: str, body: Any) -> None:
        self._begin_stream()
        reply = Reply(text=trickle.text)
        events = _render(reply, dialect, body)
        delta = next(e for e in events if b"delta" in e and trickle.text.encode() in e)
        for event in events[: events.index(delta)]:
            self._chunk(event)
        # Until a write fails (do_POST notes that the client went away).
        while not self.fake.stopping.is_set():
            self._chunk(delta)
            self.fake.stopping.wait(trickle.interval)
        self.close_connection = True


def _render(reply: Reply, dialect: str, body: Any) -> tuple[bytes, ...]:
    if dialect == "anthropic":
        return render_anthropic_events(reply, model_of(body))
    return render_events(reply, dialect, model_of(body), wants_usage(body))


def main() -> None:
    """Serves one answer of ``--chunks`` deltas to every request (the bench)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=200)
    arguments = parser.parse_args()
    text = "".join(f"tok{index % 10} " for index in range(arguments.chunks))
    fake = FakeOpenAI(default=Reply(text=text, chunks=arguments.chunks)).start()
    print(fake.port, flush=True)
    try:
        sys.stdin.read()  # until the parent closes our stdin
    finally:
        fake.stop()


if __name__ == "__main__":
    main()
