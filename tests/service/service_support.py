"""A real uvicorn server on 127.0.0.1 (a free port) around the service app,
an SSE reader over httpx, and helpers to wait on conditions."""

from __future__ import annotations

import socket
import threading
import time
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


def wait_until(predicate: Callable[[], Any], timeout: float = 10.0) -> Any:
    """Returns the predicate's first true value; fails after ``timeout``."""
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"condition not met within {timeout} s")
        pause.wait(0.01)


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


class ServerThread:
    """uvicorn serving ``app`` on a thread, on a socket bound beforehand."""

    def __init__(self, app: Any) -> None:
        self.sock = free_socket()
        self.port = self.sock.getsockname()[1]
        config = uvicorn.Config(app, log_level="warning", lifespan="on")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True
        )

    def __enter__(self) -> ServerThread:
        self.thread.start()
        wait_until(lambda: self.server.started)
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
                continue
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "data":
                data.append(value)
            else:
                fields[name] = value
        raise EOFError("the stream ended")
