"""A fork's lineage checked from the log: SIGKILL mid-fork, tampering with
the source's prefix, rebuilt views, and the context property."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from turnlog import Agent, Runtime, ScriptedModel, calls, function_tool, tool_call
from turnlog.domain.ids import session_uuid, turn_uuid
from turnlog.projections.rebuild import rebuild
from turnlog.projections.tables import ViewTables
from turnlog.store.log import Store
from turnlog.store.verify import verify_session

CHILD = Path(__file__).with_name("fork_child.py")


@function_tool
def lookup(key: str) -> str:
    """Looks a key up."""
    return f"value of {key}"


def test_a_fork_killed_midway_leaves_no_fork_or_a_whole_one(store_url: str) -> None:
    with subprocess.Popen(
        [sys.executable, str(CHILD), store_url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        assert proc.stdout is not None
        assert proc.stderr is not None
        try:
            forked = -1
            for line in proc.stdout:
                if line.startswith("FORKED"):
                    forked = int(line.split()[1])
                    if forked >= 5:
                        break
            else:
                pytest.fail(f"child exited early: {proc.stderr.read()}")
            os.kill(proc.pid, signal.SIGKILL)  # a fork is under way by now
        finally:
            proc.kill()
            proc.wait(timeout=30)
    with Runtime.open(store_url) as rt:
        forks = sorted(sid for sid in rt.sessions() if sid.startswith("f-"))
        assert len(forks) in (forked + 1, forked + 2)
        expected = rt.checkpoints.at("src", turn=2).context
        for fork_id in forks:
            assert verify_session(rt.store, fork_id).ok
            assert rt.checkpoints.load(fork_id).context == expected
        model = ScriptedModel(["goes on"])
        fork = rt.create_session(Agent("a", model=model), session_id=forks[-1])
        assert fork.prompt("next", timeout=10).final_output == "goes on"


def fill(url: str) -> None:
    model = ScriptedModel()
    for n in range(3):
        model.add(calls(tool_call("lookup", {"key": f"k{n}"})), f"answer {n}")
    model.add("fork answer")
    with Runtime.open(url) as rt:
        session = rt.create_session(
            Agent("a", model=model, tools=[lookup]), session_id="src"
        )
        for n in range(3):
            session.prompt(f"question {n}", timeout=10)
        fork = rt.fork_session("src", after_turn=2, session_id="f")
        fork.prompt("in the fork", timeout=10)
        rt.fork_session("f", session_id="ff")


def tamper_output(url: str, key: str) -> int:
    """Alters the output of the lookup of ``key`` in the log; its position."""
    store = Store(url)
    try:
        table = store.events_table
        column = store.backend.position_column
        needle = f'"output":"value of {key}"'.encode()
        ids = [turn_uuid("src", n) for n in range(1, 4)]
        for position, _, _, topic, state in store.stored_rows(ids):
            if topic == "turnlog:ToolCallFinished" and needle in state:
                forged = state.replace(needle, b'"output":"forged"')
                with store.transaction() as cursor:
                    cursor.execute(
                        store.sql(f"UPDATE {table} SET state = ? WHERE {column} = ?"),
                        (forged, position),
                    )
                return position
    finally:
        store.close()
    raise AssertionError(f"no output for {key}")


def problems(url: str) -> dict[str, object]:
    store = Store(url)
    try:
        return {sid: verify_session(store, sid).problem for sid in ("src", "f", "ff")}
    finally:
        store.close()


def test_altering_the_source_before_the_fork_point_is_named_by_every_session(
    store_url: str,
) -> None:
    fill(store_url)
    assert problems(store_url) == {"src": None, "f": None, "ff": None}
    position = tamper_output(store_url, "k1")  # turn 2: before the fork point
    found = problems(store_url)
    for session_id in ("src", "f", "ff"):
        problem = found[session_id]
        assert problem is not None, session_id
        assert (problem.kind, problem.position) == ("altered", position)


def test_altering_the_source_after_the_fork_point_leaves_the_fork_whole(
    store_url: str,
) -> None:
    fill(store_url)
    position = tamper_output(store_url, "k2")  # turn 3: after the fork point
    found = problems(store_url)
    assert found["src"].position == position
    assert found["f"] is None
    assert found["ff"] is None


def views(url: str) -> dict:
    store = Store(url)
    try:
        tables = ViewTables(store)
        return {
            (view, part): tables.range(view, part)
            for view in ("checkpoints", "transcript", "executions", "sessions")
            for part in tables.parts(view)
        }
    finally:
        store.close()


def test_rebuilt_views_equal_the_live_ones_for_forks_and_rewinds(
    store_url: str,
) -> None:
    fill(store_url)
    with Runtime.open(store_url) as rt:
        model = ScriptedModel(["again"])
        agent = Agent("a", model=model, tools=[lookup])
        session = rt.create_session(agent, session_id="f")
        session.rewind(after_turn=1)
        session.prompt("edited", timeout=10)
        live_checkpoint = rt.checkpoints.load("f")
        live_pages = rt.executions.page("f", limit=10)
    live = views(store_url)
    store = Store(store_url)
    try:
        rebuild(store)
    finally:
        store.close()
    assert views(store_url) == live
    with Runtime.open(store_url) as rt:
        assert rt.checkpoints.load("f") == live_checkpoint
        assert rt.executions.page("f", limit=10) == live_pages
        assert [r.number for r in live_pages.executions] == [1, 2, 3, 4]


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    turns=st.lists(st.booleans(), min_size=1, max_size=4),
    data=st.data(),
)
def test_a_fork_has_the_source_context_at_its_point(
    store_url: str, turns: list[bool], data: st.DataObject
) -> None:
    """For a random session and a random fork point, on both stores."""
    source, fork_id = f"src-{uuid.uuid4().hex[:8]}", f"f-{uuid.uuid4().hex[:8]}"
    model = ScriptedModel()
    for n, with_tool in enumerate(turns):
        if with_tool:
            model.add(calls(tool_call("lookup", {"key": f"k{n}"})))
        model.add(f"answer {n}")
    with Runtime.open(store_url) as rt:
        session = rt.create_session(
            Agent("a", model=model, tools=[lookup]), session_id=source
        )
        for n in range(len(turns)):
            session.prompt(f"question {n}", timeout=10)
        point = data.draw(st.integers(min_value=0, max_value=len(turns)))
        fork = rt.fork_session(source, after_turn=point, session_id=fork_id)
        at_point = rt.checkpoints.at(source, turn=point) if point else None
        expected = () if at_point is None else at_point.context
        assert rt.checkpoints.load(fork_id).context == expected
        assert [m.content for m in fork.messages()] == [
            m.content for m in rt.checkpoints.load(fork_id).messages()
        ]
        assert len(rt.store.stored_rows([session_uuid(fork_id)])) == 1
