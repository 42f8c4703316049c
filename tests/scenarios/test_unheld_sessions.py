"""Sessions nobody holds: they passivate once idle and the runtime lets go.

A handle (or a subscription of it) holds its session: the session then
keeps its ``idle_timeout``. Once every handle is dropped, nobody can call
the session but the log's other parties, so it passivates soon after it
idles, and the runtime keeps nothing of it: the next ``create_session``
opens it from the log. The runtime's memory and threads follow the
sessions in use, not the sessions ever opened. Counted, not timed: the
default ``idle_timeout`` (a minute) is far above every wait here.
"""

from __future__ import annotations

import gc
from typing import Any

import pytest
from kept_sessions import activations

from turnlog import Agent, Runtime, ScriptedModel, calls, function_tool, tool_call
from turnlog.testing import HeldModel

SESSIONS = 12
WAIT = 20.0


def agent(*answers: str) -> Agent:
    return Agent("a", model=ScriptedModel(list(answers) or ["ok"] * 4))


def test_sessions_nobody_holds_passivate_and_are_let_go(store_url: str) -> None:
    with Runtime.open(store_url) as rt:
        ids = []
        for number in range(SESSIONS):
            session = rt.create_session(agent())
            session.prompt(f"hello {number}")
            ids.append(session.session_id)
            del session
        assert rt.wait_live_sessions(0, timeout=WAIT)
        assert activations() == 0
        # The store keeps no chain head or fence of sessions it gave back.
        assert rt.store.sessions_kept() == 0
        # Let go, not lost: it opens again from the log, and runs.
        again = rt.create_session(agent("again"), session_id=ids[0])
        assert again.prompt("once more").final_output == "again"
        assert [m.content for m in again.messages() if m.role == "user"] == [
            "hello 0",
            "once more",
        ]


def test_a_held_session_keeps_its_idle_timeout(store_url: str) -> None:
    with Runtime.open(store_url) as rt:
        held = rt.create_session(agent())
        held.prompt("kept")
        dropped = rt.create_session(agent())
        dropped.prompt("let go")
        del dropped
        assert rt.wait_live_sessions(1, timeout=WAIT)
        assert not held.wait_passivated(0)  # its actor still runs
        assert not rt.wait_live_sessions(0, timeout=0.05)  # so does this wait
        with pytest.raises(ValueError, match="at_most"):
            rt.wait_live_sessions(-1)
        assert activations() == 1
        assert held.prompt("still here").final_output == "ok"


def test_a_run_nobody_waits_on_ends_before_its_session_passivates(
    store_url: str,
) -> None:
    model = HeldModel(ScriptedModel(["finished"]))
    with Runtime.open(store_url) as rt:
        session = rt.create_session(Agent("a", model=model))
        session_id = session.session_id
        session.send_input("go")
        assert model.entered.wait(WAIT)
        del session
        gc.collect()
        assert rt.live_sessions() == 1  # the run holds its actor
        model.release()
        assert rt.wait_live_sessions(0, timeout=WAIT)
        reopened = rt.create_session(Agent("a", model=model), session_id=session_id)
        assert reopened.messages()[-1].content == "finished"  # the run ended whole
        assert not reopened.running()


def _run_a_session_its_own_tool_refers_to(store_url: str) -> None:
    sessions: list[Any] = []

    @function_tool
    def count_messages() -> str:
        """How many messages the session holds."""
        return str(len(sessions[0].messages()))

    model = ScriptedModel([calls(tool_call("count_messages")), "counted"])
    with Runtime.open(store_url) as rt:
        agent = Agent("a", model=model, tools=[count_messages])
        sessions.append(rt.create_session(agent))
        assert sessions[0].prompt("count").final_output == "counted"


def test_a_session_its_own_tool_refers_to_is_let_go_with_its_runtime(
    store_url: str,
) -> None:
    # A tool that closes over its session (to read its state, say) makes a
    # cycle: session -> actor -> agent -> tool -> session. While the
    # runtime runs, that holds the session, as any reference does; once
    # the runtime is closed, nothing outside the cycle may keep it alive.
    before = activations()
    _run_a_session_its_own_tool_refers_to(store_url)
    assert activations() == before
