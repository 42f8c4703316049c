"""MCP servers of ``turnlog run``: ``[mcp_servers.NAME]`` tables of the route file.

::

    [mcp_servers.files]                  # a subprocess, over stdio
    command = "npx"
    args = ["-y", "@modelcontextprotocol/server-filesystem", "."]
    env = { LOG_LEVEL = "warn" }         # values set here
    pass_env = ["GITHUB_TOKEN"]          # values taken from turnlog's environment
    needs_approval = ["write_file"]      # true (default), false, or tool names
    timeout = 30                         # seconds a call may take (default 60)
    idempotent = ["read_file"]           # may run again after a crash
    tool_prefix = "fs_"                  # default "<name>_"

    [mcp_servers.search]                 # streamable HTTP
    url = "https://example.com/mcp"
    headers_env = { Authorization = "SEARCH_AUTH" }  # header <- $SEARCH_AUTH

Trust: a server is a command turnlog runs, or an endpoint that receives
tool arguments, so only a trusted route file may declare one (the
settings module refuses a ``turnlog.toml`` found in the working directory
that does). Secrets stay in the environment, as API keys do: ``pass_env``
and ``headers_env`` name variables, read when the servers are built, and
no message names their values.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Self

import pydantic

from turnlog.domain.errors import InvalidInputError, UsageError
from turnlog.mcp_tools import DEFAULT_TIMEOUT, McpServer

ServerName = Annotated[str, pydantic.StringConstraints(pattern=r"^[A-Za-z0-9_-]+$")]
"""A server's name: its table's key, and the default tool prefix."""

Variable = Annotated[str, pydantic.StringConstraints(min_length=1)]

_STDIO_ONLY = ("args", "env", "pass_env")
_HTTP_ONLY = ("headers_env",)


class McpServerConfig(pydantic.BaseModel, frozen=True, extra="forbid", strict=True):
    """One ``[mcp_servers.NAME]`` table: a server run over stdio or reached by URL.

    Strict: ``needs_approval = "no"`` is a mistake to name, not a False.

    Attributes:
        command: the program to run (a stdio server).
        args: its arguments.
        env: variables set for it, by value (the file is trusted).
        pass_env: variables passed to it from turnlog's environment (for
            keys, which stay out of files).
        url: the endpoint of a streamable HTTP server.
        headers_env: header name -> the variable holding its value.
        needs_approval: which tools need a decision before each call.
        timeout: seconds a call may take.
        idempotent: which tools may run again after a crash.
        tool_prefix: put before each tool name (default ``<name>_``).
    """

    command: str | None = pydantic.Field(default=None, min_length=1)
    args: list[str] = pydantic.Field(default_factory=list)
    env: dict[Variable, str] = pydantic.Field(default_factory=dict)
    pass_env: list[Variable] = pydantic.Field(default_factory=list)
    url: str | None = pydantic.Field(default=None, min_length=1)
    headers_env: dict[Variable, Variable] = pydantic.Field(default_factory=dict)
    needs_approval: bool | list[str] = True
    timeout: float = pydantic.Field(default=DEFAULT_TIMEOUT, gt=0)
    idempotent: bool | list[str] = False
    tool_prefix: str | None = pydantic.Field(default=None, pattern=r"^[A-Za-z0-9_-]*$")

    @pydantic.model_validator(mode="after")
    def _one_transport(self) -> Self:
        if (self.command is None) == (self.url is None):
            msg = "give either command (a stdio server) or url (an HTTP server)"
            raise ValueError(msg)
        wrong = _HTTP_ONLY if self.command is not None else _STDIO_ONLY
        given = [key for key in wrong if getattr(self, key)]
        if given:
            kind = "a stdio" if self.command is not None else "an HTTP"
            msg = f"{', '.join(given)} cannot be set for {kind} server"
            raise ValueError(msg)
        return self


def build_mcp_servers(
    configs: Mapping[str, McpServerConfig], where: Path | None
) -> list[McpServer]:
    """The servers ``configs`` declare, in order; none is started yet.

    Args:
        configs: the route file's ``mcp_servers`` tables, by name.
        where: the route file they came from (for messages).

    Raises:
        UsageError: a variable named by ``pass_env`` or ``headers_env`` is
            not set; InvalidInputError for a URL that is not http(s). The
            message names the table and the variable, never a value.
    """
    servers = []
    for name, config in configs.items():
        table = f"mcp_servers.{name} in {where}"
        try:
            servers.append(_server(name, config, table))
        except InvalidInputError as error:
            raise InvalidInputError(f"{table}: {error}") from None
    return servers


def _server(name: str, config: McpServerConfig, table: str) -> McpServer:
    if config.command is not None:
        passed = {
            variable: _variable(variable, f"{table} passes ${variable}")
            for variable in config.pass_env
        }
        env = {**config.env, **passed}
        return McpServer.stdio(
            config.command,
            config.args,
            name=name,
            env=env or None,
            needs_approval=config.needs_approval,
            timeout=config.timeout,
            idempotent=config.idempotent,
            tool_prefix=config.tool_prefix,
        )
    assert config.url is not None  # the model's validator saw to it
    headers = {
        header: _variable(
            variable, f"{table} reads its {header} header from ${variable}"
        )
        for header, variable in config.headers_env.items()
    }
    return McpServer.http(
        config.url,
        name=name,
        headers=headers,
        needs_approval=config.needs_approval,
        timeout=config.timeout,
        idempotent=config.idempotent,
        tool_prefix=config.tool_prefix,
    )


def _variable(name: str, what: str) -> str:
    value = os.environ.get(name)
    if not value:
        msg = f"{what}, which is not set"
        raise UsageError(msg)
    return value


def describe_tools(servers: list[McpServer]) -> list[str]:
    """One line per server: its name and the tools the model knows it by.

    The servers have started (a session read their lists): the lists are
    the ones kept then.
    """
    lines = []
    for server in servers:
        names = ", ".join(tool.name for tool in server.tools()) or "(no tools)"
        lines.append(f"mcp: {server.name}: {names}")
    return lines
