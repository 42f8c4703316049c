"""Whether a durable turn's commits append to the WAL or write over it; the cost.

A commit's ``fdatasync`` of a WAL that grows must also make the file's new
size durable (on ext4, a journal commit); one of a WAL that SQLite
started over writes into blocks the file already has. This prints:

- a bare loop's write and ``fdatasync`` of 8 KiB, appending to a file
  against writing over one, in microseconds each;
- the size of the log's WAL every 20 turns of one session on an SQLite
  file, with the turnlog this interpreter has installed: a WAL that keeps
  its size is written over, one that grows from nothing again and again
  is appended to.

Run: python bench/wal_appends.py [--turns 600]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from turnlog import Agent, Runtime, ScriptedModel, calls, function_tool, tool_call

BLOCK = b"x" * 8192


@function_tool
def echo(text: str) -> str:
    """Returns its argument."""
    return text


def flush_cost(folder: Path, *, append: bool, writes: int = 2000) -> float:
    """Microseconds a write and fdatasync take, appending or writing over."""
    # Emptied first: appending to a file of an earlier round would write over.
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    fd = os.open(folder / ("append" if append else "over"), flags)
    try:
        if not append:
            os.pwrite(fd, BLOCK * 1000, 0)
            os.fsync(fd)
        started = time.perf_counter()
        for n in range(writes):
            os.pwrite(fd, BLOCK, n * len(BLOCK) if append else (n % 1000) * len(BLOCK))
            os.fdatasync(fd)
        return (time.perf_counter() - started) / writes * 1e6
    finally:
        os.close(fd)


def wal_sizes(folder: Path, turns: int) -> list[int]:
    """The WAL's size in KiB every 20 turns of one session."""
    log = folder / "log.sqlite3"
    wal = log.with_name(log.name + "-wal")
    model = ScriptedModel()
    for _ in range(turns + 1):
        model.add(calls(tool_call("echo", {"text": "hi"})), "done")
    sizes = []
    with Runtime.open(f"sqlite:///{log}") as rt:
        session = rt.create_session(Agent("b", model=model, tools=[echo]))
        for turn in range(turns):
            session.prompt(f"turn {turn}", timeout=30)
            model.requests.clear()
            if turn % 20 == 0:
                sizes.append(wal.stat().st_size // 1024)
    return sizes


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=600)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        for _ in range(3):
            appending = flush_cost(folder, append=True)
            over = flush_cost(folder, append=False)
            print(
                f"write + fdatasync: appending {appending:.0f} us, over {over:.0f} us"
            )
        print("WAL KiB every 20 turns:", wal_sizes(folder, args.turns))


if __name__ == "__main__":
    main()
