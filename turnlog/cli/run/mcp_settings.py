"""MCP servers of ``turnlog run``: ``[mcp_servers.NAME]`` tables of the route file.

::

    [mcp_servers.files]                  # a subprocess, over stdio
    command = "npx"
    args = ["-y", "@modelcontextprotocol/server-filesystem", "."]
    env = { LOG_LEVEL = "warn" }         # values set here
    pass_env = ["GITHUB_TOKEN"]          # values taken from turnlog's environment
    run_unasked = ["read_file"]          # tools that need no approval (default none)
    trust_read_only_hints = false        # true: also the server's readOnlyHint tools
    stderr_log = "fs.log"                # default .turnlog/mcp/<name>.log (see below)
    timeout = 30                         # seconds a call may take (default 60)
    idempotent = ["read_file"]           # may run again after a crash
    tool_prefix = "fs_"                  # default "<name>_"

    [mcp_servers.search]                 # streamable HTTP
    url = "https://example.com/mcp"
    headers_env = { Authorization = "SEARCH_AUTH" }  # header <- $SEARCH_AUTH

Every tool asks before each call unless ``run_unasked`` names it (or
``trust_read_only_hints`` lets the server's ``readOnlyHint`` count); the
old ``needs_approval`` key is refused with a message naming the new one.
A stdio server's stderr goes to ``stderr_log`` (relative to the route
file's folder), by default ``mcp/<name>.log`` in the ``.turnlog`` folder
of the working directory: never to the terminal.

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
from turnlog.mcp.tools import DEFAULT_TIMEOUT, McpServer

ServerName = Annotated[str, pydantic.StringConstraints(pattern=r"^[A-Za-z0-9_-]+$")]
"""A server's name: its table's key, and the default tool prefix."""

Variable = Annotated[str, pydantic.StringConstraints(min_length=1)]

_STDIO_ONLY = ("args", "env", "pass_env", "stderr_log")
_HTTP_ONLY = ("headers_env",)

NEEDS_APPROVAL_KEY_REMOVED = (
    "needs_approval is no longer accepted: every MCP tool asks before it runs "
    'unless named in run_unasked (run_unasked = ["read_file"]); '
    "trust_read_only_hints = true also runs the tools the server marks read-only"
)

STDERR_FOLDER = Path(".turnlog") / "mcp"
"""Where stdio servers' stderr goes by default, under the working directory."""


class McpServerConfig(pydantic.BaseModel, frozen=True, extra="forbid", strict=True):
    """One ``[mcp_servers.NAME]`` table: a server run over stdio or reached by URL.

    Strict: ``run_unasked = "yes"`` is a mistake to name, not a True.

    Attributes:
        command: the program to run (a stdio server).
        args: its arguments.
        env: variables set for it, by value (the file is trusted).
        pass_env: variables passed to it from turnlog's environment (for
            keys, which stay out of files).
        url: the endpoint of a streamable HTTP server.
        headers_env: header name -> the variable holding its value.
        run_unasked: which tools run without an approval decision.
        trust_read_only_hints: whether tools the server annotates
            ``readOnlyHint`` run unasked too.
        stderr_log: the file a stdio server's stderr is appended to.
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
    run_unasked: bool | list[str] = False
    trust_read_only_hints: bool = False
    stderr_log: str | None = pydantic.Field(default=None, min_length=1)
    timeout: float = pydantic.Field(default=DEFAULT_TIMEOUT, gt=0)
    idempotent: bool | list[str] = False
    tool_prefix: str | None = pydantic.Field(default=None, pattern=r"^[A-Za-z0-9_-]*$")

    @pydantic.model_validator(mode="before")
    @classmethod
    def _no_needs_approval(cls, data: object) -> object:
        if isinstance(data, Mapping) and "needs_approval" in data:
            raise ValueError(NEEDS_APPROVAL_KEY_REMOVED)
        return data

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
    configs: Mapping[str, McpServerConfig],
    where: Path | None,
    workdir: Path | None = None,
) -> list[McpServer]:
    """The servers ``configs`` declare, in order; none is started yet.

    Args:
        configs: the route file's ``mcp_servers`` tables, by name.
        where: the route file they came from (for messages; a relative
            ``stderr_log`` is taken from its folder).
        workdir: the folder whose ``.turnlog/mcp/`` holds stdio servers'
            stderr when ``stderr_log`` is not set (default: the working
            directory).

    Raises:
        UsageError: a variable named by ``pass_env`` or ``headers_env`` is
            not set; InvalidInputError for a URL that is not http(s). The
            message names the table and the variable, never a value.
    """
    servers = []
    logs = (workdir or Path.cwd()) / STDERR_FOLDER
    for name, config in configs.items():
        table = f"mcp_servers.{name} in {where}"
        if config.stderr_log is None:
            stderr_log = logs / f"{name}.log"
        else:
            base = where.parent if where is not None else Path.cwd()
            stderr_log = base / Path(config.stderr_log).expanduser()
        try:
            servers.append(_server(name, config, table, stderr_log))
        except InvalidInputError as error:
            raise InvalidInputError(f"{table}: {error}") from None
    return servers


def _server(
    name: str, config: McpServerConfig, table: str, stderr_log: Path
) -> McpServer:
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
            stderr_log=stderr_log,
            run_unasked=config.run_unasked,
            trust_read_only_hints=config.trust_read_only_hints,
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
        run_unasked=config.run_unasked,
        trust_read_only_hints=config.trust_read_only_hints,
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
    """Lines per server: its name, the tools the model knows it by, and
    where its stderr goes.

    The servers have started (a session read their lists): the lists are
    the ones kept then.
    """
    lines = []
    for server in servers:
        names = ", ".join(tool.name for tool in server.tools()) or "(no tools)"
        lines.append(f"mcp: {server.name}: {names}")
        if server.stderr_log is not None:
            lines.append(f"mcp: {server.name}: its stderr goes to {server.stderr_log}")
    return lines
