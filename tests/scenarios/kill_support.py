"""Real turnlog processes to kill: run a script, wait for a line, SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest


def kill_when(script: Path, marker: str, *args: str) -> None:
    """Runs ``script`` with ``args``; once it prints a line starting with
    ``marker``, kills it with SIGKILL (failing the test if it exits first)."""
    with subprocess.Popen(
        [sys.executable, str(script), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        assert proc.stdout is not None
        assert proc.stderr is not None
        try:
            for line in proc.stdout:
                if line.startswith(marker):
                    break
            else:
                pytest.fail(f"child exited early ({proc.wait()}): {proc.stderr.read()}")
            os.kill(proc.pid, signal.SIGKILL)
        finally:
            proc.kill()
            proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
