"""What a ``turnlog.toml`` the user did not choose may not say.

A route file found in the working directory (a cloned repository's, say)
is read, but nothing in it may send a credential somewhere or make turnlog
run something: ``base_url`` and ``api_key_env`` decide where a key goes,
and an MCP server is a command turnlog runs, or an endpoint that receives
tool arguments. Such a file is refused whole, before anything is built.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from turnlog.domain.errors import InvalidInputError


class RouteFile(Protocol):
    """What the check reads of a parsed route file (``settings.ConfigFile``).

    Declared here, so that settings, which runs the check, is the only one
    of the two that knows the other.
    """

    @property
    def routes(self) -> Mapping[str, object]:
        """The ``[routes.NAME]`` tables, each with the UNTRUSTED_KEYS."""
        ...

    @property
    def mcp_servers(self) -> Mapping[str, object]:
        """The ``[mcp_servers.NAME]`` tables."""
        ...


UNTRUSTED_KEYS = ("base_url", "api_key_env")
"""Route settings that decide where a key goes: refused in an untrusted file."""


def refuse_untrusted(path: Path, file: RouteFile, user: Path | None) -> None:
    """Refuses ``file``, found at ``path`` in the working directory, if it
    says where a key goes or declares an MCP server.

    Args:
        path: where the file was found (named in the message).
        file: what it says.
        user: the user's own route file, the other way to trust settings.

    Raises:
        InvalidInputError: in one line naming each refused key and how to
            trust the file.
    """
    refused = [
        f"routes.{name}.{key}"
        for name, route in file.routes.items()
        for key in UNTRUSTED_KEYS
        if getattr(route, key) is not None
    ]
    what = "say where an API key is sent"
    servers = [f"mcp_servers.{name}" for name in file.mcp_servers]
    if servers:
        refused += servers
        what += " or declare MCP servers (commands turnlog runs)"
    if refused:
        where = f"; or move the settings to {user}" if user is not None else ""
        msg = (
            f"{path}: {', '.join(refused)} refused: a turnlog.toml found in the "
            f"working directory may not {what}; if you trust this file, "
            f"name it with --config or TURNLOG_CONFIG{where}"
        )
        raise InvalidInputError(msg)
