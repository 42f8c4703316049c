"""A real MCP server (the SDK's MCPServer, once FastMCP) for the MCP tests.

Run as ``python mcp_server.py stdio`` (over stdin/stdout) or
``python mcp_server.py http`` (streamable HTTP on 127.0.0.1, a free port
printed as ``PORT <n>`` once the socket listens). Tools ``extra_*`` are
offered only when the file named by ``MCP_TEST_EXTRA_TOOLS`` exists, so a
test can change the tool list between two starts. ``MCP_TEST_MARK`` names a
file each tool call appends its tool name to when it starts, so a test can
count calls; ``slow_mark`` also prints ``TOOL STARTED <pid>`` to stderr.

Over stdio the server says it started on stderr, as many real servers do,
and its stdout goes through :class:`BadBytesWriter`, which turns the text
``BAD_UTF8_MARK`` into the bytes ED A0 80 (an encoded surrogate, not valid
UTF-8): the ``bad_bytes`` tool's answer carries them.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import threading
from pathlib import Path

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.stdio import stdio_server
from mcp.types import (
    AudioContent,
    CallToolResult,
    ImageContent,
    TextContent,
    ToolAnnotations,
)

BAD_UTF8_MARK = "<<not-utf-8>>"

PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQ"
    "AAAABJRU5ErkJggg=="
)
"""A 1x1 PNG, base64."""

WAV = "UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQAAAAA="
"""An empty WAV file (its 44-byte header), base64."""

server = MCPServer("turnlog-test")


def _called(name: str) -> None:
    log = os.environ.get("MCP_TEST_MARK")
    if log:
        with Path(log).open("a", encoding="utf-8") as file:
            file.write(name + "\n")


@server.tool()
def echo(text: str) -> str:
    """Says the text back."""
    _called("echo")
    return f"echo: {text}"


@server.tool()
def big(size: int) -> str:
    """Answers ``size`` characters: a line of digits, repeated."""
    _called("big")
    line = "0123456789" * 7 + "\n"
    return (line * (size // len(line) + 1))[:size]


@server.tool()
def weather(city: str) -> CallToolResult:
    """The weather in a city, as structured content only."""
    _called("weather")
    return CallToolResult(
        content=[], structured_content={"city": city, "celsius": 21.5}
    )


@server.tool()
def fail(reason: str) -> str:
    """Always fails (an isError result)."""
    _called("fail")
    raise ToolError(f"refused: {reason}")


@server.tool()
async def hang() -> str:
    """Never returns."""
    _called("hang")
    await asyncio.Event().wait()
    return "unreachable"


@server.tool()
async def die() -> str:
    """Kills this server process mid-call."""
    _called("die")
    os._exit(3)


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def pid() -> int:
    """This server's process id (annotated read-only)."""
    _called("pid")
    return os.getpid()


@server.tool()
def picture() -> CallToolResult:
    """A chart: text, a PNG image and a WAV sound."""
    _called("picture")
    return CallToolResult(
        content=[
            TextContent(type="text", text="the chart"),
            ImageContent(type="image", data=PNG, mime_type="image/png"),
            AudioContent(type="audio", data=WAV, mime_type="audio/wav"),
        ]
    )


@server.tool()
def noisy(text: str) -> str:
    """Writes ``text`` to stderr, answers quietly."""
    _called("noisy")
    print(f"NOISE {text}", file=sys.stderr, flush=True)
    return "quiet"


@server.tool()
def bad_bytes() -> str:
    """Answers with bytes that are not valid UTF-8 (over stdio)."""
    _called("bad_bytes")
    return f"before {BAD_UTF8_MARK} after"


@server.tool()
async def freeze() -> str:
    """Blocks the server's event loop: it answers nothing, not even pings."""
    _called("freeze")
    print("FREEZING", file=sys.stderr, flush=True)
    threading.Event().wait()  # never set: blocked until the test kills it
    return "unreachable"


@server.tool()
async def slow_mark() -> str:
    """Marks that it started (a file), then never returns."""
    _called("slow_mark")
    print(f"TOOL STARTED {os.getpid()}", file=sys.stderr, flush=True)
    await asyncio.Event().wait()
    return "unreachable"


_extra = os.environ.get("MCP_TEST_EXTRA_TOOLS")
if _extra and Path(_extra).exists():

    @server.tool()
    def extra_add(a: int, b: int) -> int:
        """Adds two numbers (only offered after the tool list changed)."""
        return a + b


class BadBytesWriter:
    """Stdout as the server writes it, with the mark turned into bad bytes."""

    def __init__(self, raw: object) -> None:
        self._raw = raw

    def write(self, text: str) -> int:
        data = text.encode("utf-8").replace(BAD_UTF8_MARK.encode(), b"\xed\xa0\x80")
        self._raw.write(data)  # type: ignore[attr-defined]
        return len(text)

    def flush(self) -> None:
        self._raw.flush()  # type: ignore[attr-defined]


async def _serve_stdio() -> None:
    stdout = anyio.wrap_file(BadBytesWriter(sys.stdout.buffer))
    async with stdio_server(stdout=stdout) as (read_stream, write_stream):  # type: ignore[arg-type]
        lowlevel = server._lowlevel_server
        options = lowlevel.create_initialization_options()
        await lowlevel.run(read_stream, write_stream, options)


def _serve_http() -> None:
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    app = server.streamable_http_app()
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    if sys.argv[1:] == ["http"]:
        _serve_http()
    else:
        print("turnlog-test MCP server started on stdio", file=sys.stderr, flush=True)
        anyio.run(_serve_stdio)
