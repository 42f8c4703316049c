"""`turnlog history`, `fork`, `rewind`, `audit --at` and the lineage tree,
on both stores."""

from __future__ import annotations

import json

import pytest
from cli_support import audit_lines, max_position, run

from turnlog import Agent, Runtime, ScriptedModel


def three_turns(url: str) -> None:
    model = ScriptedModel(["one", "two", "three", "after"])
    with Runtime.open(url) as rt:
        session = rt.create_session(Agent("a", model=model), session_id="s")
        for text in ("first", "second", "third"):
            session.prompt(text, timeout=10)


def test_history_lists_the_points(
    capsys: pytest.CaptureFixture[str], store_url: str
) -> None:
    three_turns(store_url)
    code, out, err = run(capsys, "--store", store_url, "history", "s")
    assert (code, err) == (0, "")
    header, *lines = out.splitlines()
    assert header.split() == ["AFTER", "TURN", "INPUT", "POS", "PREVIEW"]
    rows = [line.split() for line in lines]
    assert [(r[0], r[1]) for r in rows[:3]] == [("0", "1"), ("1", "2"), ("2", "3")]
    assert rows[0][-1] == "first"
    assert lines[-1].endswith("(the end)")


def test_fork_then_audit_shows_the_tree(
    capsys: pytest.CaptureFixture[str], store_url: str
) -> None:
    three_turns(store_url)
    code, out, err = run(
        capsys, "--store", store_url, "fork", "s", "--before-input", "2", "--as", "f"
    )
    assert (code, err) == (0, "")
    assert out.startswith("forked 's' after turn 1")
    code, out, err = run(capsys, "--store", store_url, "audit", "f")
    assert (code, err) == (0, "")
    timeline, tree = out.split("\n\n")
    names = [name for _, _, name, _ in audit_lines(timeline)]
    assert names[0] == "SessionCreated"  # the source's, read from it
    assert "SessionForked" in names
    assert tree.splitlines()[0] == "s"
    assert tree.splitlines()[1].startswith("└─ f forked at position")
    code, out, _ = run(capsys, "--store", store_url, "audit", "s")
    assert "├─ forked: f at position" in out.split("\n\n")[1]
    code, out, _ = run(capsys, "--store", store_url, "audit", "f", "--verify")
    assert code == 0


def test_rewind_and_the_state_as_it_was(
    capsys: pytest.CaptureFixture[str], store_url: str
) -> None:
    three_turns(store_url)
    code, out, err = run(
        capsys, "--store", store_url, "rewind", "s", "--after-turn", "1"
    )
    assert (code, err) == (0, "")
    assert out.strip() == "rewound 's' to after turn 1: set aside [2, 3]"
    code, out, _ = run(capsys, "--store", store_url, "audit", "s")
    assert "↺ rewound at position" in out
    assert "turns [2, 3] set aside" in out
    code, out, _ = run(capsys, "--store", store_url, "audit", "s", "--at", "2")
    assert code == 0
    assert out.splitlines()[0].startswith("s as turn 2 ended")
    assert [line.strip() for line in out.splitlines()[2:]] == [
        "user: first",
        "assistant: one",
        "user: second",
        "assistant: two",
    ]
    code, out, _ = run(
        capsys, "--store", store_url, "audit", "s", "--at", "3", "--json"
    )
    assert json.loads(out)["turn_count"] == 3
    with Runtime.open(store_url) as rt:
        session = rt.create_session(
            Agent("a", model=ScriptedModel(["x"])), session_id="s"
        )
        assert [m.content for m in session.messages()] == ["first", "one"]


def test_bad_points_are_one_line_errors_and_write_nothing(
    capsys: pytest.CaptureFixture[str], store_url: str
) -> None:
    three_turns(store_url)
    before = max_position(store_url)
    for argv in (
        ("fork", "s", "--before-input", "9"),
        ("fork", "s", "--before-input", "1", "--after-turn", "0"),
        ("rewind", "s"),
        ("rewind", "s", "--after-turn", "3"),
        ("fork", "nobody"),
    ):
        code, out, err = run(capsys, "--store", store_url, *argv)
        assert code != 0, argv
        assert len(err.strip().splitlines()) == 1, err
        assert out == ""
    assert max_position(store_url) == before


def test_sessions_lists_a_fork_with_its_source_and_first_prompt(
    capsys: pytest.CaptureFixture[str], store_url: str
) -> None:
    three_turns(store_url)
    run(capsys, "--store", store_url, "fork", "s", "--after-turn", "1", "--as", "f")
    with Runtime.open(store_url) as rt:
        summary = rt.summaries.load("f")
        assert (summary.forked_from, summary.first_prompt, summary.turns) == (
            "s",
            "first",
            1,
        )
