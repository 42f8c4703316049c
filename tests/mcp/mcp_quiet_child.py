"""A turnlog process whose MCP server writes to stderr (see test_mcp_stdio.py).

Usage: python mcp_quiet_child.py CALLS_LOG [STDERR_LOG]
The session calls the test server's ``noisy`` tool, which writes
``NOISE <text>`` to the server's stderr. With STDERR_LOG the server's
stderr goes to that file; without, to the ``turnlog.mcp`` logger, which
this process leaves as an application that set up no logging does. It
prints the turn's final output and exits.
"""

from __future__ import annotations

import sys
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
    calls_log = sys.argv[1]
    # Without STDERR_LOG, the server is built with no stderr_log option.
    options = {"stderr_log": sys.argv[2]} if len(sys.argv) > 2 else {}
    server = McpServer.stdio(
        sys.executable,
        [str(SERVER), "stdio"],
        name="srv",
        env={"MCP_TEST_MARK": calls_log},
        **options,
    )
    model = ScriptedModel([calls(tool_call("srv_noisy", {"text": "hello"})), "done"])
    agent = Agent("assistant", model=model, mcp_servers=[server])
    with Runtime.open("memory://", run_config=RunConfig(approval_policy="allow")) as rt:
        session = rt.create_session(agent, session_id="quiet")
        print(session.prompt("make noise", timeout=60).final_output, flush=True)


if __name__ == "__main__":
    main()
