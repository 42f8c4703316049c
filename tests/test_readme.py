"""The README's embedding example runs, as written, in a fresh directory."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from turnlog import Runtime

README = Path(__file__).parents[1] / "README.md"


def test_the_readme_example_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "the README lost its example"
    monkeypatch.chdir(tmp_path)
    exec(compile(blocks[0], "README.md", "exec"), {"__name__": "readme"})
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == "2 + 3 = 5"
    assert "TurnCompletedMsg" in printed[-1]
    assert (tmp_path / ".turnlog" / "example.sqlite3").exists()


def test_the_readme_asyncio_example_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    (example,) = [block for block in blocks if "prompt_async" in block]
    monkeypatch.chdir(tmp_path)
    exec(compile(example, "README.md", "exec"), {"__name__": "readme"})
    printed = capsys.readouterr().out.splitlines()
    assert printed == ["assistant: Hello from turnlog.", "completed"]


def test_each_run_of_the_readme_example_makes_a_fresh_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    monkeypatch.chdir(tmp_path)
    for _ in range(2):
        exec(compile(blocks[0], "README.md", "exec"), {"__name__": "readme"})
    with Runtime.open("sqlite:///.turnlog/example.sqlite3") as rt:
        assert len(rt.sessions()) == 2


def test_the_readme_agents_as_tools_example_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    (example,) = [block for block in blocks if ".as_tool(" in block]
    monkeypatch.chdir(tmp_path)
    exec(compile(example, "README.md", "exec"), {"__name__": "readme"})
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == "The capital is Paris."
    assert re.fullmatch(r"session-\w+:1:c1 researcher", printed[1])
    assert printed[2] == "['lead', 'researcher']"
