"""Shortcuts past match statements name every class those statements match.

``EventTranslator.translate`` and ``context_items`` skip their cases for an
event of a class none of them can match; a case added there and not to the
shortcut's tuple would be skipped for its own events.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from types import ModuleType
from typing import Any

from turnlog.domain import context, translation


def _case_classes(function: Any, namespace: ModuleType) -> list[type[Any]]:
    """The classes of the class patterns in ``function``'s match cases."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    classes = []
    for node in ast.walk(tree):
        if isinstance(node, ast.match_case) and isinstance(
            node.pattern, ast.MatchClass
        ):
            found: Any = namespace
            for part in ast.unparse(node.pattern.cls).split("."):
                found = getattr(found, part)
            classes.append(found)
    return classes


def test_translate_shortcut_lists_the_classes_it_matches() -> None:
    cases = _case_classes(translation.EventTranslator.translate, translation)
    assert len(cases) > 10
    assert list(translation._SESSION_CASES) == cases


def test_turn_event_shortcut_lists_the_classes_it_matches() -> None:
    cases = _case_classes(
        translation.EventTranslator._translate_turn_event, translation
    )
    assert len(cases) > 10
    assert list(translation._TURN_CASES) == cases


def test_note_shortcut_lists_the_classes_it_matches() -> None:
    cases = _case_classes(translation.EventTranslator.note, translation)
    assert len(cases) > 5
    assert list(translation._STATE_CASES) == cases


def test_a_turn_event_of_no_case_yields_no_message() -> None:
    from turnlog.domain.turn import Turn

    turn = Turn.open("s1", 1, "sub")  # TurnOpened: no message of its own
    (opened,) = turn.collect_events()
    translator = translation.EventTranslator("s1")
    assert translator.translate(opened, 1) == []
    assert translation._TURN_CASE_OF[type(opened)] is False


def test_context_items_shortcut_lists_the_classes_it_matches() -> None:
    cases = _case_classes(context.context_items, context)
    assert len(cases) > 4
    assert list(context._ITEM_CASES) == cases


def test_turn_cases_are_in_an_order_that_does_not_matter() -> None:
    # The cases are ordered by how often they come, which is free only while
    # no class among them is another's subclass (else the first would win).
    from turnlog.actors import turn_driver

    for function, namespace in (
        (translation.EventTranslator.translate, translation),
        (translation.EventTranslator._translate_turn_event, translation),
        (turn_driver.TurnDriver._run, turn_driver),
    ):
        cases = _case_classes(function, namespace)
        assert len(cases) > 5
        for one in cases:
            assert [c for c in cases if issubclass(c, one)] == [one], one
