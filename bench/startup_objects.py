"""A full garbage collection in ``turnlog serve``, with its start-up objects
frozen and not.

Runs ``turnlog serve --demo`` on a fresh SQLite file, with uvicorn's
``run`` replaced by this measurement, so that the process is exactly as
it would begin serving: the objects the collector tracks, and the time a
full collection takes (the best of ``--repeat``), first as it stands
(``turnlog serve`` has frozen what start-up made), then with those
objects unfrozen, as before ``turnlog serve`` froze them. A full
collection stops every thread for that long.

Run: python bench/startup_objects.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import gc
import tempfile
import time
from typing import Any

import uvicorn

from turnlog.cli import main as turnlog_main


def full_collection(repeat: int) -> float:
    """The best time of ``repeat`` full collections, in seconds."""
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        gc.collect()
        best = min(best, time.perf_counter() - started)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    def measure(_app: Any, **_settings: Any) -> None:
        frozen = gc.get_freeze_count()
        tracked = len(gc.get_objects())
        with_freeze = full_collection(args.repeat)
        gc.unfreeze()
        untracked = len(gc.get_objects())
        without = full_collection(args.repeat)
        print(
            f"serving begins: {frozen:,} objects frozen, {tracked:,} tracked; "
            f"a full collection {with_freeze * 1e3:.1f} ms"
        )
        print(
            f"unfrozen: {untracked:,} tracked; a full collection {without * 1e3:.1f} ms"
        )

    uvicorn.run = measure
    with tempfile.TemporaryDirectory() as folder:
        store = f"sqlite:///{folder}/log.sqlite3"
        turnlog_main(["--store", store, "serve", "--demo", "--port", "8123"])


if __name__ == "__main__":
    main()
