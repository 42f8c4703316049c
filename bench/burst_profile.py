"""The peers' burst under a CPU profiler: where its CPU goes, by function.

Runs ``bench/burst_cpu.py`` (the harness's phase B through the peers'
turnlog adapter) under yappi with its CPU clock on every thread, and
prints the functions with the most CPU of their own (not counting what
they call): the share of the whole, the calls, and where they are.
yappi slows the run several times over, so read the shares, not the
times, and compare two builds only by their shares.

yappi is not one of turnlog's dependencies: ``pip install yappi`` into
the virtualenv that runs this.

Run: [PEERS_DIR=../shared/peers] python bench/burst_profile.py
         [--sessions 1000] [--top 25]
"""

from __future__ import annotations

import argparse
import runpy
import sys
from pathlib import Path

import yappi


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    burst = Path(__file__).with_name("burst_cpu.py")
    yappi.set_clock_type("cpu")
    yappi.start(builtins=False, profile_threads=True)
    sys.argv = [str(burst), "--sessions", str(args.sessions)]
    try:
        runpy.run_path(str(burst), run_name="__main__")
    finally:
        yappi.stop()
    stats = list(yappi.get_func_stats())
    stats.sort(key=lambda s: s.tsub, reverse=True)
    total = sum(s.tsub for s in stats) or 1.0
    print(f"own CPU of every function, all threads: {total:.2f} s")
    for s in stats[: args.top]:
        where = f"{Path(s.module).name}:{s.lineno}"
        share = 100 * s.tsub / total
        print(f"{share:5.1f}%  {s.ncall:8d} calls  {where:28s} {s.name}")


if __name__ == "__main__":
    main()
