"""Fixtures of the command-line tests: ``turnlog`` run in-process, and logs.

This folder goes on ``sys.path`` for ``cli_support``, the helpers the tests
import.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from turnlog import Agent, Runtime, ScriptedModel, calls, function_tool, tool_call
from turnlog.cli.main import main


@dataclass(frozen=True)
class Outcome:
    """What one ``turnlog`` command did: exit code, stdout, stderr."""

    code: int
    out: str
    err: str

    def error_line(self) -> str:
        """The one error line on stderr (fails if there is anything else)."""
        lines = self.err.splitlines()
        assert len(lines) == 1, self.err
        assert lines[0].startswith("turnlog: error: "), self.err
        assert "Traceback" not in self.err
        return lines[0]


Turnlog = Callable[..., Outcome]


@pytest.fixture(autouse=True)
def _no_store_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """A TURNLOG_STORE in the developer's shell must not leak into tests."""
    monkeypatch.delenv("TURNLOG_STORE", raising=False)


@pytest.fixture
def turnlog(capsys: pytest.CaptureFixture[str]) -> Turnlog:
    """Runs ``turnlog ARGS...`` in-process; returns what it did."""
    capsys.readouterr()  # what came before is not this command's

    def run(*argv: str) -> Outcome:
        code = main(list(argv))
        out, err = capsys.readouterr()
        return Outcome(code, out, err)

    return run


@function_tool
def lookup(key: str) -> str:
    """Looks a key up."""
    return key.upper()


def fill(url: str, sessions: tuple[str, ...] = ("s1", "s2"), turns: int = 2) -> None:
    """Writes ``sessions``, each ``turns`` turns of one tool call and an answer."""
    with Runtime.open(url) as runtime:
        for session_id in sessions:
            model = ScriptedModel()
            for turn in range(turns):
                model.add(
                    calls(tool_call("lookup", {"key": f"{session_id}-{turn}"})),
                    f"answer {turn}",
                )
            session = runtime.create_session(
                Agent("filler", model=model, tools=[lookup]), session_id=session_id
            )
            for turn in range(turns):
                assert session.prompt(f"question {turn}", timeout=10).completed
        runtime.projections.catch_up()  # the live views, as a reader finds them


@pytest.fixture
def filled() -> Callable[..., None]:
    """``fill(url, sessions, turns)``: a log with a few finished sessions."""
    return fill


@pytest.fixture
def log_path(tmp_path: Path) -> Path:
    return tmp_path / "log.sqlite3"


@pytest.fixture
def store(log_path: Path) -> str:
    return f"sqlite:///{log_path}"  # four slashes: log_path is absolute
