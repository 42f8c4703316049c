"""The translator's shortcut past its session cases names every one of them."""

from __future__ import annotations

import ast
import inspect
import textwrap
from typing import Any

from turnlog.domain import translation


def _case_classes(function: Any) -> list[type[Any]]:
    """The classes of the class patterns in ``function``'s match cases."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    classes = []
    for node in ast.walk(tree):
        if isinstance(node, ast.match_case) and isinstance(
            node.pattern, ast.MatchClass
        ):
            found: Any = translation
            for part in ast.unparse(node.pattern.cls).split("."):
                found = getattr(found, part)
            classes.append(found)
    return classes


def test_the_shortcut_lists_the_classes_translate_matches() -> None:
    # translate() skips its cases for an event of none of these classes; a
    # case added there and not here would be skipped for its own events.
    cases = _case_classes(translation.EventTranslator.translate)
    assert len(cases) > 10
    assert list(translation._SESSION_CASES) == cases
