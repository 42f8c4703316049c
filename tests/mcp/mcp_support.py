"""The MCP test server's script and files, shared by the MCP tests and the
``turnlog run`` tests that configure it in a route file."""

from __future__ import annotations

from pathlib import Path

SERVER = Path(__file__).with_name("mcp_server.py")


class ServerFiles:
    """The files a test server reads and writes."""

    def __init__(self, folder: Path) -> None:
        self.calls = folder / "calls.log"
        self.extra = folder / "extra-tools"

    @property
    def env(self) -> dict[str, str]:
        return {
            "MCP_TEST_MARK": str(self.calls),
            "MCP_TEST_EXTRA_TOOLS": str(self.extra),
        }

    def called(self) -> list[str]:
        """The tools called so far, in order."""
        if not self.calls.exists():
            return []
        return self.calls.read_text(encoding="utf-8").split()
