"""The README's example of store faults and closing runs as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"


def test_the_store_faults_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    (example,) = [block for block in blocks if "views_timeout" in block]
    exec(compile(example, "README.md", "exec"), {"__name__": "readme"})
    assert capsys.readouterr().out == "completed None\n"
