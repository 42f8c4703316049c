"""Instructions a turn costs, counted by callgrind: steadier than time on a busy box.

Runs ``bench/turn_cpu.py`` under ``valgrind --tool=callgrind`` twice, at
``--low`` and ``--high`` turns, and divides the difference in instructions
by the difference in turns: start-up, imports and warm-up cancel out, and
what is left is what one more turn costs (every thread, the interpreter
included). Repeat runs of one build agree to well under 1%, where CPU time
on a shared machine moves by 20% or more.

Run: python bench/turn_instructions.py [--low 100] [--high 300]
[--store memory://] [--keep DIRECTORY]   (needs valgrind; the callgrind
files are kept in DIRECTORY for ``callgrind_annotate --inclusive=yes``)
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

TURN_CPU = Path(__file__).with_name("turn_cpu.py")


def instructions(turns: int, store: str, output: Path, *extra: str) -> int:
    """Instructions callgrind counted for one run of ``turn_cpu.py`` at ``turns``."""
    command = [
        "valgrind",
        "--tool=callgrind",
        f"--callgrind-out-file={output}",
        sys.executable,
        str(TURN_CPU),
        str(turns),
        store,
        *extra,
    ]
    run = subprocess.run(command, capture_output=True, text=True, check=True)
    found = re.search(r"Collected : (\d+)", run.stderr)
    if found is None:
        raise SystemExit(
            f"no instruction count in valgrind's output:\n{run.stderr[-2000:]}"
        )
    return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--low", type=int, default=100)
    parser.add_argument("--high", type=int, default=300)
    parser.add_argument("--store", default="memory://")
    parser.add_argument("--keep", type=Path, default=None)
    parser.add_argument(
        "--forget",
        action="store_true",
        help="the scripted model keeps no requests (turn_cpu.py's forget)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        folder = args.keep or Path(scratch)
        folder.mkdir(parents=True, exist_ok=True)
        extra = ("forget",) if args.forget else ()
        low = instructions(
            args.low, args.store, folder / f"callgrind.{args.low}.out", *extra
        )
        high = instructions(
            args.high, args.store, folder / f"callgrind.{args.high}.out", *extra
        )
    per_turn = (high - low) / (args.high - args.low)
    counts = f"{low:,} at {args.low}, {high:,} at {args.high}"
    what = f"{args.store}{', forget' if args.forget else ''}"
    print(f"{what}: {per_turn / 1e6:.3f} M instructions a turn ({counts})")


if __name__ == "__main__":
    main()
