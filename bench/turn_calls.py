"""Python function calls a turn, by thread and by module: how much Python a turn runs.

``bench/turn_cpu.py``'s workload (one session on memory://, 10 warm-up
turns, then ``turns`` turns of one tool call each, the scripted model's
requests dropped), with a profile hook on every thread counting each
Python function called (``sys.setprofile`` ``call`` events: C functions
are not counted) during the measured turns only. Deterministic, so a
change's effect on the Python a turn runs shows without timing.

``--beneath``: also, for each function, the calls made while it ran (its
own and every call under it, on its thread): which operation of a turn
runs the most Python, where ``by function`` shows only where it ends.

``--sessions S`` runs S sessions at once instead, each ``turns`` turns,
prompted together from asyncio (``prompt_async``), as the peers' phase B
does; ``--store sqlite`` puts them on an SQLite file, where their saves
queue behind each other's commits (group commit). Counts are a turn's:
every thread's calls over all the sessions' turns.

Run: python bench/turn_calls.py [TURNS] [--top 30] [--beneath]
[--sessions 1] [--store memory:// | sqlite]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import re
import sys
import tempfile
import threading
from pathlib import Path
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


Key = tuple[str, str, str]
"""A function as counted: its thread's kind, its source, its name."""


class CallCounter:
    """A profile hook counting the Python calls made while ``counting``."""

    def __init__(self, *, beneath: bool) -> None:
        self.counts: collections.Counter[Key] = collections.Counter()
        self.beneath: collections.Counter[Key] = collections.Counter()
        self.counting = False
        self._with_beneath = beneath
        self._stacks = threading.local()

    def hook(self, frame: FrameType, event: str, _arg: Any) -> None:
        """For ``sys.setprofile`` and ``threading.setprofile``."""
        if not self.counting:
            return
        stack: list[Key] | None = getattr(self._stacks, "stack", None)
        if stack is None:
            stack = self._stacks.stack = []
        if event == "call":
            code = frame.f_code
            kind = thread_kind(threading.current_thread().name)
            key = (kind, short_path(code.co_filename), code.co_name)
            self.counts[key] += 1
            if self._with_beneath:
                stack.append(key)
                for running in set(stack):  # once each, however deep it recurs
                    self.beneath[running] += 1
        elif event == "return" and self._with_beneath and stack:
            stack.pop()


def scripted(turns: int) -> ScriptedModel:
    """A model answering ``turns`` turns (and ten more) with a tool call each."""
    model = ScriptedModel()
    for _ in range(turns + 10):
        model.add(calls(tool_call("echo", {"text": "hi"})), "done")
    return model


def count_one_session(counter: CallCounter, url: str, turns: int) -> None:
    """turn_cpu.py's workload: one session, its turns one after another."""
    model = scripted(turns)
    with Runtime.open(url) as rt:
        session = rt.create_session(Agent("b", model=model, tools=[echo]))
        for turn in range(10):
            session.prompt(f"warm-up {turn}", timeout=30)
        counter.counting = True
        for turn in range(turns):
            session.prompt(f"turn {turn}", timeout=30)
            model.requests.clear()
        counter.counting = False


async def count_sessions(
    counter: CallCounter, url: str, sessions: int, turns: int
) -> None:
    """``sessions`` sessions at once, ``turns`` turns each, after one warm-up."""
    models = [scripted(turns) for _ in range(sessions)]
    with Runtime.open(url) as rt:
        handles = [
            rt.create_session(Agent("b", model=model, tools=[echo])) for model in models
        ]
        await asyncio.gather(*(h.prompt_async("warm-up") for h in handles))

        async def run(handle: Any, model: ScriptedModel) -> None:
            for turn in range(turns):
                await handle.prompt_async(f"turn {turn}")
                model.requests.clear()

        counter.counting = True
        await asyncio.gather(*(run(h, m) for h, m in zip(handles, models, strict=True)))
        counter.counting = False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("turns", type=int, nargs="?", default=200)
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--beneath", action="store_true")
    parser.add_argument("--sessions", type=int, default=1)
    parser.add_argument("--store", default="memory://")
    args = parser.parse_args()
    counter = CallCounter(beneath=args.beneath)
    counts, beneath = counter.counts, counter.beneath
    count = counter.hook
    # Set before the runtime starts its threads, so that every one has it.
    threading.setprofile(count)
    sys.setprofile(count)
    with tempfile.TemporaryDirectory() as folder:
        url = args.store
        if url == "sqlite":
            url = f"sqlite:///{Path(folder) / 'calls.sqlite3'}"
        if args.sessions == 1:
            count_one_session(counter, url, args.turns)
        else:
            asyncio.run(count_sessions(counter, url, args.sessions, args.turns))
    sys.setprofile(None)
    threading.setprofile(None)  # type: ignore[arg-type]

    turns = args.turns * args.sessions
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
    if args.beneath:
        print("\ncalls while each function ran (its own and beneath it):")
        for (kind, path, name), n in beneath.most_common(args.top):
            print(f"{n / turns:8.1f}  {path}:{name} ({kind})")


if __name__ == "__main__":
    main()
