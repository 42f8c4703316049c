"""What an event costs against what a save costs: the case for fewer events.

A turn of the peers' workload records 12 events in 4 saves. A design that
stored one record a step would keep the 4 saves and drop most of the
events' own work: building each, stamping it into the hash chain,
encoding it, inserting its row and handing on its recording. This
measures the two apart, with no actors and no views: one Session saved
over and over, each save holding ``n`` events (a one-key change of its
shared state each, about the size of a turn's smaller events), ``n`` from
1 to 12, on one thread. The CPU a save takes, fitted to a line in ``n``:
its slope is what each event costs, its intercept what each save costs
whatever it holds. Printed too: how much of the event's cost is deciding
it (triggering it on the aggregate) and how much saving it.

Run: python bench/event_costs.py [--saves 3000] [--store memory:// | sqlite]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from turnlog.domain.session import Session
from turnlog.store import Store

SIZES = (1, 2, 4, 8, 12)


def timed(
    store: Store, session: Session, events: int, saves: int
) -> tuple[float, float]:
    """Microseconds of CPU a save spends deciding and saving ``events`` events."""
    deciding = saving = 0
    for number in range(saves):
        started = time.process_time_ns()
        for index in range(events):
            session.update_shared_state({"k": f"{number}.{index}"})
        decided = time.process_time_ns()
        store.save(session)
        deciding += decided - started
        saving += time.process_time_ns() - decided
    return deciding / saves / 1000, saving / saves / 1000


def fit(points: dict[int, float]) -> tuple[float, float]:
    """The least-squares line through ``points``: (slope, intercept)."""
    slope, intercept = statistics.linear_regression(list(points), list(points.values()))
    return slope, intercept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--saves", type=int, default=3000)
    parser.add_argument("--store", default="memory://")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        url = args.store
        if url == "sqlite":
            url = f"sqlite:///{Path(folder) / 'events.sqlite3'}"
        store = Store(url)
        try:
            session = Session.create(
                "s1", agent_name="a", agent_digest="d", shared_state={}, model_route="m"
            )
            store.save(session)
            runs: dict[int, list[tuple[float, float]]] = {size: [] for size in SIZES}
            for _ in range(args.rounds):
                for size in SIZES:
                    runs[size].append(timed(store, session, size, args.saves))
        finally:
            store.close()
    decide = {size: statistics.median(d for d, _ in runs[size]) for size in SIZES}
    save = {size: statistics.median(s for _, s in runs[size]) for size in SIZES}
    for size in SIZES:
        print(
            f"{size:2} events a save: deciding {decide[size]:6.1f} us,"
            f" saving {save[size]:6.1f} us"
        )
    decide_slope, _ = fit(decide)
    save_slope, save_intercept = fit(save)
    print(
        f"an event: {decide_slope + save_slope:.1f} us ({decide_slope:.1f} deciding,"
        f" {save_slope:.1f} saving); a save besides its events: {save_intercept:.1f} us"
    )


if __name__ == "__main__":
    main()
