"""What a disk flush costs the CPU of the work around it, beyond its own.

Budget 2 sets a durable turn against a floor: its commits times one
commit's cost in a bare sqlite3 loop. That loop's own CPU is small, but a
turn's work between its commits runs on caches a flush has just filled
with the kernel's. To see that part alone, a memory:// turn (no disk)
is run with a stand-in after each of its 4 saves:

- ``none``: nothing (the memory:// turn);
- ``fsync``: a 4 KiB write over the start of a scratch file and its
  flush (``--sync``), which the ``bare`` loop below costs by itself;
- ``sleep``: a sleep as long as that flush's wall time: blocking as
  long, with no flush;
- ``handed``: the same flush, made by a thread of its own while the
  saving thread waits for it (as a writer thread that commits for the
  sessions would): whether the cost stays with the flushing thread;
- ``bare``: the write and flush alone in a loop, its CPU and wall time.

Each runs in a fresh process, in rounds. The turn's CPU with ``fsync``
minus ``none`` minus four bare flushes is what the flushes cost the
turn's own work.

``--sync fdatasync`` flushes as SQLite's commits do (it makes the data
durable and the file's size, not its times): a file written over in
place then needs no journal commit of its own. ``fsync``, the default,
is what the figures recorded before 2026-12-06 used.

Run: python bench/fsync_penalty.py [--rounds 3] [--turns 600]
     [--sync fsync|fdatasync]
"""

from __future__ import annotations

import argparse
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

PAGE = b"x" * 4096
FLUSH_WALL = 125e-6
"""Seconds the ``sleep`` stand-in blocks: about a bare flush's wall time here."""


def handed(flush: Callable[[], None]) -> Callable[[], None]:
    """``flush`` made on a daemon thread of its own; the caller waits for it."""
    requests: queue.SimpleQueue[threading.Event] = queue.SimpleQueue()

    def flusher_thread() -> None:
        while True:
            done = requests.get()
            flush()
            done.set()

    threading.Thread(target=flusher_thread, daemon=True).start()

    def flush_there() -> None:
        done = threading.Event()
        requests.put(done)
        done.wait()

    return flush_there


def pause() -> None:
    """Blocks as long as a bare flush takes, without flushing."""
    time.sleep(FLUSH_WALL)


def stand_in(mode: str, flush: Callable[[], None]) -> Callable[[], None] | None:
    """What ``mode`` runs after each save (a flushing thread only for ``handed``)."""
    if mode == "fsync":
        return flush
    if mode == "sleep":
        return pause
    if mode == "handed":
        return handed(flush)
    return None


SYNCS: dict[str, Callable[[int], None]] = {
    "fsync": os.fsync,
    "fdatasync": os.fdatasync,
}


def run_mode(mode: str, turns: int, sync: str) -> None:
    """Prints ``MODE cpu_us wall_us`` for one process's run of ``mode``."""
    with tempfile.TemporaryDirectory(prefix="turnlog-fsync-") as folder:
        fd = os.open(Path(folder) / "flush", os.O_WRONLY | os.O_CREAT)
        try:
            measure(mode, turns, fd, SYNCS[sync])
        finally:
            os.close(fd)


def measure(mode: str, turns: int, fd: int, sync: Callable[[int], None]) -> None:
    """As :func:`run_mode`, flushing the scratch file ``fd`` with ``sync``."""

    def flush() -> None:
        os.pwrite(fd, PAGE, 0)
        sync(fd)

    if mode == "bare":
        for _ in range(200):
            flush()
        cpu, wall = time.process_time(), time.perf_counter()
        for _ in range(turns):
            flush()
        print(
            mode,
            (time.process_time() - cpu) / turns * 1e6,
            (time.perf_counter() - wall) / turns * 1e6,
        )
        return
    sys.path.insert(0, str(Path(__file__).parent))
    from turn_cpu import timed_turns  # type: ignore[import-not-found]

    from turnlog.store import sqlite_pool

    after = stand_in(mode, flush)
    if after is not None:
        save_end = sqlite_pool.WriteTransaction.__exit__

        def then_stand_in(self: sqlite_pool.WriteTransaction, *exc: object) -> None:
            save_end(self, *exc)  # type: ignore[arg-type]
            after()

        sqlite_pool.WriteTransaction.__exit__ = then_stand_in  # type: ignore[method-assign]
    cpu, wall = timed_turns(turns, "memory://", forget=True)
    print(mode, cpu / turns * 1e6, wall / turns * 1e6)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--turns", type=int, default=600)
    parser.add_argument("--sync", choices=sorted(SYNCS), default="fsync")
    parser.add_argument("--mode", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.mode:
        run_mode(args.mode, args.turns, args.sync)
        return
    for number in range(1, args.rounds + 1):
        got = {}
        for mode in ("none", "fsync", "handed", "sleep", "bare"):
            out = subprocess.run(
                [
                    *(sys.executable, __file__, "--mode", mode),
                    *("--turns", str(args.turns), "--sync", args.sync),
                ],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.split()
            got[mode] = (float(out[1]), float(out[2]))
        extra = got["fsync"][0] - got["none"][0] - 4 * got["bare"][0]
        print(
            f"round {number}: a turn's CPU {got['none'][0]:.0f} us; with a flush "
            f"after each save {got['fsync'][0]:.0f} us; with a sleep as long "
            f"{got['sleep'][0]:.0f} us; flushed by another thread "
            f"{got['handed'][0]:.0f} us; one bare flush {got['bare'][0]:.0f} us CPU, "
            f"{got['bare'][1]:.0f} us wall; the flushes cost the turn's own work "
            f"{extra:.0f} us",
            flush=True,
        )


if __name__ == "__main__":
    main()
