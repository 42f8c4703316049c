"""A real MCP server (the SDK's MCPServer, once FastMCP) for the MCP tests.

Run as ``python mcp_server.py stdio`` (over stdin/stdout) or
``python mcp_server.py http`` (streamable HTTP on 127.0.0.1, a free port
printed as ``PORT <n>`` once the socket listens). Tools ``extra_*`` are
offered only when the file named by ``MCP_TEST_EXTRA_TOOLS`` exists, so a
test can change the tool list between two starts. ``MCP_TEST_MARK`` names a
file each tool call appends its tool name to when it starts, so a test can
count calls; ``slow_mark`` also prints ``TOOL STARTED <pid>`` to stderr.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult

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


@server.tool()
def pid() -> int:
    """This server's process id."""
    return os.getpid()


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
        server.run("stdio")
