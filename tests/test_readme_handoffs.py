"""The README's handoff example runs, as written, in a fresh directory."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).parents[1] / "README.md"


def test_the_readme_handoff_example_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    (example,) = [block for block in blocks if "handoffs=" in block]
    monkeypatch.chdir(tmp_path)
    exec(compile(example, "README.md", "exec"), {"__name__": "readme"})
    printed = capsys.readouterr().out.splitlines()
    assert printed == [
        "Invoice 7 is paid.",
        "billing",
        "['You send each question to the agent for it.', "
        "'You answer questions about invoices.', "
        "'You answer questions about invoices.']",
        "Billing again: anything else about invoices?",
    ]
