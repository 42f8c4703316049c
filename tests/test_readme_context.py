"""The README's example of what a tool and the instructions see runs as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).parents[1] / "README.md"


def test_the_readme_context_example_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    (example,) = [block for block in blocks if "ToolContext[Inventory]" in block]
    monkeypatch.chdir(tmp_path)
    # As a user runs it: without this module's __future__ import.
    code = compile(example, "README.md", "exec", dont_inherit=True)
    exec(code, {"__name__": "readme"})
    printed = capsys.readouterr().out.splitlines()
    assert printed == [
        "['lamp'] 2",
        "You are shopkeeper. Reserved so far: nothing.",
        "You are shopkeeper. Reserved so far: ['lamp'].",
    ]
