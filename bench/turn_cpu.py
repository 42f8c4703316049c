"""CPU time a turn costs turnlog, which a loaded machine disturbs less than wall time.

One session, 10 warm-up turns, then ``turns`` turns of one tool call each
(two scripted model calls); prints the process's CPU time (every thread,
``time.process_time``) and the wall time a turn, in microseconds. Meant
for comparing two trees on a machine others share: wall time there is
mostly waiting for a core.

Run: python bench/turn_cpu.py [TURNS] [memory:// | sqlite] [forget]

``forget``: the scripted model drops the requests it keeps for tests
(each holds the whole context, so they grow with the square of the turns
and the garbage collector walks them); the peers' model keeps none.
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from turnlog import Agent, Runtime, ScriptedModel, calls, function_tool, tool_call


@function_tool
def echo(text: str) -> str:
    """Returns its argument."""
    return text


def timed_turns(
    turns: int, url: str, *, forget: bool, before: Callable[[], None] | None = None
) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of ``turns`` turns of one session on ``url``,
    after 10 warm-up turns; ``before`` runs just before the measured ones."""
    model = ScriptedModel()
    for _ in range(turns + 10):
        model.add(calls(tool_call("echo", {"text": "hi"})), "done")
    with Runtime.open(url) as rt:
        session = rt.create_session(Agent("b", model=model, tools=[echo]))
        for turn in range(10):
            session.prompt(f"warm-up {turn}", timeout=30)
        if before is not None:
            before()
        cpu, wall = time.process_time(), time.perf_counter()
        for turn in range(turns):
            session.prompt(f"turn {turn}", timeout=30)
            if forget:
                model.requests.clear()
        return time.process_time() - cpu, time.perf_counter() - wall


def main() -> None:
    turns = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    store = sys.argv[2] if len(sys.argv) > 2 else "memory://"
    forget = len(sys.argv) > 3 and sys.argv[3] == "forget"
    with tempfile.TemporaryDirectory() as folder:
        url = store if store != "sqlite" else f"sqlite:///{Path(folder) / 'b.sqlite3'}"
        cpu, wall = timed_turns(turns, url, forget=forget)
    print(f"cpu us/turn {cpu / turns * 1e6:.0f}, wall us/turn {wall / turns * 1e6:.0f}")


if __name__ == "__main__":
    main()
