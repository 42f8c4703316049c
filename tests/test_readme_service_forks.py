"""The README's example of forks and rewinds over HTTP runs, as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).parents[1] / "README.md"


def test_the_readme_service_forks_example_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    (example,) = [block for block in blocks if "/rewind" in block]
    monkeypatch.chdir(tmp_path)
    exec(compile(example, "README.md", "exec"), {"__name__": "readme"})
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == "[(1, 'one'), (2, 'one two'), (None, '')]"
    assert printed[1] == "True 2"
    assert printed[2].endswith("'set_aside': [2]}")
    assert printed[3] == (
        "['one', 'Your message has 1 words.', 'a b c', 'Your message has 3 words.']"
    )
    assert printed[4] == "True"
