"""The README's tool output limit example runs as written and prints what it says."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).parents[1] / "README.md"


def test_the_tool_output_limit_example_prints_its_marker(
    capsys: pytest.CaptureFixture[str],
) -> None:
    text = README.read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    (example,) = [b for b in blocks if "max_tool_output=" in b]
    exec(compile(example, "README.md", "exec"), {"__name__": "readme"})
    printed = capsys.readouterr().out.strip()
    assert printed.startswith("[turnlog: tool output truncated: 49,980 of 50,000")
    assert f"prints `{printed}`" in text
