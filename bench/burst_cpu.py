"""The peers' burst (issue 24, budget 4) with its CPU and its garbage collections.

Runs the harness's phase B through the peers' own turnlog adapter
(``../shared/peers/turnlog_bench.py``): ``--sessions`` sessions made with
``create_session_async``, each running one turn of two model calls of
``PEERS_MODEL_LATENCY`` seconds (1.0 unless set) and one tool. Printed,
for the burst alone (not the imports or the runtime's opening): the
harness's sessions/s, the process's CPU a session (every thread), and
the cyclic collector's runs and CPU by generation. ``--gc-threshold``
sets ``gc.set_threshold`` first, to see what the collector costs.

Run: [PEERS_DIR=../shared/peers] python bench/burst_cpu.py [--sessions 1000]
         [--gc-threshold 10000,20,100]
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# From /work/main (PEERS_DIR elsewhere, a worktree, say).
PEERS = Path(
    os.environ.get("PEERS_DIR")
    or Path(__file__).resolve().parents[2] / "shared" / "peers"
)


class CollectorClock:
    """CPU time (of the collecting thread) and runs of each generation."""

    def __init__(self) -> None:
        self.runs = [0, 0, 0]
        self.seconds = [0.0, 0.0, 0.0]
        self._began = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._began = time.thread_time()
            return
        generation = info["generation"]
        self.runs[generation] += 1
        self.seconds[generation] += time.thread_time() - self._began


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--gc-threshold", default="")
    args = parser.parse_args()
    os.environ.setdefault("PEERS_MODEL_LATENCY", "1.0")
    sys.path.insert(0, str(PEERS))
    import workload  # type: ignore[import-not-found]

    phase_b = workload._phase_b
    clock = CollectorClock()
    figures: dict[str, float] = {}

    async def timed(*arguments: Any) -> Any:
        gc.callbacks.append(clock)
        began = time.process_time()
        try:
            return await phase_b(*arguments)
        finally:
            figures["cpu"] = time.process_time() - began
            gc.callbacks.remove(clock)

    workload._phase_b = timed
    if args.gc_threshold:
        gc.set_threshold(*(int(n) for n in args.gc_threshold.split(",")))
    workdir = tempfile.mkdtemp(prefix="burst-cpu-")
    sys.argv = [
        "turnlog_bench.py",
        *("--phases", "B", "-T", "4", "-S", str(args.sessions), "-K", "1"),
        *("--workdir", workdir),
    ]
    import turnlog_bench  # type: ignore[import-not-found]

    with contextlib.suppress(SystemExit):  # prints the harness's JSON line, exits
        workload.main(turnlog_bench.TurnlogAdapter)
    per_session = 1e3 * figures["cpu"] / args.sessions
    collections = ", ".join(
        f"gen{g} {clock.runs[g]} runs {1e3 * clock.seconds[g]:.0f} ms" for g in range(3)
    )
    print(f"burst CPU {per_session:.2f} ms a session; collector: {collections}")


if __name__ == "__main__":
    main()
