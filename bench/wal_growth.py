"""The SQLite WAL beside long readers: sessions write while exports loop.

Writers (``--writers`` threads on one runtime) create sessions and prompt
them, three turns each, for ``--seconds``. Beside them, ``--readers`` threads on
their own Store loop for as long: half export every session of the log (as
``turnlog export`` does, session by session), half run ``audit --verify
--all`` over it. (``turnlog rebuild`` is offline: it refuses to swap in
views of a log that moved on under it, so it is not run here.) Every
``--every`` seconds it prints the WAL file's size, the log's size, the
process's RSS and how many sessions and exports were done.

Budget: the WAL stays bounded: its largest size in the whole run is no
more than twice the bound (``WAL_CHECKPOINT_BYTES``, 4 MiB), while the log
grows past that. ``--unbounded`` runs without the bound, as before it, to
compare (there the WAL grows with the log).

Run: python bench/wal_growth.py [--seconds 600] [--writers 4] [--readers 2] [--every 30]
     [--unbounded]
"""

from __future__ import annotations

import argparse
import itertools
import os
import resource
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import turnlog.store.wal
from turnlog import Agent, Runtime, ScriptedModel
from turnlog.projections.anchors import recorded_heads
from turnlog.store.log import Store
from turnlog.store.transfer import export_session
from turnlog.store.verify import all_session_ids, verify_each

MIB = 1024 * 1024
BOUND = turnlog.store.wal.WAL_CHECKPOINT_BYTES


@dataclass
class Sample:
    at: float
    wal: int
    log: int
    rss: int
    sessions: int
    reads: int


@dataclass
class Run:
    samples: list[Sample] = field(default_factory=list)
    sessions: int = 0
    reads: int = 0
    errors: list[BaseException] = field(default_factory=list)

    def first_half_max(self) -> int:
        half = self.samples[: max(1, len(self.samples) // 2)]
        return max(s.wal for s in half)

    def second_half_max(self) -> int:
        half = self.samples[len(self.samples) // 2 :]
        return max(s.wal for s in half)

    def bounded(self) -> bool:
        largest = max(self.first_half_max(), self.second_half_max())
        return largest <= 2 * BOUND and self.samples[-1].log > 2 * BOUND


def _rss() -> int:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _loop(stop: threading.Event, run: Run, work: Callable[[], None]) -> None:
    while not stop.is_set():
        try:
            work()
        except BaseException as error:  # noqa: BLE001 - reported by the run
            run.errors.append(error)
            return
        run.reads += 1


def wal_growth(
    path: Path,
    seconds: float,
    *,
    writers: int = 4,
    readers: int = 2,
    every: float = 1.0,
    report: Callable[[Sample], None] | None = None,
    text_size: int = 2000,
    turns: int = 3,
    until_log: int | None = None,
) -> Run:
    """Writes and reads the log at ``path`` for ``seconds`` (or until the log
    file reaches ``until_log`` bytes); samples as it goes.

    Each session runs ``turns`` turns, its prompts and answers
    ``text_size`` characters each.
    """
    url = f"sqlite:///{path}"
    wal = path.with_name(path.name + "-wal")
    run = Run()
    stop = threading.Event()
    counter = itertools.count()
    lock = threading.Lock()
    with Runtime.open(url) as rt:
        agent = Agent("a", model=ScriptedModel(["x" * text_size] * 10_000_000))

        def write() -> None:
            while not stop.is_set():
                with lock:
                    n = next(counter)
                session = rt.create_session(agent, session_id=f"w{n}")
                for _ in range(turns):
                    session.prompt("y" * text_size, timeout=60)
                session.close()
                with lock:
                    run.sessions += 1

        store = Store(url)

        def export_all() -> None:
            for session_id in all_session_ids(store):
                export_session(store, session_id)
                if stop.is_set():
                    return

        def verify_all() -> None:
            for _ in verify_each(store, recorded_heads(store)):
                if stop.is_set():
                    return

        threads = [threading.Thread(target=write) for _ in range(writers)]
        threads += [
            threading.Thread(target=_loop, args=(stop, run, work))
            for work in [export_all, verify_all] * (readers // 2 or 1)
        ]
        for thread in threads:
            thread.start()
        started = time.monotonic()
        try:
            while (
                time.monotonic() - started < seconds
                and not run.errors
                and (until_log is None or _size(path) < until_log)
            ):
                stop.wait(every)
                sample = Sample(
                    time.monotonic() - started,
                    _size(wal),
                    _size(path),
                    _rss(),
                    run.sessions,
                    run.reads,
                )
                run.samples.append(sample)
                if report is not None:
                    report(sample)
        finally:
            stop.set()
            for thread in threads:
                thread.join(120)
            store.close()
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=600)
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--readers", type=int, default=2)
    parser.add_argument("--every", type=float, default=30)
    parser.add_argument(
        "--unbounded",
        action="store_true",
        help="no WAL bound (as before it): leave checkpoints to SQLite alone",
    )
    args = parser.parse_args()
    if args.unbounded:
        turnlog.store.wal.WAL_CHECKPOINT_BYTES = 1 << 62
    heads = ("t (s)", "WAL MiB", "log MiB", "RSS MiB", "sessions", "reads")
    print(" ".join(f"{h:>9}" for h in heads))

    def show(s: Sample) -> None:
        print(
            f"{s.at:9.0f} {s.wal / MIB:9.2f} {s.log / MIB:9.2f} {s.rss / MIB:9.1f} "
            f"{s.sessions:9d} {s.reads:9d}",
            flush=True,
        )

    with tempfile.TemporaryDirectory() as folder:
        run = wal_growth(
            Path(folder) / "log.sqlite3",
            args.seconds,
            writers=args.writers,
            readers=args.readers,
            every=args.every,
            report=show,
        )
    if run.errors:
        raise SystemExit(f"a reader failed: {run.errors[0]!r}")
    print(
        f"WAL max: first half {run.first_half_max() / MIB:.2f} MiB, second half "
        f"{run.second_half_max() / MIB:.2f} MiB; RSS {run.samples[0].rss / MIB:.0f} -> "
        f"{run.samples[-1].rss / MIB:.0f} MiB; "
        f"budget {'met' if run.bounded() else 'MISSED'}"
    )


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
