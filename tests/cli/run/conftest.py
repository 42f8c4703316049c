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

from fake_openai import FakeOpenAI


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
