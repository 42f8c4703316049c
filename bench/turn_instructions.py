"""Instructions a turn costs, counted by callgrind: steadier than time on a busy box.

Runs ``bench/turn_cpu.py`` under ``valgrind --tool=callgrind`` twice, at
``--low`` and ``--high`` turns, and divides the difference in instructions
by the difference in turns: start-up, imports and warm-up cancel out, and
what is left is what one more turn costs (every thread, the interpreter
included). Repeat runs of one build mostly agree to within 1% (once in
seven runs, 4% more: the views fold in batches timed by the clock, which
callgrind slows), where CPU time on a shared machine moves by 20% or
more: compare builds in alternating runs, more than one each.

``--split``: also where a turn's instructions run, from each function's
own count in the two runs (``callgrind_annotate``), differenced the same
way: the interpreter (running bytecode; its objects, calls and frames;
its allocator; its cyclic collector), SQLite, msgspec, OpenSSL, the C
library and the rest. Under valgrind OpenSSL cannot use the CPU's SHA
instructions, so its share is far larger there than it runs natively.

Run: python bench/turn_instructions.py [--low 100] [--high 300]
[--store memory://] [--keep DIRECTORY] [--split]   (needs valgrind; the
callgrind files are kept in DIRECTORY for ``callgrind_annotate
--inclusive=yes``)
"""

from __future__ import annotations

import argparse
import collections
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


# A line of callgrind_annotate's listing: own instructions, the function
# ("file:name") and the object it was loaded from.
_FUNCTION_LINE = re.compile(r"^\s*([\d,]+) \(\s*[\d.]+%\)\s+(.*?)(?: \[(.*)\])?$")

_INTERPRETER_FILES = (
    ("ceval.c", "interpreter: running bytecode"),
    ("gcmodule.c", "interpreter: the cyclic collector"),
    ("obmalloc.c", "interpreter: its allocator"),
)

_LIBRARIES = (
    ("sqlite3", "SQLite"),
    ("msgspec", "msgspec"),
    ("libcrypto", "OpenSSL (SHA-256, emulated)"),
    ("_hashlib", "OpenSSL (SHA-256, emulated)"),
    ("pydantic_core", "pydantic-core"),
    ("libc.so", "C library (malloc, copies, locks)"),
    ("libpthread", "C library (malloc, copies, locks)"),
)


# CPython's own source tree, where a line names no object (callgrind lists
# code inlined from a header under the header's path).
_CPYTHON_SOURCE = re.compile(r"/(Objects|Python|Modules|Include|Parser)/")


def part_of(function: str, loaded_from: str) -> str:
    """Which part of the process a function belongs to, for ``--split``."""
    source, _, name = function.partition(":")
    if "libpython" in loaded_from or (
        not loaded_from and _CPYTHON_SOURCE.search(source)
    ):
        if name.startswith("_PyEval_EvalFrameDefault"):
            return "interpreter: running bytecode"
        for file_name, part in _INTERPRETER_FILES:
            if source.endswith(file_name):
                return part
        return "interpreter: objects, calls, frames"
    for name, part in _LIBRARIES:
        if name in loaded_from:
            return part
    return "other"


def parts(output: Path) -> collections.Counter[str]:
    """Own instructions of every function in a callgrind file, by part."""
    listing = subprocess.run(
        ["callgrind_annotate", "--threshold=100", str(output)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    found: collections.Counter[str] = collections.Counter()
    for line in listing.splitlines():
        matched = _FUNCTION_LINE.match(line)
        if matched is None or "PROGRAM TOTALS" in line:
            continue
        count, function, loaded_from = matched.groups()
        found[part_of(function, loaded_from or "")] += int(count.replace(",", ""))
    return found


def print_split(low: Path, high: Path, turns: int) -> None:
    """Each part's instructions a turn (the two runs' difference)."""
    at_low, at_high = parts(low), parts(high)
    per_turn = {
        part: (at_high[part] - at_low[part]) / turns for part in at_high | at_low
    }
    total = sum(per_turn.values())
    for part, count in sorted(per_turn.items(), key=lambda item: -item[1]):
        print(f"  {count / 1e3:8.1f} k  {100 * count / total:5.1f}%  {part}")


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
    parser.add_argument(
        "--split",
        action="store_true",
        help="also where a turn's instructions run (needs callgrind_annotate)",
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
        if args.split:
            print_split(
                folder / f"callgrind.{args.low}.out",
                folder / f"callgrind.{args.high}.out",
                args.high - args.low,
            )


if __name__ == "__main__":
    main()
