"""A turnlog process that creates a session with create_session_async, says
so, and waits to be killed (SIGKILL): the creation must be in the log.

Usage: python create_async_child.py STORE_URL SESSION_ID
"""

from __future__ import annotations

import asyncio
import sys
import threading

from turnlog import Agent, Runtime, ScriptedModel


async def create(rt: Runtime, session_id: str) -> None:
    agent = Agent("a", model=ScriptedModel(["unused"]))
    await rt.create_session_async(
        agent, session_id=session_id, shared_state={"made_by": "child"}
    )
    print("CREATED", flush=True)  # the parent kills this process now
    threading.Event().wait()


def main() -> None:
    url, session_id = sys.argv[1], sys.argv[2]
    rt = Runtime.open(url)
    asyncio.run(create(rt, session_id))


if __name__ == "__main__":
    main()
