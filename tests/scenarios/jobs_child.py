"""A turnlog process whose tool starts a background job, then is killed.

Usage: python jobs_child.py STORE_URL SESSION_ID MODE
  plain       the job is not idempotent
  idempotent  the job is declared idempotent on its tool
Prints JOB RUNNING once the turn that started the job has completed,
with the job still running (it never ends), and waits to be killed.
"""

from __future__ import annotations

import sys
import threading

from turnlog import (
    Agent,
    Runtime,
    ScriptedModel,
    ToolContext,
    calls,
    function_tool,
    tool_call,
)

never = threading.Event()


def build_forever() -> str:
    never.wait()
    return "never"


def fetch_forever(source: str) -> str:
    never.wait()
    return f"never {source}"


@function_tool
def build(context: ToolContext) -> str:
    """Starts a build that never ends."""
    return f"build started as job {context.start_job('build', build_forever)}"


@function_tool(jobs={"fetch": fetch_forever})
def fetch(context: ToolContext) -> str:
    """Starts an idempotent download that never ends (here)."""
    job = context.start_job(
        "fetch", fetch_forever, "https://example.test/a", idempotent=True
    )
    return f"download started as job {job}"


def main() -> None:
    url, session_id, mode = sys.argv[1:4]
    name = "build" if mode == "plain" else "fetch"
    model = ScriptedModel([calls(tool_call(name)), "started"])
    agent = Agent("worker", model=model, tools=[build, fetch])
    rt = Runtime.open(url)
    session = rt.create_session(agent, session_id=session_id)
    result = session.prompt("start it", timeout=60)
    assert result.status == "completed", result
    print("JOB RUNNING", flush=True)
    never.wait()


if __name__ == "__main__":
    main()
