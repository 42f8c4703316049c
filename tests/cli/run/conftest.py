"""Fixtures of the ``turnlog run`` tests: a clean environment, the fake server.

The fake OpenAI-style server of the provider tests is reused: its folder
goes on ``sys.path`` as the providers' conftest puts it there, and so do
the MCP tests' folder (for ``mcp_support``, the MCP test server) and this
folder, for ``run_support``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[2] / "providers"))
sys.path.insert(0, str(Path(__file__).parents[2] / "mcp"))
sys.path.insert(0, str(Path(__file__).parent))

import io

import pexpect
from fake_openai import FakeOpenAI
from pty_support import TIMEOUT, TURNLOG, Spawn, clean_environment, output_of
from run_support import API_KEY


@pytest.fixture(autouse=True)
def _no_settings_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A model configured in the developer's shell or own config directory
    must not leak into tests."""
    for name in list(os.environ):
        if name.startswith(("TURNLOG_", "OPENAI_", "ANTHROPIC_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "user-config"))


@pytest.fixture
def user_config(tmp_path: Path) -> Path:
    """Where the user's own (trusted) turnlog.toml goes; not written yet."""
    path = tmp_path / "user-config" / "turnlog" / "turnlog.toml"
    path.parent.mkdir(parents=True)
    return path


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    """A started fake server, stopped after the test."""
    server = FakeOpenAI().start()
    yield server
    server.stop()


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty working directory (no turnlog.toml), made the current one."""
    path = tmp_path / "workspace"
    path.mkdir()
    monkeypatch.chdir(path)
    return path


@pytest.fixture
def spawn(tmp_path: Path, workspace: Path, fake: FakeOpenAI) -> Iterator[Spawn]:
    """``spawn(*args, configured=True, env={}, verbose=False)``: ``turnlog
    [--verbose] run ARGS`` in a pty.

    The child runs in ``workspace`` against ``tmp_path/log.sqlite3``;
    ``configured`` points TURNLOG_MODEL / OPENAI_BASE_URL at the fake server.
    ``output_of(child)`` is what it printed.
    """
    assert TURNLOG.exists(), f"the console script is not installed at {TURNLOG}"
    children: list[pexpect.spawn] = []

    def start(
        *args: str,
        configured: bool = True,
        env: dict[str, str] | None = None,
        verbose: bool = False,
    ) -> pexpect.spawn:
        environment = clean_environment()
        if configured:
            environment.update(
                TURNLOG_MODEL="gpt-test",
                OPENAI_BASE_URL=fake.base_url,
                OPENAI_API_KEY=API_KEY,
            )
        environment.update(env or {})
        child = pexpect.spawn(
            str(TURNLOG),
            [
                *(["--verbose"] if verbose else []),
                "--store",
                f"sqlite:///{tmp_path}/log.sqlite3",
                "run",
                *args,
            ],
            cwd=str(workspace),
            env=environment,
            encoding="utf-8",
            timeout=TIMEOUT,
            dimensions=(40, 400),
        )
        child.logfile_read = io.StringIO()
        children.append(child)
        return child

    yield start
    for child in children:
        if child.isalive():
            child.terminate(force=True)
        child.close(force=True)
    for child in children:
        assert API_KEY not in output_of(child)
