"""What an MCP server's settings may be, checked where the caller gives them.

``McpServer`` (``turnlog.mcp.tools``) takes its name, timeout, tool prefix
and tool selections through these checks, so a mistake is an
InvalidInputError when the server is built, never a surprise when it runs.
"""

from __future__ import annotations

import re
from collections.abc import Collection

from turnlog.domain.errors import InvalidInputError

ToolSelection = bool | Collection[str]
"""True or False for every tool of a server, or the names (as the server
calls them) of the tools it applies to."""

NEEDS_APPROVAL_REMOVED = (
    "needs_approval is no longer accepted: every MCP tool asks before it "
    "runs unless named in run_unasked (e.g. run_unasked=['read_file']); "
    "trust_read_only_hints=True also runs the tools the server marks read-only"
)
"""Why the old setting is refused: a list used to mean 'only these ask',
so every tool it did not name (a server's edit and move tools) ran unasked."""

_NAME = re.compile(r"[A-Za-z0-9_-]+")


def check_server(
    name: str,
    *,
    trust_read_only_hints: bool,
    timeout: float | None,
    needs_approval: None,
) -> None:
    """Checks a server's name, timeout and approval settings.

    Raises:
        InvalidInputError: one is not what it may be (or the removed
            ``needs_approval`` was given).
    """
    if needs_approval is not None:
        raise InvalidInputError(NEEDS_APPROVAL_REMOVED)
    if not isinstance(trust_read_only_hints, bool):
        msg = "trust_read_only_hints must be True or False"
        raise InvalidInputError(msg)
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        msg = f"MCP server name {name!r} may hold only letters, digits, _ and -"
        raise InvalidInputError(msg)
    if timeout is not None and (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or timeout <= 0
    ):
        msg = f"MCP timeout must be a positive number of seconds, not {timeout!r}"
        raise InvalidInputError(msg)


def tool_prefix_for(name: str, tool_prefix: str | None) -> str:
    """What goes before each tool name of server ``name`` (``<name>_`` by default)."""
    prefix = f"{name}_" if tool_prefix is None else tool_prefix
    if not isinstance(prefix, str) or (prefix and not _NAME.fullmatch(prefix)):
        msg = f"tool_prefix {tool_prefix!r} may hold only letters, digits, _ and -"
        raise InvalidInputError(msg)
    return prefix


def selection(value: ToolSelection, what: str) -> bool | frozenset[str]:
    """A tool selection, checked: a bool, or the set of names it gives."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) or not all(isinstance(v, str) for v in value):
        msg = f"{what} must be a bool or a collection of tool names"
        raise InvalidInputError(msg)
    return frozenset(value)


def selected(chosen: bool | frozenset[str], name: str) -> bool:
    """Whether a checked selection takes in the server's tool ``name``."""
    return chosen if isinstance(chosen, bool) else name in chosen
