"""Where an MCP server is: a command run over stdio, or a URL.

Plain data, shared by the public face (``McpServer``) and the link that
connects (``turnlog.mcp.link``, ``turnlog.mcp.stdio``), so neither imports
the other's module for it; :func:`stdio_target` and :func:`http_target`
check what the caller gave at the boundary.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from turnlog.domain.errors import InvalidInputError


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


def stdio_target(
    command: str,
    args: Sequence[str],
    env: Mapping[str, str] | None,
    cwd: str | None,
    stderr_log: str | os.PathLike[str] | None,
) -> StdioTarget:
    """The target of a server run as ``command args...`` (see ``McpServer.stdio``).

    Raises:
        InvalidInputError: no command, or an argument of the wrong type.
    """
    if not isinstance(command, str) or not command:
        msg = "an MCP stdio server needs a command"
        raise InvalidInputError(msg)
    if isinstance(args, str) or not all(isinstance(a, str) for a in args):
        msg = "MCP server args must be a sequence of str"
        raise InvalidInputError(msg)
    _check_strings(env, "env")
    if stderr_log is not None and not isinstance(stderr_log, str | os.PathLike):
        msg = f"stderr_log must be a path, not {stderr_log!r}"
        raise InvalidInputError(msg)
    log = Path(stderr_log) if stderr_log is not None else None
    return StdioTarget(command, tuple(args), env, cwd, log)


def http_target(url: str, headers: Mapping[str, str] | None) -> HttpTarget:
    """The target of a server reached over streamable HTTP at ``url``.

    Raises:
        InvalidInputError: not an http(s) URL, or headers that are not str.
    """
    parts = urlsplit(url) if isinstance(url, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
        msg = f"an MCP HTTP server needs an http(s) URL, not {url!r}"
        raise InvalidInputError(msg)
    _check_strings(headers, "headers")
    return HttpTarget(url, dict(headers or {}))


def default_name(target: Target) -> str:
    """A server's name when the caller gives none: the command's file name
    (less a ``.py``), or the URL's host name."""
    if target.kind == "stdio":
        default = re.sub(r"[^A-Za-z0-9_-]", "_", target.command.rsplit("/", 1)[-1])
        return default.removesuffix("_py") or "mcp"
    return re.sub(r"[^A-Za-z0-9_-]", "_", urlsplit(target.url).hostname or "mcp")


def _check_strings(mapping: Mapping[str, str] | None, what: str) -> None:
    if mapping is None:
        return
    if not isinstance(mapping, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in mapping.items()
    ):
        msg = f"MCP server {what} must map str to str"
        raise InvalidInputError(msg)
