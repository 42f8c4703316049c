"""``turnlog audit SESSION`` with agents used as tools: the child sessions
shown as a tree under the timeline, and ``--verify`` checking the tree."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path

from turnlog import Agent, Runtime, ScriptedModel, calls, tool_call


def _ask(tool: str, text: str, call_id: str) -> object:
    return calls(tool_call(tool, {"input": text}, call_id=call_id))


def fill_tree(url: str) -> None:
    """lead -> researcher (which asks a checker) and lead -> a second researcher."""
    checker = Agent("checker", model=ScriptedModel(["checked"]))
    researcher = Agent(
        "researcher",
        model=ScriptedModel([_ask("check", "is it right?", "k1"), "Paris", "Lyon"]),
        tools=[checker.as_tool(name="check")],
    )
    lead = Agent(
        "lead",
        model=ScriptedModel(
            [
                calls(
                    tool_call("research", {"input": "capital?"}, call_id="a"),
                ),
                _ask("research", "second city?", "b"),
                "Paris and Lyon",
            ]
        ),
        tools=[researcher.as_tool(name="research")],
    )
    with Runtime.open(url) as rt:
        result = rt.create_session(lead, session_id="lead").prompt("go", timeout=30)
        assert result.final_output == "Paris and Lyon"
        rt.projections.catch_up()


def test_audit_shows_the_child_sessions_as_a_tree(turnlog, store_url: str) -> None:
    fill_tree(store_url)

    result = turnlog("--store", store_url, "audit", "lead")

    assert (result.code, result.err) == (0, "")
    lines = result.out.splitlines()
    started = [line for line in lines if "ChildSessionStarted" in line]
    assert len(started) == 2
    assert started[0].endswith("call a runs agent researcher as child session lead:1:a")
    tree = lines[
        lines.index("CHILD SESSIONS of lead (agents its tool calls ran)") + 1 :
    ]
    assert tree == [
        "  lead:1:a  agent researcher, call a: answered 'Paris'",
        "    lead:1:a:1:k1  agent checker, call k1: answered 'checked'",
        "  lead:1:b  agent researcher, call b: answered 'Lyon'",
    ]
    child = turnlog("--store", store_url, "audit", "lead:1:a")
    created = next(line for line in child.out.splitlines() if "SessionCreated" in line)
    assert created.endswith("agent researcher, route default, child of lead (call a)")


def test_verify_checks_the_whole_tree(turnlog, sqlite_url: str) -> None:
    fill_tree(sqlite_url)

    intact = turnlog("--store", sqlite_url, "audit", "lead", "--verify")

    assert (intact.code, intact.err) == (0, "")
    verdicts = intact.out.splitlines()
    sessions = ["lead", "lead:1:a", "lead:1:a:1:k1", "lead:1:b"]
    assert [line.rsplit(": ok, ", 1)[0] for line in verdicts] == sessions

    _forge_answer(sqlite_url, "checked")
    tampered = turnlog("--store", sqlite_url, "audit", "lead", "--verify")

    assert tampered.code == 1
    failed = [line for line in tampered.out.splitlines() if "FAILED" in line]
    assert len(failed) == 1
    assert failed[0].startswith("lead:1:a:1:k1: FAILED, altered event")


def _forge_answer(url: str, answer: str) -> None:
    """Edits the grandchild's recorded answer, as an intruder would."""
    db = Path(url.removeprefix("sqlite:///"))
    marker = f'"final_output":"{answer}"'.encode()
    with closing(sqlite3.connect(db)) as connection:
        rows = connection.execute(
            "SELECT rowid, state FROM stored_events "
            "WHERE topic = 'turnlog:TurnCompleted' ORDER BY rowid"
        ).fetchall()
        position, state = next((r, s) for r, s in rows if marker in s)
        forged = state.replace(marker, b'"final_output":"forged"')
        connection.execute(
            "UPDATE stored_events SET state = ? WHERE rowid = ?", (forged, position)
        )
        connection.commit()


def test_audit_json_ends_with_one_record_per_child(turnlog, sqlite_url: str) -> None:
    fill_tree(sqlite_url)

    result = turnlog("--store", sqlite_url, "audit", "lead", "--json")

    assert (result.code, result.err) == (0, "")
    records = [json.loads(line) for line in result.out.splitlines()]
    children = [r for r in records if "child_session" in r]
    assert records[-len(children) :] == children
    assert [
        (c["child_session"], c["depth"], c["parent_session"]) for c in children
    ] == [
        ("lead:1:a", 1, "lead"),
        ("lead:1:a:1:k1", 2, "lead:1:a"),
        ("lead:1:b", 1, "lead"),
    ]
    assert children[1]["outcome"] == "answered 'checked'"
