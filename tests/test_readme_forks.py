"""The README's forks and rewinds example runs, as written, in a fresh directory."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).parents[1] / "README.md"


def test_the_readme_fork_example_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    (example,) = [block for block in blocks if "fork_session(" in block]
    monkeypatch.chdir(tmp_path)
    exec(compile(example, "README.md", "exec"), {"__name__": "readme"})
    printed = capsys.readouterr().out.splitlines()
    assert printed == [
        "0 1 'Capital of France?'",
        "1 2 'How many people live there?'",
        "2 None ''",
        "Lyon.",
        "['Capital of France?', 'Paris.', 'And the second city?', 'Lyon.']",
        "trip",
        "['Capital of France?', 'Paris.', 'Is Lyon the second city?', "
        "'Yes, 1.1 million.']",
        "(2,)",
        "4",
    ]
