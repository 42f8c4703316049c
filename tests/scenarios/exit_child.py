"""A turnlog process that ends without closing its runtime.

Usage: python exit_child.py STORE_URL SESSION_ID MODE
  raise        run one turn, then die of an uncaught exception
  fall-off     run one turn, then return from main
  raise-in-turn  start a turn whose model call never answers, then raise

Nothing here closes the runtime: the process must still exit by itself.
"""

from __future__ import annotations

import sys

from turnlog import Agent, Runtime, ScriptedModel
from turnlog.testing import HeldModel


def main() -> None:
    url, session_id, mode = sys.argv[1:4]
    rt = Runtime.open(url)
    if mode == "raise-in-turn":
        model = HeldModel(ScriptedModel(["never sent"]))
        session = rt.create_session(Agent("a", model=model), session_id=session_id)
        session.send_input("start a turn")
        if not model.entered.wait(30):
            sys.exit("the model was never called")
        print("IN TURN", flush=True)
        raise RuntimeError("boom while a turn runs")
    agent = Agent("a", model=ScriptedModel(["first answer"]))
    session = rt.create_session(agent, session_id=session_id)
    session.prompt("first question", timeout=30)
    print("PROMPTED", flush=True)
    if mode == "raise":
        raise RuntimeError("boom after a turn")


if __name__ == "__main__":
    main()
