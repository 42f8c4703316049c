"""``turnlog serve`` holds its process to two malloc arenas.

glibc gives each new thread that allocates an arena of its own (up to
eight per core); the service's threads come and go with sessions, and
their arenas' free space kept its RSS creeping up (bench/soak.py). Each
case runs in a fresh interpreter, starts eight threads that allocate,
and counts the arenas glibc's ``malloc_stats`` reports.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc",
    reason="malloc arenas are glibc's",
)

THREADS_THAT_ALLOCATE = """
import ctypes, sys, threading
from turnlog.service.malloc_arenas import limit_malloc_arenas

print(limit_malloc_arenas() if sys.argv[1] == "limit" else "unlimited", flush=True)
started = threading.Barrier(8)

def allocate():
    started.wait()  # all eight alive at once, so none can inherit a freed arena
    blocks = [bytearray(1_000) for _ in range(100)]
    started.wait()
    del blocks

threads = [threading.Thread(target=allocate) for _ in range(8)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
ctypes.CDLL(None).malloc_stats()
"""


def _arenas(mode: str, **env: str) -> tuple[str, int]:
    # -P: a checkout in the working folder must not shadow the installed package.
    done = subprocess.run(
        [sys.executable, "-P", "-c", THREADS_THAT_ALLOCATE, mode],
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"} | env,
        check=True,
    )
    return done.stdout.strip(), done.stderr.count("Arena ")


def test_without_the_limit_each_thread_gets_an_arena() -> None:
    # The case the limit is for: shows the count below can tell.
    assert _arenas("unlimited")[1] > 2


def test_the_service_limit_holds_the_process_to_two_arenas() -> None:
    assert _arenas("limit") == ("True", 2)


def test_an_operators_malloc_arena_max_wins() -> None:
    assert _arenas("limit", MALLOC_ARENA_MAX="3") == ("False", 3)
