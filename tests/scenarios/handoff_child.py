"""A turnlog process that hands off, for crash tests: the parent SIGKILLs it.

Usage: python handoff_child.py STORE_URL SESSION_ID MODE
  in-new-agent-step  triage hands off; billing's model step prints
                     BILLING STEP and blocks
  pending-approval   triage hands off beside a call of its own tool that
                     waits for approval; prints PENDING
"""

from __future__ import annotations

import sys
import threading

from turnlog import Agent, Runtime, ScriptedModel, calls, function_tool, tool_call

never = threading.Event()


@function_tool(needs_approval=True)
def deploy(target: str) -> str:
    """Needs approval; never approved in this process."""
    return f"deployed {target}"


def blocked_billing_step(_request: object) -> str:
    print("BILLING STEP", flush=True)
    never.wait()
    return "never"


def main() -> None:
    url, session_id, mode = sys.argv[1:4]
    rt = Runtime.open(url)
    if mode == "in-new-agent-step":
        first = calls(tool_call("transfer_to_billing", {"reason": "invoice"}))
        model = ScriptedModel([first, blocked_billing_step])
    else:
        model = ScriptedModel(
            [
                calls(
                    tool_call("deploy", {"target": "prod"}, call_id="d1"),
                    tool_call("transfer_to_billing", call_id="h1"),
                )
            ]
        )
    billing = Agent("billing", model=model, instructions="billing", handoffs=["triage"])
    triage = Agent(
        "triage", model=model, instructions="triage", tools=[deploy], handoffs=[billing]
    )
    session = rt.create_session(triage, session_id=session_id)
    events = session.subscribe()
    worker = threading.Thread(target=session.prompt, args=("help",), daemon=True)
    worker.start()
    for item in events:
        msg = getattr(getattr(item, "event", None), "msg", None)
        if type(msg).__name__ == "ApprovalRequestedMsg":
            print("PENDING", flush=True)
    never.wait()


if __name__ == "__main__":
    main()
