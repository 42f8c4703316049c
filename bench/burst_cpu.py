"""The peers' burst (issue 24, budget 4) with its CPU and its garbage collections.

Runs the harness's phase B through the peers' own turnlog adapter
(``../shared/peers/turnlog_bench.py``): ``--sessions`` sessions made with
``create_session_async``, each running ``--turns`` turns (1 unless set)
of two model calls of ``PEERS_MODEL_LATENCY`` seconds (1.0 unless set)
and one tool. Printed, for the burst alone (not the imports, the
runtime's opening or its close, as the harness's own clock): the
harness's sessions/s, the process's CPU a session (every thread), and
the cyclic collector's runs and CPU by generation; with ``--threads``,
the CPU a session by kind of thread (from the kernel's schedstat).
``--gc-threshold`` sets ``gc.set_threshold`` first, to see what the
collector costs.

Run: [PEERS_DIR=../shared/peers] python bench/burst_cpu.py [--sessions 1000]
         [--turns 1] [--threads] [--gc-threshold 10000,20,100]
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import re
import sys
import tempfile
import threading
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
    parser.add_argument("--threads", action="store_true", help="CPU by thread kind")
    parser.add_argument("--turns", type=int, default=1, help="turns a session")
    args = parser.parse_args()
    os.environ.setdefault("PEERS_MODEL_LATENCY", "1.0")
    sys.path.insert(0, str(PEERS))
    import workload  # type: ignore[import-not-found]

    phase_b = workload._phase_b
    clock = CollectorClock()
    figures: dict[str, float] = {}
    threads_before: dict[int, tuple[str, float]] = {}
    threads_after: dict[int, tuple[str, float]] = {}
    import turnlog_bench  # type: ignore[import-not-found]

    adapter_close = turnlog_bench.TurnlogAdapter.close

    async def close(adapter: Any) -> None:
        # The harness's wall time ends before it closes the runtime; so
        # does the burst's CPU (stopping a thousand actors is not a turn).
        if "began" not in figures:  # the harness's warm-up
            await adapter_close(adapter)
            return
        figures["cpu"] = time.process_time() - figures["began"]
        threads_after.update(thread_cpu())
        gc.callbacks.remove(clock)
        await adapter_close(adapter)

    async def timed(*arguments: Any) -> Any:
        gc.callbacks.append(clock)
        threads_before.update(thread_cpu())
        figures["began"] = time.process_time()
        return await phase_b(*arguments)

    workload._phase_b = timed
    turnlog_bench.TurnlogAdapter.close = close
    if args.gc_threshold:
        gc.set_threshold(*(int(n) for n in args.gc_threshold.split(",")))
    workdir = tempfile.mkdtemp(prefix="burst-cpu-")
    sys.argv = [
        "turnlog_bench.py",
        *("--phases", "B", "-T", "4", "-S", str(args.sessions), "-K", str(args.turns)),
        *("--workdir", workdir),
    ]
    with contextlib.suppress(SystemExit):  # prints the harness's JSON line, exits
        workload.main(turnlog_bench.TurnlogAdapter)
    per_session = 1e3 * figures["cpu"] / args.sessions
    collections = ", ".join(
        f"gen{g} {clock.runs[g]} runs {1e3 * clock.seconds[g]:.0f} ms" for g in range(3)
    )
    print(f"burst CPU {per_session:.2f} ms a session; collector: {collections}")
    if args.threads:
        print_threads(threads_before, threads_after, figures["cpu"], args.sessions)


def thread_cpu() -> dict[int, tuple[str, float]]:
    """(name, CPU seconds so far) of each live thread, by native id."""
    names = {t.native_id: t.name for t in threading.enumerate()}
    out = {}
    for tid in os.listdir("/proc/self/task"):
        with contextlib.suppress(FileNotFoundError):  # ended meanwhile
            with open(f"/proc/self/task/{tid}/schedstat") as stat:
                seconds = int(stat.read().split()[0]) / 1e9
            out[int(tid)] = (names.get(int(tid), f"thread {tid}"), seconds)
    return out


def print_threads(
    before: dict[int, tuple[str, float]],
    after: dict[int, tuple[str, float]],
    process_cpu: float,
    sessions: int,
) -> None:
    """CPU a session by kind of thread (names without their numbers)."""
    kinds: dict[str, float] = {}
    for tid, (name, seconds) in after.items():
        kind = re.sub(r"[-_ ]?\d+", "", name)
        kinds[kind] = kinds.get(kind, 0.0) + seconds - before.get(tid, (name, 0.0))[1]
    kinds["(threads that ended)"] = process_cpu - sum(kinds.values())
    for kind, seconds in sorted(kinds.items(), key=lambda item: -item[1]):
        print(f"  {1e3 * seconds / sessions:6.3f} ms a session  {kind}")


if __name__ == "__main__":
    main()
