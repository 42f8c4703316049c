"""Python function calls a turn, by thread and by module: how much Python a turn runs.

``bench/turn_cpu.py``'s workload (one session on memory://, 10 warm-up
turns, then ``turns`` turns of one tool call each, the scripted model's
requests dropped), with a profile hook on every thread counting each
Python function called (``sys.setprofile`` ``call`` events: C functions
are not counted) during the measured turns only. Deterministic, so a
change's effect on the Python a turn runs shows without timing.

Run: python bench/turn_calls.py [TURNS] [--top 30]
"""

from __future__ import annotations

import argparse
import collections
import re
import sys
import threading
from types import FrameType
from typing import Any

from turnlog import Agent, Runtime, ScriptedModel, calls, function_tool, tool_call


@function_tool
def echo(text: str) -> str:
    """Returns its argument."""
    return text


def short_path(filename: str) -> str:
    """A source file as a reader knows it: the package path, or the stdlib file."""
    if filename == "<string>":
        return "generated"  # made by exec: dataclasses' __init__, say
    for marker in ("site-packages/", "/turnlog/", "/actors/", "/domain/"):
        if marker in filename:
            head = marker.strip("/") + "/" if marker != "site-packages/" else ""
            return head + filename.rsplit(marker, 1)[1]
    return "stdlib:" + filename.rsplit("/", 1)[-1]


def thread_kind(name: str) -> str:
    """A thread's kind: its name without a trailing number (SessionActor-3)."""
    return re.sub(r"-\d+$", "", name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("turns", type=int, nargs="?", default=200)
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()
    counts: collections.Counter[tuple[str, str, str]] = collections.Counter()
    counting = False

    def count(frame: FrameType, event: str, _arg: Any) -> None:
        if event == "call" and counting:
            code = frame.f_code
            kind = thread_kind(threading.current_thread().name)
            counts[(kind, short_path(code.co_filename), code.co_name)] += 1

    # Set before the runtime starts its threads, so that every one has it.
    threading.setprofile(count)
    sys.setprofile(count)
    model = ScriptedModel()
    for _ in range(args.turns + 10):
        model.add(calls(tool_call("echo", {"text": "hi"})), "done")
    with Runtime.open("memory://") as rt:
        session = rt.create_session(Agent("b", model=model, tools=[echo]))
        for turn in range(10):
            session.prompt(f"warm-up {turn}", timeout=30)
        counting = True
        for turn in range(args.turns):
            session.prompt(f"turn {turn}", timeout=30)
            model.requests.clear()
        counting = False
    sys.setprofile(None)
    threading.setprofile(None)  # type: ignore[arg-type]

    turns = args.turns
    print(f"Python calls a turn: {sum(counts.values()) / turns:,.0f}")
    by_thread: collections.Counter[str] = collections.Counter()
    by_module: collections.Counter[str] = collections.Counter()
    for (kind, path, _name), n in counts.items():
        by_thread[kind] += n
        by_module[path] += n
    print("\nby thread:")
    for kind, n in by_thread.most_common():
        print(f"{n / turns:8.0f}  {kind}")
    print("\nby module:")
    for path, n in by_module.most_common(args.top):
        print(f"{n / turns:8.0f}  {path}")
    print("\nby function:")
    for (kind, path, name), n in counts.most_common(args.top):
        print(f"{n / turns:8.1f}  {path}:{name} ({kind})")


if __name__ == "__main__":
    main()
