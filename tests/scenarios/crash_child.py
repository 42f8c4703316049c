"""A turnlog process for crash tests: the parent SIGKILLs it mid-flight.

Usage: python crash_child.py STORE_URL SESSION_ID MODE
  between-turns     run one turn to the end, print DONE, wait to be killed
  in-tool           start a turn whose tool prints TOOL STARTED and blocks
  idempotent-tool   the same, with a tool declared idempotent
  pending-approval  start a turn whose tool waits for approval; print PENDING
  steered           calls run one after another; steer while the first
                    blocks (the second is skipped), print STEERED
"""

from __future__ import annotations

import sys
import threading

from turnlog import Agent, Runtime, ScriptedModel, calls, function_tool, tool_call

never = threading.Event()
tool_started = threading.Event()


@function_tool
def write_file(path: str) -> str:
    """Pretends to write a file; blocks so the process can be killed mid-call."""
    print("TOOL STARTED", path, flush=True)
    tool_started.set()
    never.wait()
    return "written"


@function_tool(idempotent=True)
def refresh_cache(key: str) -> str:
    """Safe to run twice; blocks so the process can be killed mid-call."""
    print("TOOL STARTED", key, flush=True)
    never.wait()
    return "refreshed"


@function_tool(needs_approval=True)
def deploy(target: str) -> str:
    """Needs approval; never approved in this process."""
    return f"deployed {target}"


def main() -> None:
    url, session_id, mode = sys.argv[1:4]
    rt = Runtime.open(url)
    if mode == "between-turns":
        agent = Agent("assistant", model=ScriptedModel(["first answer"]))
        session = rt.create_session(agent, session_id=session_id)
        session.prompt("first question", timeout=30)
        print("DONE", flush=True)
    elif mode == "in-tool":
        model = ScriptedModel([calls(tool_call("write_file", {"path": "a.txt"}))])
        agent = Agent("assistant", model=model, tools=[write_file])
        session = rt.create_session(agent, session_id=session_id)
        session.follow_up("queued before the kill")
        session.prompt("write the file", timeout=30)
    elif mode == "idempotent-tool":
        model = ScriptedModel([calls(tool_call("refresh_cache", {"key": "k1"}))])
        agent = Agent("assistant", model=model, tools=[refresh_cache])
        session = rt.create_session(agent, session_id=session_id)
        session.prompt("refresh it", timeout=30)
    elif mode == "pending-approval":
        model = ScriptedModel([calls(tool_call("deploy", {"target": "prod"}))])
        agent = Agent("assistant", model=model, tools=[deploy])
        session = rt.create_session(agent, session_id=session_id)
        events = session.subscribe()
        session.follow_up("then report")
        worker = threading.Thread(target=session.prompt, args=("deploy it",))
        worker.start()
        for item in events:
            if type(getattr(getattr(item, "event", None), "msg", None)).__name__ == (
                "ApprovalRequestedMsg"
            ):
                print("PENDING", flush=True)
    elif mode == "steered":
        model = ScriptedModel(
            [
                calls(
                    tool_call("write_file", {"path": "a.txt"}, call_id="c1"),
                    tool_call("write_file", {"path": "b.txt"}, call_id="c2"),
                )
            ]
        )
        agent = Agent(
            "assistant", model=model, tools=[write_file], parallel_tool_calls=False
        )
        session = rt.create_session(agent, session_id=session_id)
        worker = threading.Thread(target=session.prompt, args=("write both",))
        worker.start()
        tool_started.wait()
        session.steer("only the first one")  # returns once recorded
        print("STEERED", flush=True)
    never.wait()


if __name__ == "__main__":
    main()
