"""``turnlog serve`` sets the collector before it serves: start-up objects
frozen, the young generation widened.

The cases that freeze for good run in a fresh interpreter (a frozen
collector would stay frozen for the rest of a test process): ``turnlog
serve`` with uvicorn's ``run`` replaced by one that reports what the
collector tracks, and its first threshold, at the moment serving would
begin, and garbage left before the freeze. The threshold cases in this
process put Python's thresholds back after each.
"""

from __future__ import annotations

import gc
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from turnlog.collector import (
    SERVICE_YOUNG_GENERATION,
    freeze_startup_objects,
    widen_young_generation,
)

SERVE_AND_REPORT = """
import gc, sys
import uvicorn

pythons_own = gc.get_threshold()[0]

def report(app, **settings):
    print(
        gc.get_freeze_count(),
        len(gc.get_objects()),
        gc.get_threshold()[0],
        pythons_own,
        flush=True,
    )

uvicorn.run = report
from turnlog.cli import main

options = sys.argv[2:]
sys.exit(main(["--store", sys.argv[1], "serve", "--demo", "--port", "8123", *options]))
"""


def serve_and_report(tmp_path: Path, *options: str) -> tuple[int, int, int, int]:
    """What ``turnlog serve --demo OPTIONS`` has done to the collector as it
    would begin serving: objects frozen, objects tracked, the first
    threshold, and the first threshold Python started with."""
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            SERVE_AND_REPORT,
            f"sqlite:///{tmp_path}/log.sqlite3",
            *options,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=tmp_path,  # not the checkout, whose folders would shadow the install
    )
    assert done.returncode == 0, done.stderr
    frozen, tracked, first_threshold, pythons_own = (
        int(n) for n in done.stdout.split()
    )
    return frozen, tracked, first_threshold, pythons_own


def test_serving_begins_with_start_up_frozen_and_the_young_generation_wide(
    tmp_path: Path,
) -> None:
    frozen, tracked, first_threshold, pythons_own = serve_and_report(tmp_path)

    # Tens of thousands frozen (the imports, the runtime, the app); a full
    # collection walks only the few made after.
    assert frozen > 20_000
    assert tracked < frozen / 10
    assert first_threshold == SERVICE_YOUNG_GENERATION > pythons_own


def test_an_operator_sets_the_young_generation_or_keeps_pythons(
    tmp_path: Path,
) -> None:
    _, _, chosen, _ = serve_and_report(tmp_path, "--young-generation", "5000")
    frozen, _, kept, pythons_own = serve_and_report(tmp_path, "--young-generation", "0")

    assert chosen == 5_000
    assert kept == pythons_own
    assert frozen > 20_000  # the start-up is frozen either way


def test_garbage_is_collected_before_the_rest_is_frozen(tmp_path: Path) -> None:
    script = """
import gc
from turnlog.collector import freeze_startup_objects

class Cycle:
    pass

def cycles():
    for _ in range(1_000):
        a, b = Cycle(), Cycle()
        a.other, b.other = b, a

gc.disable()  # the cycles stay until a collection finds them
cycles()
print(sum(isinstance(o, Cycle) for o in gc.get_objects()))
freeze_startup_objects()
gc.unfreeze()  # what was frozen is tracked again
print(sum(isinstance(o, Cycle) for o in gc.get_objects()))
"""
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        cwd=tmp_path,  # not the checkout, whose folders would shadow the install
    )
    # 2,000 unreachable objects before; none frozen with the rest.
    assert done.stdout.split() == ["2000", "0"]


def test_it_reports_what_it_froze() -> None:
    frozen = freeze_startup_objects()
    try:
        assert frozen == gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()


@pytest.fixture
def thresholds_put_back() -> Iterator[None]:
    """This process's collector thresholds as they were, after the test."""
    before = gc.get_threshold()
    try:
        yield
    finally:
        gc.set_threshold(*before)


@pytest.mark.usefixtures("thresholds_put_back")
def test_widening_raises_only_the_first_threshold() -> None:
    gc.set_threshold(700, 10, 10)

    assert widen_young_generation(5_000) == 5_000
    assert gc.get_threshold() == (5_000, 10, 10)


@pytest.mark.usefixtures("thresholds_put_back")
def test_a_wider_young_generation_already_set_is_kept() -> None:
    gc.set_threshold(50_000, 20, 5)

    assert widen_young_generation(5_000) == 50_000
    assert gc.get_threshold() == (50_000, 20, 5)


@pytest.mark.usefixtures("thresholds_put_back")
def test_automatic_collection_switched_off_stays_off() -> None:
    gc.set_threshold(0, 10, 10)

    assert widen_young_generation() == 0
    assert gc.get_threshold() == (0, 10, 10)
