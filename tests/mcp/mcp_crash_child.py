"""A turnlog process killed during an MCP call (see test_mcp_crash.py).

Usage: python mcp_crash_child.py STORE_URL SESSION_ID CALLS_LOG
The session calls the test server's ``slow_mark`` tool, which prints
``TOOL STARTED <pid>`` to its stderr and never returns; turnlog logs the
server's stderr lines to the ``turnlog.mcp`` logger, which this process
shows on its own stderr; the parent SIGKILLs this process then.
"""

from __future__ import annotations

import logging
import sys
import threading
from pathlib import Path

from turnlog import (
    Agent,
    McpServer,
    RunConfig,
    Runtime,
    ScriptedModel,
    calls,
    tool_call,
)

SERVER = Path(__file__).with_name("mcp_server.py")


def main() -> None:
    url, session_id, calls_log = sys.argv[1:4]
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    server = McpServer.stdio(
        sys.executable,
        [str(SERVER), "stdio"],
        name="srv",
        env={"MCP_TEST_MARK": calls_log},
    )
    model = ScriptedModel([calls(tool_call("srv_slow_mark", {}))])
    agent = Agent("assistant", model=model, mcp_servers=[server])
    rt = Runtime.open(url, run_config=RunConfig(approval_policy="allow"))
    session = rt.create_session(agent, session_id=session_id)
    session.prompt("mark it", timeout=60)
    threading.Event().wait()


if __name__ == "__main__":
    main()
