"""A turnlog process that owns a session, for the lease tests: the parent
freezes it (SIGSTOP) past its lease, takes the session over, thaws it.

Usage: python lease_child.py STORE_URL SESSION_ID LEASE_SECONDS

Opens the session with a short lease, runs one turn, prints OWNED, then
runs one command per line read from stdin:
  turn   run a turn; prints ``OK <final output>`` or ``REFUSED <error class>:
         <message>``
  exit   close the runtime and exit 0
"""

from __future__ import annotations

import sys

from turnlog import Agent, Runtime, ScriptedModel, TurnlogError


def main() -> None:
    url, session_id, lease = sys.argv[1], sys.argv[2], float(sys.argv[3])
    model = ScriptedModel([f"answer {n} from the first owner" for n in range(100)])
    with Runtime.open(url, lease_seconds=lease) as rt:
        session = rt.create_session(Agent("a", model=model), session_id=session_id)
        session.prompt("first question", timeout=30)
        print("OWNED", flush=True)
        for line in sys.stdin:
            command = line.strip()
            if command == "exit":
                break
            try:
                result = session.prompt(f"{command} again", timeout=30)
            except TurnlogError as error:
                print(f"REFUSED {type(error).__name__}: {error}", flush=True)
            else:
                print(f"OK {result.final_output}", flush=True)


if __name__ == "__main__":
    main()
