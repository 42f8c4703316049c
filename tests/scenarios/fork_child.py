"""A turnlog process that forks a session over and over until it is killed.

Usage: python fork_child.py STORE_URL
Runs three turns of session ``src``, prints READY, then forks it after turn
2 as ``f-0``, ``f-1``, ... printing ``FORKED n`` after each.
"""

from __future__ import annotations

import sys

from turnlog import Agent, Runtime, ScriptedModel


def main() -> None:
    url = sys.argv[1]
    rt = Runtime.open(url)
    model = ScriptedModel([f"answer {n}" for n in range(3)])
    session = rt.create_session(Agent("a", model=model), session_id="src")
    for n in range(3):
        session.prompt(f"question {n}", timeout=30)
    print("READY", flush=True)
    n = 0
    while True:
        rt.fork_session("src", after_turn=2, session_id=f"f-{n}")
        print("FORKED", n, flush=True)
        n += 1


if __name__ == "__main__":
    main()
