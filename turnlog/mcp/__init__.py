"""MCP servers as tool sources (the ``mcp`` SDK, the ``mcp`` extra).

:class:`McpServer` declares a server (``McpServer.stdio(...)``,
``McpServer.http(...)``) and :class:`McpTool` is one of its tools as a
turnlog tool (``tools``). A live connection to a server runs on the
runtime's I/O loop (``link``); a stdio server is a child process whose
bytes are checked (``stdio``); where a server is (``targets``) and how its
results become tool results (``results``) have modules of their own.
"""

from turnlog.mcp.tools import McpServer, McpTool

__all__ = ["McpServer", "McpTool"]
