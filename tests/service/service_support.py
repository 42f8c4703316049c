"""A real uvicorn server on 127.0.0.1 (a free port) around the service app,
an SSE reader over httpx, and a wait for a session's next event of a kind."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from turnlog import Runtime
from turnlog.service import ServiceTokens, create_app

HERE = Path(__file__).parent
"""This folder: server processes import service_agents from it by name."""

TOKEN_A = "token-of-tenant-a-0123456789abcdef"
TOKEN_B = "token-of-tenant-b-0123456789abcdef"
TOKENS = ServiceTokens([("tenant-a", TOKEN_A), ("tenant-b", TOKEN_B)])


def free_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


@dataclass
class Served:
    """A running server: its base URL and the runtime behind it."""

    url: str
    runtime: Runtime
    app: Any

    def client(self, token: str | None = TOKEN_A, **kwargs: Any) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=20, **kwargs)


class _Server(uvicorn.Server):
    """uvicorn's server, with an event set once its start-up is over."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.startup_over = threading.Event()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        try:
            await super().startup(sockets=sockets)
        finally:  # listening (``started``), or given up
            self.startup_over.set()


class ServerThread:
    """uvicorn serving ``app`` on a thread, on a socket bound beforehand."""

    def __init__(self, app: Any) -> None:
        self.sock = free_socket()
        self.port = self.sock.getsockname()[1]
        config = uvicorn.Config(app, log_level="warning", lifespan="on")
        self.server = _Server(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True
        )

    def __enter__(self) -> ServerThread:
        self.thread.start()
        if not self.server.startup_over.wait(10) or not self.server.started:
            self.__exit__()
            pytest.fail("the server did not start listening")
        return self

    def __exit__(self, *_: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=20)
        self.sock.close()


@pytest.fixture
def serve(sqlite_url: str) -> Iterator[Callable[..., Served]]:
    """Starts servers over a runtime on a fresh SQLite log; stops them after."""
    stack: list[tuple[ServerThread, Runtime]] = []

    def start(agents: dict[str, Any] | None = None, **options: Any) -> Served:
        from service_agents import approval_agent

        runtime = Runtime.open(sqlite_url)
        app = create_app(
            runtime, agents or {"publisher": approval_agent}, TOKENS, **options
        )
        server = ServerThread(app).__enter__()
        stack.append((server, runtime))
        return Served(f"http://127.0.0.1:{server.port}", runtime, app)

    yield start
    for server, runtime in reversed(stack):
        server.__exit__()
        runtime.close()


@dataclass
class SSEEvent:
    id: str | None
    data: str
    event: str | None = None


@dataclass
class SSEReader:
    """Reads a text/event-stream response event by event (comments too)."""

    response: httpx.Response
    comments: list[str] = field(default_factory=list)
    comment_read: threading.Event = field(default_factory=threading.Event)
    """Set once a comment (a heartbeat) was read."""

    def __post_init__(self) -> None:
        self._lines = self.response.iter_lines()

    def next(self) -> SSEEvent:
        fields: dict[str, str] = {}
        data: list[str] = []
        for line in self._lines:
            if line == "":
                if data or fields:
                    return SSEEvent(
                        fields.get("id"), "\n".join(data), fields.get("event")
                    )
                continue
            if line.startswith(":"):
                self.comments.append(line[1:].strip())
                self.comment_read.set()
                continue
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "data":
                data.append(value)
            else:
                fields[name] = value
        raise EOFError("the stream ended")


def await_event(
    client: httpx.Client, session_id: str, kind: str, *, after: str | None = None
) -> tuple[dict[str, Any], str]:
    """The session's first event of type ``kind`` after event id ``after``.

    Read from its SSE stream (from the start of the session by default),
    which the server sends once the event is in the log, so what the
    resources read next sees it. Returns the event's ``msg`` and its id,
    which a next call passes as ``after``. Bounded by the client's read
    timeout and, on a stream kept open by heartbeats, the test's timeout.
    """
    headers = {"Last-Event-ID": after} if after else {}
    path = f"/sessions/{session_id}/events"
    with client.stream("GET", path, headers=headers) as response:
        assert response.status_code == 200, response.read()
        reader = SSEReader(response)
        while True:
            event = reader.next()
            msg = json.loads(event.data)["msg"]
            if msg["type"] == kind and event.id is not None:
                return msg, event.id
