"""MCP servers as tool sources: their tools become turnlog tools.

``McpServer.stdio(...)`` starts a server as a subprocess;
``McpServer.http(...)`` reaches one over streamable HTTP. Give servers to
``Agent(..., mcp_servers=[...])``: each session reads the servers' tool
lists when it starts, and their calls go through the ToolExecutor like any
tool's (approvals, timeouts, the concurrency limit, crash semantics).

Needs the ``mcp`` extra (``pip install 'turnlog[mcp]'``); the SDK is
imported only when a server is first used.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import re
import threading
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from turnlog.domain.errors import McpServerError
from turnlog.domain.model import ToolSpec
from turnlog.domain.tool_output import checked_limits
from turnlog.mcp.settings import (
    ToolSelection,
    check_server,
    selected,
    selection,
    tool_prefix_for,
)
from turnlog.mcp.targets import Target, default_name, http_target, stdio_target
from turnlog.tools import ToolResult

if TYPE_CHECKING:
    from mcp.types import Tool

    from turnlog.mcp.link import McpLink

DEFAULT_TIMEOUT = 60.0
"""Seconds an MCP call may take by default: a hung server must not hang a turn."""

LIST_TIMEOUT = 30.0
"""Seconds starting a server and reading its tool list may take."""


class McpServer:
    """An MCP server whose tools an agent may call.

    Build with :meth:`stdio` or :meth:`http`. The server starts on first
    use (the first session that reads its tools) and stops with
    ``Runtime.close()`` or :meth:`close`; a server that died is started
    again by the next call or session start.

    Tools are named ``<name>_<tool>`` so two servers (or a server and a
    function tool) cannot clash; ``tool_prefix=""`` keeps the server's own
    names. Characters a model API refuses in a tool name become ``_``.

    Every tool asks for approval before each call unless the user said it
    need not: ``run_unasked`` names the tools that run unasked, and
    ``trust_read_only_hints=True`` adds those the server annotates
    ``readOnlyHint``. (The run config's approval policy still decides for
    the tools that ask: ``approval_policy="allow"`` runs them all.)
    """

    def __init__(
        self,
        name: str,
        target: Target,
        *,
        run_unasked: ToolSelection = False,
        trust_read_only_hints: bool = False,
        timeout: float | None = DEFAULT_TIMEOUT,
        idempotent: ToolSelection = False,
        tool_prefix: str | None = None,
        needs_approval: None = None,
        max_output: int | Mapping[str, int] | None = None,
    ) -> None:
        check_server(
            name,
            trust_read_only_hints=trust_read_only_hints,
            timeout=timeout,
            needs_approval=needs_approval,
        )
        prefix = tool_prefix_for(name, tool_prefix)
        self._name = name
        self._target = target
        self._unasked = selection(run_unasked, "run_unasked")
        self._trust_read_only = trust_read_only_hints
        self._idempotent = selection(idempotent, "idempotent")
        self._timeout = float(timeout) if timeout is not None else None
        self._prefix = prefix
        self._max_output = checked_limits(max_output, "max_output")
        self._link: McpLink | None = None
        self._guard = threading.Lock()
        self._tools: list[McpTool] | None = None

    @classmethod
    def stdio(
        cls,
        command: str,
        args: Sequence[str] = (),
        *,
        name: str | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        stderr_log: str | os.PathLike[str] | None = None,
        run_unasked: ToolSelection = False,
        trust_read_only_hints: bool = False,
        timeout: float | None = DEFAULT_TIMEOUT,
        idempotent: ToolSelection = False,
        tool_prefix: str | None = None,
        needs_approval: None = None,
        max_output: int | Mapping[str, int] | None = None,
    ) -> McpServer:
        """A server run as ``command args...``, spoken to over stdin/stdout.

        Args:
            command: the program to run.
            args: its arguments.
            name: the server's name (default: the command's file name).
            env: variables added to a minimal default environment (the SDK
                passes on only HOME, PATH and the like, not secrets).
            cwd: the working directory of the process.
            stderr_log: a file the server's stderr is appended to (made
                with its folder if need be); by default each line goes to
                the ``turnlog.mcp`` logger at INFO. Never the terminal.
            run_unasked: the tools that run without asking (default: none;
                every other call waits for an approval decision).
            trust_read_only_hints: also run unasked the tools the server
                annotates ``readOnlyHint`` (default False: a hint is the
                server's word, not the user's).
            timeout: seconds a call may take before it is an error output.
            idempotent: which tools may run again after a crash.
            tool_prefix: put before each tool name (default ``<name>_``).
            needs_approval: removed (it made every tool it did not name run
                unasked); passing it raises InvalidInputError.
            max_output: characters of a call's output the model sees, for
                every tool or per tool (by the server's tool name); default:
                the agent's ``max_tool_output``.
        """
        target = stdio_target(command, args, env, cwd, stderr_log)
        return cls(
            name or default_name(target),
            target,
            run_unasked=run_unasked,
            trust_read_only_hints=trust_read_only_hints,
            needs_approval=needs_approval,
            timeout=timeout,
            idempotent=idempotent,
            tool_prefix=tool_prefix,
            max_output=max_output,
        )

    @classmethod
    def http(
        cls,
        url: str,
        *,
        name: str | None = None,
        headers: Mapping[str, str] | None = None,
        run_unasked: ToolSelection = False,
        trust_read_only_hints: bool = False,
        timeout: float | None = DEFAULT_TIMEOUT,
        idempotent: ToolSelection = False,
        tool_prefix: str | None = None,
        needs_approval: None = None,
        max_output: int | Mapping[str, int] | None = None,
    ) -> McpServer:
        """A server reached over streamable HTTP at ``url``.

        Args:
            url: the server's MCP endpoint (``http://host:port/mcp``).
            name: the server's name (default: the URL's host name).
            headers: sent with every request (e.g. an Authorization header).
            run_unasked: the tools that run without asking (default: none).
            trust_read_only_hints: also run unasked the tools the server
                annotates ``readOnlyHint`` (default False).
            timeout: seconds a call may take before it is an error output.
            idempotent: which tools may run again after a crash.
            tool_prefix: put before each tool name (default ``<name>_``).
            needs_approval: removed (it made every tool it did not name run
                unasked); passing it raises InvalidInputError.
            max_output: characters of a call's output the model sees, for
                every tool or per tool (by the server's tool name); default:
                the agent's ``max_tool_output``.
        """
        target = http_target(url, headers)
        return cls(
            name or default_name(target),
            target,
            run_unasked=run_unasked,
            trust_read_only_hints=trust_read_only_hints,
            needs_approval=needs_approval,
            timeout=timeout,
            idempotent=idempotent,
            tool_prefix=tool_prefix,
            max_output=max_output,
        )

    @property
    def name(self) -> str:
        """The server's name (the default tool prefix)."""
        return self._name

    @property
    def stderr_log(self) -> Path | None:
        """The file a stdio server's stderr goes to (None: the logger, or HTTP)."""
        return self._target.stderr_log if self._target.kind == "stdio" else None

    def describe(self) -> dict[str, Any]:
        """What of the server shapes an agent (no command, URL or secrets)."""
        return {"name": self._name, "transport": self._target.kind}

    def tools(self) -> list[McpTool]:
        """The server's tools, starting it and reading the list if needed.

        The list is read once and kept: sessions started later get the
        same list until :meth:`refresh` or a restart of the server.

        Raises:
            McpServerError: the server did not start or answer in time.
        """
        with self._guard:
            if self._tools is not None:
                return list(self._tools)
        return self.refresh()

    def refresh(self) -> list[McpTool]:
        """Reads the tool list again; sessions started from now on get it.

        Raises:
            McpServerError: the server did not start or answer in time.
        """
        future = self._connection().list_tools()
        try:
            listed = future.result(timeout=LIST_TIMEOUT)
        except concurrent.futures.TimeoutError:
            future.cancel()
            msg = f"MCP server {self._name!r} did not list its tools in time"
            raise McpServerError(msg) from None
        tools = [self._tool(tool) for tool in listed]
        _check_unique(tools, self._name)
        with self._guard:
            self._tools = tools
        return list(tools)

    def restart(self) -> None:
        """Stops the server (the next use starts it) and forgets its tools."""
        link = self._forget_tools()
        if link is not None:
            link.restart()

    def close(self) -> None:
        """Stops the server and its loop thread; the next use starts them."""
        link = self._forget_tools()
        if link is not None:
            link.close()

    def _forget_tools(self) -> McpLink | None:
        """Forgets the tool list; returns the connection, if one was made."""
        with self._guard:
            self._tools = None
            return self._link

    def _connection(self) -> McpLink:
        with self._guard:
            if self._link is None:
                try:
                    # Imported here: the SDK is an optional extra.
                    from turnlog.mcp.link import McpLink, check_timeout_for  # noqa: PLC0415
                except ImportError as error:
                    msg = "MCP servers need the mcp extra: pip install 'turnlog[mcp]'"
                    raise McpServerError(msg) from error
                check = check_timeout_for(self._timeout)
                self._link = McpLink(self._name, self._target, check)
            return self._link

    def __enter__(self) -> McpServer:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _tool(self, tool: Tool) -> McpTool:
        name = self._prefix + re.sub(r"[^A-Za-z0-9_-]", "_", tool.name)
        schema = dict(tool.input_schema or {})
        schema.setdefault("type", "object")
        schema.pop("title", None)
        spec = ToolSpec(name, tool.description or tool.title or "", schema)
        return McpTool(
            self,
            spec,
            tool.name,
            asks_first=not self._runs_unasked(tool),
            idempotent=selected(self._idempotent, tool.name),
        )

    def _runs_unasked(self, tool: Tool) -> bool:
        if selected(self._unasked, tool.name):
            return True
        hints = tool.annotations
        return self._trust_read_only and bool(hints and hints.read_only_hint)

    async def _call(self, remote_name: str, arguments: dict[str, Any]) -> ToolResult:
        # A timeout or an interrupt cancels this wait, which cancels the
        # request on the server's loop.
        future = self._connection().call_tool(remote_name, arguments)
        return await asyncio.wrap_future(future)

    def __repr__(self) -> str:
        return f"McpServer({self._name!r}, {self._target.kind})"


class McpTool:
    """One tool of an MCP server, as the ToolExecutor runs it."""

    def __init__(
        self,
        server: McpServer,
        spec: ToolSpec,
        remote_name: str,
        *,
        asks_first: bool,
        idempotent: bool,
    ) -> None:
        self._server = server
        self._spec = spec
        self._remote = remote_name
        self._asks_first = asks_first
        self._idempotent = idempotent

    @property
    def name(self) -> str:
        """The name the model calls the tool by."""
        return self._spec.name

    @property
    def remote_name(self) -> str:
        """The name the server calls the tool by."""
        return self._remote

    @property
    def server(self) -> McpServer:
        """The server that runs the tool."""
        return self._server

    @property
    def spec(self) -> ToolSpec:
        """The tool as the model sees it (the server's input schema)."""
        return self._spec

    @property
    def timeout(self) -> float | None:
        """Seconds a call may take before it becomes an error output."""
        return self._server._timeout

    @property
    def max_output(self) -> int | None:
        """Characters of a call's output the model sees (None: the agent's limit)."""
        limit = self._server._max_output
        return limit.get(self._remote) if isinstance(limit, Mapping) else limit

    @property
    def idempotent(self) -> bool:
        """Whether a call may run again after a crash."""
        return self._idempotent

    @property
    def is_async(self) -> bool:
        """Always: calls are awaited on the I/O loop."""
        return True

    @property
    def tool_type(self) -> str:
        """``extension``: a server runs it (OpenTelemetry's ``gen_ai.tool.type``)."""
        return "extension"

    @property
    def mcp_server(self) -> str:
        """The name of the server that runs it."""
        return self._server.name

    def requires_approval(self, arguments: str) -> bool:
        """Whether a call needs a decision first: unless the user let it run unasked."""
        return self._asks_first

    def run_sync(self, arguments: str, context: Mapping[str, Any]) -> ToolResult:
        """Not used: MCP tools are async."""
        msg = "MCP tools run on the I/O loop"
        raise NotImplementedError(msg)

    async def run_async(self, arguments: str, context: Mapping[str, Any]) -> ToolResult:
        """Calls the tool on its server; never raises (but when cancelled)."""
        try:
            parsed = json.loads(arguments or "{}")
        except json.JSONDecodeError as error:
            return ToolResult(f"arguments are not valid JSON: {error}", is_error=True)
        if not isinstance(parsed, dict):
            return ToolResult("arguments must be a JSON object", is_error=True)
        try:
            return await self._server._call(self._remote, parsed)
        except McpServerError as error:
            return ToolResult(str(error), is_error=True)

    def __repr__(self) -> str:
        return f"McpTool({self.name!r})"


def _check_unique(tools: Sequence[McpTool], server: str) -> None:
    seen: dict[str, str] = {}
    for tool in tools:
        if tool.name in seen:
            msg = (
                f"MCP server {server!r} offers tools {seen[tool.name]!r} and "
                f"{tool.remote_name!r}, both named {tool.name!r} here"
            )
            raise McpServerError(msg)
        seen[tool.name] = tool.remote_name


def session_tools(
    servers: Sequence[McpServer], taken: Collection[str]
) -> dict[str, McpTool]:
    """The tools of ``servers`` for a session starting now, by name.

    Raises:
        McpServerError: a server did not start, or two tools share a name.
    """
    tools: dict[str, McpTool] = {}
    for server in servers:
        for tool in server.tools():
            if tool.name in taken or tool.name in tools:
                msg = (
                    f"MCP tool {tool.name!r} of server {server.name!r} clashes "
                    "with another tool: give the server a tool_prefix"
                )
                raise McpServerError(msg)
            tools[tool.name] = tool
    return tools
