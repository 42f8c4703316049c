"""Where an MCP server is: a command run over stdio, or a URL.

Plain data, shared by the public face (``McpServer``) and the link that
connects (``turnlog.mcp.link``, ``turnlog.mcp.stdio``), so neither imports
the other's module for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal


@dataclass(frozen=True)
class StdioTarget:
    """A server started as a subprocess, spoken to over stdin and stdout."""

    command: str
    args: tuple[str, ...]
    env: Mapping[str, str] | None
    cwd: str | None
    stderr_log: Path | None = None
    """The file the server's stderr is appended to; None sends each line
    to the ``turnlog.mcp`` logger instead (never to turnlog's terminal)."""
    kind: Literal["stdio"] = "stdio"


@dataclass(frozen=True)
class HttpTarget:
    """A server reached over streamable HTTP."""

    url: str
    headers: Mapping[str, str]
    kind: Literal["http"] = "http"


Target = StdioTarget | HttpTarget
