"""A turnlog process whose tool updates the shared state, then is killed.

Usage: python context_child.py STORE_URL SESSION_ID MODE
  sync-update   a plain tool records an update, prints UPDATED and blocks
  async-update  the same from an async tool
"""

from __future__ import annotations

import asyncio
import sys
import threading
from dataclasses import dataclass

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


@dataclass
class Ledger:
    """Live dependencies: the value the tool records comes from them."""

    account: str


@function_tool
def book(context: ToolContext[Ledger]) -> str:
    """Books, then blocks so the process can be killed mid-call."""
    context.update_shared_state(booked=context.deps.account)
    print("UPDATED", flush=True)
    never.wait()
    return "booked"


@function_tool(name="book_async")
async def book_async(context: ToolContext[Ledger]) -> str:
    """``book`` as a coroutine."""
    await context.update_shared_state_async(booked=context.deps.account)
    print("UPDATED", flush=True)
    await asyncio.Event().wait()
    return "booked"


def main() -> None:
    url, session_id, mode = sys.argv[1:4]
    name = "book" if mode == "sync-update" else "book_async"
    model = ScriptedModel([calls(tool_call(name))])
    agent = Agent("clerk", model=model, tools=[book, book_async], deps_type=Ledger)
    rt = Runtime.open(url)
    session = rt.create_session(agent, session_id=session_id, deps=Ledger("acct-9"))
    session.prompt("book it", timeout=60)


if __name__ == "__main__":
    main()
