"""The keeper's restarts of the SQLite WAL beside readers that overlap without a gap.

The workload of tests/store/test_wal_bounded.py, timed, as
``wal_growth.py`` runs it: two writers run one-turn sessions of 20 KB
texts while six readers loop over the log (half exporting every session,
half verifying every chain), with the WAL's bound at 1 MiB, until the
log reaches four bounds; ``--runs``
times, beside ``--spinners`` processes that only spin (a loaded machine,
as CI's). Every restart the keeper runs is timed (until 2026-12-06 the
keeper emptied the WAL with a TRUNCATE checkpoint past the bound instead:
the figures in bench/RESULTS.md before then are of those).

Printed per run and over all: the restarts (the keeper's checkpoints
that hold this process back), how many gave up (readers or writers held
them off for the whole ``WAL_CHECKPOINT_WAIT``), how long each held saves
back (its duration: SQLite lets no writer in while it runs), and the
WAL's largest size in bounds (sampled every 20 ms). ``--unheld`` runs
them as before turnlog.store.wal's ReadGate: this process's readers and
writers are not held back while the keeper restarts the WAL.

Run: python bench/wal_truncation.py [--runs 40] [--spinners 3] [--unheld]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wal_growth import wal_growth  # type: ignore[import-not-found]

import turnlog.store.wal
from turnlog.store.wal import ReadGate, WalKeeper

BOUND = 1024 * 1024


@dataclass
class Restarts:
    held: list[float] = field(default_factory=list)
    """Seconds each restart ran (saves waited as long)."""
    gave_up: int = 0


def _timed_checkpoints(restarts: Restarts, unheld: bool) -> None:
    """Times the keeper's restarts (and, ``unheld``, drops its holds)."""
    restart = WalKeeper._restart

    def timed(keeper: WalKeeper, connection: Any) -> bool:
        if unheld:
            keeper._hold_writers = nullcontext
        started = time.monotonic()
        busy = restart(keeper, connection)
        restarts.held.append(time.monotonic() - started)
        restarts.gave_up += busy
        return busy

    WalKeeper._restart = timed  # type: ignore[method-assign]
    if unheld:
        ReadGate.closed = lambda self: nullcontext()  # type: ignore[method-assign,assignment,return-value]


def one_run(folder: Path, number: int) -> float:
    """Runs the workload once; the WAL's largest size, in bounds."""
    run = wal_growth(
        folder / f"log{number}.sqlite3",
        seconds=600,
        writers=2,
        readers=6,
        every=0.02,
        text_size=20_000,
        turns=1,
        until_log=4 * BOUND,
    )
    if run.errors:
        raise run.errors[0]
    return max(sample.wal for sample in run.samples) / BOUND


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--spinners", type=int, default=3)
    parser.add_argument("--unheld", action="store_true")
    args = parser.parse_args()
    turnlog.store.wal.WAL_CHECKPOINT_BYTES = BOUND
    restarts = Restarts()
    _timed_checkpoints(restarts, args.unheld)
    spin = [sys.executable, "-c", "while True: pass"]
    spinners = [subprocess.Popen(spin) for _ in range(args.spinners)]
    largest: list[float] = []
    try:
        with tempfile.TemporaryDirectory() as folder:
            for number in range(args.runs):
                before, gave_up = len(restarts.held), restarts.gave_up
                largest.append(one_run(Path(folder), number))
                print(
                    f"run {number + 1:3d}: WAL at most {largest[-1]:.2f} bounds, "
                    f"{len(restarts.held) - before} restarts, "
                    f"{restarts.gave_up - gave_up} gave up",
                    flush=True,
                )
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
    held = sorted(restarts.held)
    mode = "unheld (as before)" if args.unheld else "held"
    print(f"\n{mode}, {args.runs} runs beside {args.spinners} spinning processes:")
    print(f"  restarts {len(held)}, gave up {restarts.gave_up}")
    if held:
        print(
            f"  saves held back: median {statistics.median(held) * 1000:.0f} ms, "
            f"worst {held[-1] * 1000:.0f} ms"
        )
    print(
        f"  WAL's largest: median {statistics.median(largest):.2f} bounds, "
        f"worst {max(largest):.2f}"
    )


if __name__ == "__main__":
    main()
