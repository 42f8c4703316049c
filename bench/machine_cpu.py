"""Who used the machine's CPU over a stretch of a benchmark, read from /proc.

For a benchmark whose processes share the machine with a database server
(bench/cluster.py): how much CPU its own processes, PostgreSQL's and
everything else spent, so that a throughput can be set beside what the
machine's cores allow. Linux only.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")
"""Clock ticks a second: /proc counts CPU time in them."""


def process_seconds(pid: int, *, children: bool = False) -> float:
    """CPU seconds ``pid`` used so far (every thread, user and system).

    ``children``: with what its children that have ended used too (a
    PostgreSQL backend that closed is counted in its postmaster's).
    """
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    # After the command: state is field 3, utime 14, stime 15, cutime 16,
    # cstime 17 (proc(5)); here they are counted from field 3 at index 0.
    ticks = int(fields[11]) + int(fields[12])
    if children:
        ticks += int(fields[13]) + int(fields[14])
    return ticks / TICK


def postgres_seconds() -> float:
    """CPU seconds every PostgreSQL server process used, ended backends included."""
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):  # a process that just ended
            if (entry / "comm").read_text().strip().startswith("postgres"):
                total += process_seconds(int(entry.name), children=True)
    return total


def machine_busy_seconds() -> float:
    """CPU seconds every core spent busy (not idle, not waiting on I/O)."""
    first = Path("/proc/stat").read_text().splitlines()[0].split()
    ticks = [int(value) for value in first[1:]]
    idle = ticks[3] + ticks[4]  # idle, iowait
    # guest times are counted in user already (proc(5))
    return (sum(ticks[:8]) - idle) / TICK


@dataclass(frozen=True)
class CpuSnapshot:
    """CPU seconds so far: the benchmark's processes, PostgreSQL's, the machine's."""

    own: float
    postgres: float
    machine: float

    @classmethod
    def take(cls, pids: Iterable[int]) -> CpuSnapshot:
        own = 0.0
        for pid in pids:
            with contextlib.suppress(OSError):
                own += process_seconds(pid)
        return cls(own, postgres_seconds(), machine_busy_seconds())

    def __sub__(self, earlier: CpuSnapshot) -> CpuSnapshot:
        return CpuSnapshot(
            self.own - earlier.own,
            self.postgres - earlier.postgres,
            self.machine - earlier.machine,
        )
