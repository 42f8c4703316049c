"""Summarises bench/ab_peers.sh's runs: each build's medians and ranges, and
the median of the per-round ratios of one build to each other.

Run: python bench/ab_summary.py NEW_LABEL runs.txt [more.txt ...]
"""

from __future__ import annotations

import statistics
import sys
from collections import defaultdict


def main() -> None:
    new, files = sys.argv[1], sys.argv[2:]
    rounds: dict[tuple[str, str], dict[str, tuple[float, float]]] = defaultdict(dict)
    runs: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    for name in files:
        with open(name) as lines:
            for line in lines:
                fields = line.split()
                if len(fields) != 5 or "None" in fields:
                    continue  # a failed run prints no figures
                round_, build, store = fields[:3]
                figures = (float(fields[3]), float(fields[4]))
                rounds[(round_, store)][build] = figures
                runs[(build, store)].append(figures)
    for (build, store), measured in sorted(runs.items(), key=lambda kv: kv[0][::-1]):
        per_turn = [f[0] for f in measured]
        per_second = [f[1] for f in measured]
        print(
            f"{store:4} {build:10} n={len(measured):2} "
            f"us/turn {statistics.median(per_turn):7.0f} "
            f"[{min(per_turn):.0f}-{max(per_turn):.0f}] "
            f"sessions/s {statistics.median(per_second):6.1f} "
            f"[{min(per_second):.1f}-{max(per_second):.1f}]"
        )
    others = sorted({build for (build, _) in runs if build != new})
    for store in ("file", "mem"):
        for other in others:
            pairs = [
                (builds[new][0] / builds[other][0], builds[new][1] / builds[other][1])
                for (_, kind), builds in rounds.items()
                if kind == store and new in builds and other in builds
            ]
            if pairs:
                print(
                    f"{store:4} {new}/{other}: n={len(pairs)} per-round ratio, "
                    f"us/turn {statistics.median(p[0] for p in pairs):.3f}, "
                    f"sessions/s {statistics.median(p[1] for p in pairs):.3f}"
                )


if __name__ == "__main__":
    main()
