"""The README's typed-answer example runs, as written, in a fresh directory."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).parents[1] / "README.md"


def test_the_readme_typed_answer_example_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    (example,) = [block for block in blocks if "output_type=Invoice" in block]
    monkeypatch.chdir(tmp_path)
    exec(compile(example, "README.md", "exec"), {"__name__": "readme"})
    assert capsys.readouterr().out.splitlines() == [
        "ACME: 120.5",
        "rejected by output_type: answer.total: Input should be a valid number,"
        " unable to parse string as a number",
        "rejected by positive-totals: an invoice total must be positive",
    ]
