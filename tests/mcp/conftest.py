"""Real MCP servers for the MCP tests: one over stdio, one over HTTP.

Both run ``mcp_server.py`` (the SDK's MCPServer) in a subprocess. Every
fixture stops what it started: servers are closed, HTTP server processes
are killed and reaped.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from turnlog import McpServer

sys.path.insert(0, str(Path(__file__).parent))

from mcp_support import SERVER, ServerFiles


@pytest.fixture
def files(tmp_path: Path) -> ServerFiles:
    return ServerFiles(tmp_path)


def over_stdio(files: ServerFiles, **options: Any) -> McpServer:
    return McpServer.stdio(
        sys.executable, [str(SERVER), "stdio"], name="srv", env=files.env, **options
    )


@pytest.fixture
def stdio_server(files: ServerFiles) -> Iterator[Callable[..., McpServer]]:
    """Builds the test server over stdio; closes each one it built."""
    made: list[McpServer] = []

    def make(**options: Any) -> McpServer:
        made.append(over_stdio(files, **options))
        return made[-1]

    yield make
    for server in made:
        server.close()


class HttpServerProcess:
    """``mcp_server.py http`` in a subprocess, on a free port of 127.0.0.1."""

    def __init__(self, files: ServerFiles) -> None:
        self._files = files
        self.proc: subprocess.Popen[str] | None = None
        self.url = ""

    def start(self) -> str:
        import os

        self.stop()
        self.proc = subprocess.Popen(
            [sys.executable, str(SERVER), "http"],
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, **self._files.env},
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()  # the socket listens once this comes
        if not line.startswith("PORT "):
            self.stop()
            pytest.fail(f"the MCP HTTP server did not start: {line!r}")
        self.url = f"http://127.0.0.1:{int(line.split()[1])}/mcp"
        return self.url

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(timeout=30)
            if self.proc.stdout is not None:
                self.proc.stdout.close()
            self.proc = None


@pytest.fixture
def http_process(files: ServerFiles) -> Iterator[HttpServerProcess]:
    process = HttpServerProcess(files)
    yield process
    process.stop()


@pytest.fixture(params=["stdio", "http"])
def make_server(
    request: pytest.FixtureRequest, files: ServerFiles
) -> Iterator[Callable[..., McpServer]]:
    """Builds the test server over each transport in turn; closes them all."""
    made: list[McpServer] = []

    def make(**options: Any) -> McpServer:
        if request.param == "stdio":
            server = over_stdio(files, **options)
        else:
            process = request.getfixturevalue("http_process")
            url = process.url or process.start()
            server = McpServer.http(url, name="srv", **options)
        made.append(server)
        return server

    yield make
    for server in made:
        server.close()
