"""``turnlog serve`` freezes its start-up objects before it serves.

The cases that freeze for good run in a fresh interpreter (a frozen
collector would stay frozen for the rest of a test process): ``turnlog
serve`` with uvicorn's ``run`` replaced by one that reports what the
collector tracks at the moment serving would begin, and garbage left
before the freeze.
"""

from __future__ import annotations

import gc
import subprocess
import sys
from pathlib import Path

from turnlog.service.startup_objects import freeze_startup_objects

SERVE_AND_REPORT = """
import gc, sys
import uvicorn

def report(app, **settings):
    print(gc.get_freeze_count(), len(gc.get_objects()), flush=True)

uvicorn.run = report
from turnlog.cli import main

sys.exit(main(["--store", sys.argv[1], "serve", "--demo", "--port", "8123"]))
"""


def test_serving_begins_with_the_start_up_objects_frozen(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SERVE_AND_REPORT, f"sqlite:///{tmp_path}/log.sqlite3"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=tmp_path,  # not the checkout, whose folders would shadow the install
    )
    assert done.returncode == 0, done.stderr
    frozen, tracked = (int(n) for n in done.stdout.split())
    # Tens of thousands frozen (the imports, the runtime, the app); a full
    # collection walks only the few made after.
    assert frozen > 20_000
    assert tracked < frozen / 10


def test_garbage_is_collected_before_the_rest_is_frozen(tmp_path: Path) -> None:
    script = """
import gc
from turnlog.service.startup_objects import freeze_startup_objects

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
