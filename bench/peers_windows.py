"""The peers' workload on one session, through the peers' own turnlog adapter,
with CPU and wall time a turn over each window of turns.

``../shared/peers/turnlog_bench.py`` is what the side-by-side harness
runs; this drives that same adapter (its fake model, its tool, its
prompts) without the harness's phases, so that a build's turn can be
counted rather than timed: run it under ``valgrind --tool=callgrind`` at
two lengths and divide the difference by the turns between them, or
under ``strace -f -c`` for its system calls. Its own figures are CPU time
(every thread, ``time.process_time``) and wall time a turn, per window,
which show whether a turn gets dearer as the session grows.

Run: python bench/peers_windows.py [file | memory:// | URL] [TURNS] [WINDOW]
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

# From /work/main (PEERS_DIR elsewhere, a worktree, say).
PEERS = Path(
    os.environ.get("PEERS_DIR")
    or Path(__file__).resolve().parents[2] / "shared" / "peers"
)


async def run(store: str, turns: int, window: int) -> list[str]:
    sys.path.insert(0, str(PEERS))
    import workload  # type: ignore[import-not-found]
    from turnlog_bench import TurnlogAdapter  # type: ignore[import-not-found]

    if store != "file":
        os.environ["TURNLOG_BENCH_STORE"] = store
    with tempfile.TemporaryDirectory() as folder:
        adapter = TurnlogAdapter()
        await adapter.open(Path(folder))
        await adapter.begin_session("main")
        figures = []
        cpu, wall = time.process_time(), time.perf_counter()
        for turn in range(1, turns + 1):
            await adapter.run_turn("main", workload.user_prompt(0, turn))
            if turn % window == 0:
                now_cpu, now_wall = time.process_time(), time.perf_counter()
                figures.append(
                    f"{(now_cpu - cpu) / window * 1e6:.0f}/"
                    f"{(now_wall - wall) / window * 1e6:.0f}"
                )
                cpu, wall = now_cpu, now_wall
        await adapter.close()
    return figures


def main() -> None:
    store = sys.argv[1] if len(sys.argv) > 1 else "file"
    turns = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    window = int(sys.argv[3]) if len(sys.argv) > 3 else 250
    figures = asyncio.run(run(store, turns, window))
    print(f"CPU/wall us a turn, each {window} turns: " + " ".join(figures))


if __name__ == "__main__":
    main()
