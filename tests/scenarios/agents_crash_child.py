"""A turnlog process whose agent calls another agent; the test SIGKILLs it.

Usage: python agents_crash_child.py STORE_URL MODE
  child-created   the child session exists; its prompt is held (a user_prompt
                  hook prints CHILD CREATED and blocks) before it is recorded
  child-mid-turn  the child's tool prints CHILD TOOL STARTED and blocks
  child-finished  the child answered; the parent's post_tool hook prints
                  CHILD FINISHED and blocks before the parent's call is recorded
  child-approval  the child's tool waits for an approval: CHILD PENDING

The agents are built by ``agents()``, which the test calls too, so both
processes run the same agents (same names, tools and middleware).
"""

from __future__ import annotations

import sys
import threading
from typing import Any

from turnlog import (
    Agent,
    HookResult,
    Middleware,
    Runtime,
    ScriptedModel,
    ToolCallInfo,
    UserPromptInfo,
    calls,
    function_tool,
    tool_call,
)

PARENT = "lead-session"
CHILD = f"{PARENT}:1:ask-1"
never = threading.Event()


class Pause(Middleware):
    """Prints a marker and blocks at one hook, when ``at`` names it."""

    name = "pause"

    def __init__(self, at: str = "") -> None:
        self.at = at

    def user_prompt(self, info: UserPromptInfo) -> HookResult | None:
        if self.at == "user_prompt":
            print("CHILD CREATED", flush=True)
            never.wait()
        return None

    def post_tool(self, info: ToolCallInfo) -> HookResult | None:
        if self.at == "post_tool":
            print("CHILD FINISHED", info.output, flush=True)
            never.wait()
        return None


def agents(
    mode: str, *, child_answers: list[Any], lead_answers: list[Any], live: bool
) -> Agent:
    """The lead agent whose ``research`` tool runs the researcher.

    ``live``: this is the process to be killed (its hooks and tool block).
    """

    @function_tool(needs_approval=mode == "child-approval")
    def look_up(topic: str) -> str:
        """Looks a topic up; blocks in the process to be killed."""
        if live and mode == "child-mid-turn":
            print("CHILD TOOL STARTED", flush=True)
            never.wait()
        return f"facts about {topic}"

    child_pause = "user_prompt" if live and mode == "child-created" else ""
    lead_pause = "post_tool" if live and mode == "child-finished" else ""
    researcher = Agent(
        "researcher",
        model=ScriptedModel(child_answers),
        tools=[look_up],
        middleware=[Pause(child_pause)],
    )
    return Agent(
        "lead",
        model=ScriptedModel(lead_answers),
        tools=[researcher.as_tool(name="research")],
        middleware=[Pause(lead_pause)],
    )


def ask_child() -> Any:
    """The lead's first step: ask the researcher."""
    return calls(tool_call("research", {"input": "what is turnlog?"}, call_id="ask-1"))


def main() -> None:
    url, mode = sys.argv[1:3]
    child_answers: list[Any] = ["a durable agent runtime"]
    if mode in ("child-mid-turn", "child-approval"):
        child_answers = [calls(tool_call("look_up", {"topic": "turnlog"}))]
    lead = agents(
        mode, child_answers=child_answers, lead_answers=[ask_child()], live=True
    )
    rt = Runtime.open(url)
    session = rt.create_session(lead, session_id=PARENT)
    threading.Thread(target=session.prompt, args=("tell me",), daemon=True).start()
    if mode == "child-approval":
        with rt.follow(CHILD) as follower:
            while type(follower.get(30).msg).__name__ != "ApprovalRequestedMsg":
                pass
        print("CHILD PENDING", flush=True)
    never.wait()


if __name__ == "__main__":
    main()
