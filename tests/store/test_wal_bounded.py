"""The SQLite WAL stays bounded while readers overlap without a gap.

Six reader threads loop over the log (exporting each session, verifying
every chain) while two writers run sessions. Such readers keep SQLite's
own checkpoints from ever starting the WAL over, so without a bound the
WAL grows with the log (here it reached about twice the log's size).
The test runs until the log has grown to four times the bound (a ratio,
not a time) and holds the WAL's largest size to three times the bound,
where an unbounded WAL would reach about eight. The keeper's restart of
the WAL holds this process's readers and writers back
(tests/store/test_wal_restart.py), so the readers here cannot hold it
off; the margin is for the growth between two checkpoints on a loaded
machine (bench/wal_truncation.py), and for a restart that still gives
up, whose next try comes a bound later.
"""

from __future__ import annotations

import itertools
import threading
import time
from pathlib import Path

import pytest

import turnlog.store.wal
from turnlog import Agent, Runtime, ScriptedModel
from turnlog.projections.anchors import recorded_heads
from turnlog.store.log import Store
from turnlog.store.transfer import export_session
from turnlog.store.verify import all_session_ids, verify_each

BOUND = 1024 * 1024
TEXT = "z" * 20_000


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def test_the_wal_stays_bounded_beside_overlapping_readers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(turnlog.store.wal, "WAL_CHECKPOINT_BYTES", BOUND)
    path = tmp_path / "log.sqlite3"
    wal = path.with_name(path.name + "-wal")
    url = f"sqlite:///{path}"
    stop = threading.Event()
    errors: list[BaseException] = []
    numbers = itertools.count()
    largest = 0

    with Runtime.open(url) as rt:
        agent = Agent("a", model=ScriptedModel([TEXT] * 100_000))
        reader = Store(url)

        def write() -> None:
            try:
                while not stop.is_set():
                    session = rt.create_session(agent, session_id=f"w{next(numbers)}")
                    session.prompt(TEXT, timeout=60)
                    session.close()
            except BaseException as error:
                errors.append(error)

        def read(export: bool) -> None:
            try:
                while not stop.is_set():
                    if export:
                        for session_id in all_session_ids(reader):
                            export_session(reader, session_id)
                    else:
                        for _ in verify_each(reader, recorded_heads(reader)):
                            pass
            except BaseException as error:
                errors.append(error)

        threads = [threading.Thread(target=write) for _ in range(2)]
        threads += [threading.Thread(target=read, args=(n % 2 == 0,)) for n in range(6)]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 240
        try:
            while _size(path) < 4 * BOUND and not errors:
                assert time.monotonic() < deadline, "the log did not grow in time"
                largest = max(largest, _size(wal))
                stop.wait(0.02)
        finally:
            stop.set()
            for thread in threads:
                thread.join(120)
            reader.close()
    assert not errors, errors
    assert largest <= 3 * BOUND, f"WAL reached {largest:,} bytes (bound {BOUND:,})"


def test_a_reader_that_never_lets_go_does_not_stall_every_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sqlite3

    monkeypatch.setattr(turnlog.store.wal, "WAL_CHECKPOINT_BYTES", BOUND // 4)
    path = tmp_path / "log.sqlite3"
    wal = path.with_name(path.name + "-wal")
    url = f"sqlite:///{path}"
    with Runtime.open(url) as rt:
        agent = Agent("a", model=ScriptedModel([TEXT] * 1000))
        rt.create_session(agent, session_id="first").prompt(TEXT, timeout=30)
        outsider = sqlite3.connect(path, isolation_level=None)
        try:
            outsider.execute("BEGIN")
            outsider.execute("SELECT count(*) FROM sqlite_master").fetchall()
            started = time.monotonic()
            for n in range(20):  # each checkpoint try waits out the outsider
                rt.create_session(agent, session_id=f"held{n}").prompt(TEXT, timeout=30)
            held = time.monotonic() - started
            assert _size(wal) > BOUND  # it could not be emptied meanwhile
        finally:
            outsider.execute("COMMIT")
            outsider.close()
        # Tries back off by a bound of growth each: far fewer than 20 waits.
        assert held < 20 * turnlog.store.wal.WAL_CHECKPOINT_WAIT
        for n in range(20):
            rt.create_session(agent, session_id=f"after{n}").prompt(TEXT, timeout=30)
        assert _size(wal) <= 2 * BOUND
