"""``turnlog run`` refusals, in-process: each is one line and exit 2, and
nothing is opened (the conversation itself is tested in a pty)."""

from __future__ import annotations

from pathlib import Path

import pytest

from turnlog.cli.main import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def error_line(err: str) -> str:
    line = err.rstrip().splitlines()[-1]
    assert line.startswith("turnlog: error: ")
    assert "Traceback" not in err
    return line.removeprefix("turnlog: error: ")


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/log.sqlite3"


@pytest.fixture
def configured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TURNLOG_MODEL", "gpt-test")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")


def test_without_a_model_it_explains_how_to_configure_one(
    workspace: Path, url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "--store", url, "run")
    assert code == 2
    assert out == ""
    assert "OPENAI_BASE_URL" in err
    assert "turnlog demo" in err
    assert "TURNLOG_API=anthropic" in err
    assert "ANTHROPIC_API_KEY" in err
    assert error_line(err).startswith("no model configured")
    assert "TURNLOG_API=anthropic" in error_line(err)  # the line that stays in view
    assert not (tmp_path / "log.sqlite3").exists()


@pytest.mark.usefixtures("configured")
def test_an_unknown_route_lists_the_routes(
    workspace: Path, url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "--store", url, "run", "--model", "fast")
    assert code == 2
    assert error_line(err) == "no model route 'fast'; configured routes: default"
    assert len(err.splitlines()) == 1
    assert not (tmp_path / "log.sqlite3").exists()


@pytest.mark.usefixtures("configured")
def test_a_bad_session_id_changes_nothing(
    workspace: Path, url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "--store", url, "run", "--session", "bad id\n")
    assert code == 2
    assert error_line(err).startswith("session_id must be printable")
    assert not (tmp_path / "log.sqlite3").exists()


def test_a_malformed_route_file_is_one_line(
    workspace: Path, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    (workspace / "turnlog.toml").write_text("[routes.a\n")
    code, _, err = run(capsys, "--store", url, "run")
    assert code == 2
    assert "turnlog.toml is not valid TOML" in error_line(err)
    assert len(err.splitlines()) == 1


def test_the_help_shows_the_options(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "run", "--help")
    assert code == 0
    for option in ("--session ID", "--model ROUTE", "--tools", "--approval"):
        assert option in out
    # Both kinds of endpoint are named, not only OpenAI's.
    for setting in ("OPENAI_API_KEY", "TURNLOG_API=anthropic", "ANTHROPIC_API_KEY"):
        assert setting in out
    code, _, err = run(capsys, "run", "--approval", "sometimes")
    assert code == 2
    assert "invalid choice: 'sometimes'" in err
